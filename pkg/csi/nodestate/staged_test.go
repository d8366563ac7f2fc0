package nodestate

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

// TestStagedRecordAccessType: a stage record keeps the access type across a restart, and a
// marker of a driver before the access type was recorded (the bare mount point path) is
// still read: block when it is <staging>/block with a device mounted there, else mount.
func TestStagedRecordAccessType(t *testing.T) {
	root := t.TempDir()
	d := NewDir(filepath.Join(root, "state"))
	m := mount.NewFake()
	m.DevDir = root
	mountDir := filepath.Join(root, "smount")
	blockDir := filepath.Join(root, "sblock")
	blockFile := filepath.Join(blockDir, "block")
	backing := filepath.Join(root, "block.img")
	for _, p := range []string{mountDir, blockDir} {
		if err := os.MkdirAll(p, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{blockFile, backing} {
		if err := os.WriteFile(p, nil, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Truncate(backing, 1<<20); err != nil {
		t.Fatal(err)
	}
	lp, err := m.AttachLoop(backing)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.BindMount(root, mountDir, false); err != nil {
		t.Fatal(err)
	}
	if err := m.BindMount(lp.Path, blockFile, false); err != nil {
		t.Fatal(err)
	}
	want := map[string]Stage{
		"vol-new-mount":    {Path: mountDir},
		"vol-new-block":    {Path: blockFile, Block: true},
		"vol-legacy-mount": {Path: mountDir},
		"vol-legacy-block": {Path: blockFile, Block: true},
	}
	s := NewStaged(d, m)
	s.Set(context.Background(), "vol-new-mount", want["vol-new-mount"])
	s.Set(context.Background(), "vol-new-block", want["vol-new-block"])
	for id, p := range map[string]string{"vol-legacy-mount": mountDir, "vol-legacy-block": blockFile} {
		if err := os.MkdirAll(d.VolumeDir(id), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(d.StagedMarker(id), []byte(p), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	restarted := NewStaged(d, m)
	for id, w := range want {
		got, ok, err := restarted.Get(id)
		if err != nil || !ok || got != w {
			t.Errorf("Get(%s) = %+v, %v, %v; want %+v", id, got, ok, err, w)
		}
		if got.StagingPath() != map[bool]string{false: mountDir, true: blockDir}[w.Block] {
			t.Errorf("%s: StagingPath() = %s", id, got.StagingPath())
		}
	}
	if id, ok, _ := restarted.Owner(blockDir); !ok || (id != "vol-new-block" && id != "vol-legacy-block") {
		t.Errorf("Owner(%s) = %s, %v; want a block volume staged there", blockDir, id, ok)
	}
	restarted.Set(context.Background(), "vol-new-block", Stage{})
	if _, ok, _ := restarted.Get("vol-new-block"); ok {
		t.Error("vol-new-block still staged after Set(Stage{})")
	}
	if _, err := os.Stat(d.StagedMarker("vol-new-block")); !os.IsNotExist(err) {
		t.Errorf("marker of vol-new-block kept: %v", err)
	}
}
