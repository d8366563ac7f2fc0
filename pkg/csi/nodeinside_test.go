package csi

// Regression tests of the node's "inside a volume" check and of its bounds (issue 24
// follow-ups): the check compares identities without a descriptor per data folder, so a
// scarce descriptor table cannot make it miss a volume, and past maxDataEntries data-folder
// entries or maxPublishRecords publish records the node refuses instead of deciding on a part.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

// scarceFds leaves this process exactly free descriptors until the test ends: it lowers
// RLIMIT_NOFILE's soft limit (to 1024 at most) and holds every other free descriptor
// (/dev/null). The cleanup closes them and restores the limit; register it after the
// cleanups that need descriptors (unmounts, temp dir removal), so that it runs before them.
func scarceFds(t *testing.T, free int) {
	t.Helper()
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = min(lim.Cur, 1024)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	var held []int
	release := func() {
		for _, fd := range held {
			unix.Close(fd)
		}
		held = nil
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
			t.Errorf("restore RLIMIT_NOFILE: %v", err)
		}
	}
	t.Cleanup(release)
	for {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.EMFILE) {
			break
		}
		if err != nil {
			release()
			t.Fatal(err)
		}
		held = append(held, fd)
	}
	if len(held) < free {
		release()
		t.Fatalf("only %d descriptors free under RLIMIT_NOFILE %d", len(held), lim.Cur)
	}
	for _, fd := range held[len(held)-free:] {
		unix.Close(fd)
	}
	held = held[:len(held)-free]
}

// publishInsideSetup stages vol-a (a mount volume) at <root>/sa and publishes it at
// <root>/pods/a, stages vol-b at <root>/sb, and returns the node, vol-b's staging path and a
// target inside vol-a's publish.
func publishInsideSetup(t *testing.T, m mount.Mounter) (e *nodeEnv, sb, inside string) {
	t.Helper()
	ctx := context.Background()
	e = newNode(t, m, nil)
	a, b := ownerVol{id: "vol-a"}, ownerVol{id: "vol-b"}
	sa, ta := filepath.Join(e.dir, "sa"), filepath.Join(e.dir, "pods", "a")
	sb, inside = filepath.Join(e.dir, "sb"), filepath.Join(ta, "x", "inner")
	cleanupMounts(t, m, inside, ta, sa, sb)
	_, err := e.srv.NodeStageVolume(ctx, a.stageReq(sa))
	wantCode(t, err, codes.OK)
	_, err = e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: a.id, StagingTargetPath: sa, TargetPath: ta, VolumeCapability: a.cap()})
	wantCode(t, err, codes.OK)
	_, err = e.srv.NodeStageVolume(ctx, b.stageReq(sb))
	wantCode(t, err, codes.OK)
	return e, sb, inside
}

// publishB publishes vol-b (staged at sb) at target and returns the error.
func publishB(e *nodeEnv, sb, target string) error {
	_, err := e.srv.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{VolumeId: "vol-b", StagingTargetPath: sb, TargetPath: target, VolumeCapability: ownerVol{id: "vol-b"}.cap()})
	return err
}

// wantRefused checks that err has code and a message containing msg, and that nothing was
// mounted or created at target (nor its parent, inside vol-a's data).
func wantRefused(t *testing.T, e *nodeEnv, err error, code codes.Code, msg, target string) {
	t.Helper()
	if status.Code(err) != code || !strings.Contains(status.Convert(err).Message(), msg) {
		t.Errorf("publish of vol-b at %s: got %v, want %s with %q", target, err, code, msg)
	}
	if mp, _ := e.mounter.MountPoint(target); mp != nil {
		t.Errorf("%s was mounted", target)
	}
	if _, err := os.Lstat(filepath.Join(e.srv.dataDir("vol-a"), "x")); err == nil {
		t.Error("the publish created x in vol-a's data")
	}
}

// TestNodeInsideVolumeNeedsNoDescriptorPerDataFolder: with 1,000 other volumes' data
// folders and 16 free descriptors, a publish inside vol-a's publish is still refused as
// inside vol-a (FAILED_PRECONDITION), and nothing is mounted. Before, insideVolume opened a
// descriptor per data folder and skipped those it could not open: it missed vol-a and
// published inside it (with real mounts: x created in vol-a's data).
func TestNodeInsideVolumeNeedsNoDescriptorPerDataFolder(t *testing.T) {
	mounters(t, func(t *testing.T, m mount.Mounter) {
		e, sb, inside := publishInsideSetup(t, m)
		for i := range 1000 {
			if err := os.MkdirAll(e.srv.dataDir(fmt.Sprintf("other-%d", i)), 0o750); err != nil {
				t.Fatal(err)
			}
		}
		scarceFds(t, 16)
		err := publishB(e, sb, inside)
		wantRefused(t, e, err, codes.FailedPrecondition, "a mount of volume vol-a", inside)
	})
}

// fillDir creates empty files in dir until it has n entries.
func fillDir(t *testing.T, dir string, n int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; len(entries)+i < n; i++ {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("junk-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}

// TestNodeInsideVolumeBoundsDataEntries: with maxDataEntries+1 entries in the volumes' data
// folder, a publish below a mount that is not a stage is FAILED_PRECONDITION saying the node
// cannot tell, and nothing is mounted; with maxDataEntries entries it decides (inside vol-a).
// Before, the node read the first maxDataEntries entries and decided on those.
func TestNodeInsideVolumeBoundsDataEntries(t *testing.T) {
	m := mount.NewFake()
	e, sb, inside := publishInsideSetup(t, m)
	dataRoot := e.srv.dataRoot().Dir()
	fillDir(t, dataRoot, maxDataEntries+1)
	err := publishB(e, sb, inside)
	wantRefused(t, e, err, codes.FailedPrecondition, fmt.Sprintf("more than %d entries", maxDataEntries), inside)
	if err := os.Remove(filepath.Join(dataRoot, "junk-0")); err != nil {
		t.Fatal(err)
	}
	err = publishB(e, sb, inside)
	wantRefused(t, e, err, codes.FailedPrecondition, "a mount of volume vol-a", inside)
}

// TestNodeUnstageBoundsPublishRecords: with maxPublishRecords+1 publish records of vol-1,
// its unstage is FAILED_PRECONDITION saying the node cannot tell whether it is still
// published, and the stage stays mounted; with maxPublishRecords records (none of a live
// publish) the unstage proceeds. Before, the node read the first maxPublishRecords records
// and unstaged on what those said.
func TestNodeUnstageBoundsPublishRecords(t *testing.T) {
	m := mount.NewFake()
	e, staging := stagedNode(t, m)
	records := filepath.Dir(e.srv.dir.PublishRecord("vol-1", "/"))
	fillDir(t, records, maxPublishRecords+1)
	ctx := context.Background()
	_, err := e.srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), fmt.Sprintf("more than %d publish records", maxPublishRecords)) {
		t.Errorf("unstage with %d publish records: got %v, want FailedPrecondition saying the bound", maxPublishRecords+1, err)
	}
	if mp, _ := m.MountPoint(staging); mp == nil {
		t.Fatal("the refused unstage unmounted the stage")
	}
	if err := os.Remove(filepath.Join(records, "junk-0")); err != nil {
		t.Fatal(err)
	}
	_, err = e.srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging})
	wantCode(t, err, codes.OK)
	if mp, _ := m.MountPoint(staging); mp != nil {
		t.Error("the unstage with maxPublishRecords records left the stage mounted")
	}
}
