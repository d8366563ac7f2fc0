package nodestate

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestDirLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	first, err := NewDir(dir).Lock()
	if err != nil {
		t.Fatalf("first lock: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, lockFile))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("lock file holds %q (%v), want this pid %d", b, err, os.Getpid())
	}

	// flock belongs to the open file description, so a second open conflicts like a second
	// process would.
	second, err := NewDir(dir).Lock()
	if err == nil {
		_ = second.Close()
		t.Fatal("second lock succeeded while the first is held")
	}
	for _, want := range []string{dir, fmt.Sprintf("pid %d", os.Getpid()), "in use"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	// The refused open must not have clobbered the holder's pid.
	if b2, _ := os.ReadFile(filepath.Join(dir, lockFile)); string(b2) != string(b) {
		t.Errorf("lock file changed to %q by the refused lock", b2)
	}

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	third, err := NewDir(dir).Lock()
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	_ = third.Close()
}

func TestDirLayout(t *testing.T) {
	d := NewDir("/var/lib/x")
	for _, tc := range []struct{ got, want string }{
		{d.IdentityFile(), "/var/lib/x/node.json"},
		{d.CapacityStateFile(), "/var/lib/x/capacity.json"},
		{d.LockFile(), "/var/lib/x/.lock"},
		{d.VolumeDir("vol-1"), "/var/lib/x/volumes/vol-1"},
		{d.StagedMarker("vol-1"), "/var/lib/x/volumes/vol-1/staged"},
		{filepath.Dir(d.PublishRecord("vol-1", "/t")), "/var/lib/x/volumes/vol-1/published"},
	} {
		if tc.got != tc.want {
			t.Errorf("path %q, want %q", tc.got, tc.want)
		}
	}
	if d.PublishRecord("vol-1", "/a") == d.PublishRecord("vol-1", "/b") {
		t.Error("two targets share one publish record")
	}
	var none Dir
	if none.Enabled() || none.IdentityFile() != "" || none.CapacityStateFile() != "" || none.PublishRecord("v", "/t") != "" {
		t.Error("a Dir without state names state files")
	}
	if _, err := none.Lock(); err == nil {
		t.Error("Lock without a state dir succeeded")
	}
}

func TestIdentityRoundTrip(t *testing.T) {
	d := NewDir(filepath.Join(t.TempDir(), "state"))
	if _, ok, err := d.LoadIdentity(); ok || err != nil {
		t.Fatalf("LoadIdentity of nothing = %v, %v; want none, nil", ok, err)
	}
	want := Identity{Version: 1, NodeID: "i-1", Zone: "zone-a"}
	if err := d.SaveIdentity(want); err != nil {
		t.Fatal(err)
	}
	got, ok, err := d.LoadIdentity()
	if !ok || err != nil || got != want {
		t.Fatalf("LoadIdentity = %+v, %v, %v; want %+v", got, ok, err, want)
	}
	if err := os.WriteFile(d.IdentityFile(), []byte(`{"version":1,"nodeId":"i-1"}`), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.LoadIdentity(); err == nil || !strings.Contains(err.Error(), "incomplete") {
		t.Errorf("LoadIdentity of an identity without a zone = %v, want incomplete", err)
	}
}
