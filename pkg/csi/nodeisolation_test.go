package csi

// Regression tests of the node's isolation of one volume's paths from another's (issue 24,
// second attack run): an unpublish acts only on this volume's publish, an unstage waits for
// the unpublish, a refused block stage leaves no loop device, and nothing is staged or
// published inside a volume's mount.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

// losetupOf is what losetup -j says of the loop devices attached to file ("" for none).
func losetupOf(file string) string {
	out, _ := exec.Command("losetup", "-j", file).CombinedOutput()
	return strings.TrimSpace(string(out))
}

// TestNodeUnpublishOnlyThisVolumesPublish: NodeUnpublishVolume of another volume ID at
// vol-a's publish target, at vol-a's staging path, or at a block stage's <staging>/block
// succeeds (nothing of that volume is there) and leaves vol-a's mounts in place; vol-a's own
// unpublish still unmounts its target.
func TestNodeUnpublishOnlyThisVolumesPublish(t *testing.T) {
	mounters(t, func(t *testing.T, m mount.Mounter) {
		ctx := context.Background()
		e := newNode(t, m, nil)
		a, b := ownerVol{id: "vol-a"}, ownerVol{id: "vol-b", block: true}
		sa, ta, sb := filepath.Join(e.dir, "sa"), filepath.Join(e.dir, "pods", "a"), filepath.Join(e.dir, "sb")
		cleanupMounts(t, m, ta, sa, b.stagedAt(sb))
		cleanupLoops(t, m, e.srv.blockFile(b.id))
		_, err := e.srv.NodeStageVolume(ctx, a.stageReq(sa))
		wantCode(t, err, codes.OK)
		_, err = e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: a.id, StagingTargetPath: sa, TargetPath: ta, VolumeCapability: a.cap()})
		wantCode(t, err, codes.OK)
		_, err = e.srv.NodeStageVolume(ctx, b.stageReq(sb))
		wantCode(t, err, codes.OK)
		for _, p := range []string{ta, sa, b.stagedAt(sb)} {
			for _, other := range []string{"vol-z", b.id, a.id} {
				if p == ta && other == a.id {
					continue
				}
				_, err = e.srv.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: other, TargetPath: p})
				wantCode(t, err, codes.OK)
				if mp, err := m.MountPoint(p); err != nil || mp == nil {
					t.Fatalf("the mount at %s is gone after NodeUnpublishVolume(%s) there (%v)", p, other, err)
				}
			}
		}
		_, err = e.srv.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: a.id, TargetPath: ta})
		wantCode(t, err, codes.OK)
		if mp, _ := m.MountPoint(ta); mp != nil {
			t.Errorf("vol-a's own unpublish left %s mounted", ta)
		}
	})
}

// TestNodeUnstageRefusedWhilePublished: a block volume staged and published, then unstaged
// without the unpublish, is FAILED_PRECONDITION (CSI spec, NodeUnstageVolume errors:
// "Volume published to target paths") and its loop device stays, so another volume's stage
// cannot get the same /dev/loopN under the remaining publish; after the unpublish the
// unstage succeeds.
func TestNodeUnstageRefusedWhilePublished(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("real loop devices and bind mounts need root")
	}
	ctx := context.Background()
	m := mount.NewLinux()
	e := newNode(t, m, nil)
	a, b := ownerVol{id: "vol-a", block: true}, ownerVol{id: "vol-b", block: true}
	sa, ta, sb := filepath.Join(e.dir, "sa"), filepath.Join(e.dir, "pods", "a"), filepath.Join(e.dir, "sb")
	cleanupMounts(t, m, ta, a.stagedAt(sa), b.stagedAt(sb))
	cleanupLoops(t, m, e.srv.blockFile(a.id), e.srv.blockFile(b.id))
	_, err := e.srv.NodeStageVolume(ctx, a.stageReq(sa))
	wantCode(t, err, codes.OK)
	_, err = e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: a.id, StagingTargetPath: sa, TargetPath: ta, VolumeCapability: a.cap()})
	wantCode(t, err, codes.OK)
	_, err = e.srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: a.id, StagingTargetPath: sa})
	wantCode(t, err, codes.FailedPrecondition)
	wantLoop(t, m, e.srv.blockFile(a.id), true)
	_, err = e.srv.NodeStageVolume(ctx, b.stageReq(sb))
	wantCode(t, err, codes.OK)
	pa, _ := m.MountPoint(ta)
	pb, _ := m.MountPoint(b.stagedAt(sb))
	if pa == nil || pb == nil || pa.Device == pb.Device {
		t.Fatalf("vol-a's publish %s (%+v) and vol-b's stage (%+v) must be two devices", ta, pa, pb)
	}
	_, err = e.srv.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: a.id, TargetPath: ta})
	wantCode(t, err, codes.OK)
	_, err = e.srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: a.id, StagingTargetPath: sa})
	wantCode(t, err, codes.OK)
	wantLoop(t, m, e.srv.blockFile(a.id), false)
}

// TestNodeRefusedBlockStageLeavesNoLoop: a block stage refused because <staging>/block is a
// FIFO, a folder or a link leaves no loop device attached to the volume's backing file.
func TestNodeRefusedBlockStageLeavesNoLoop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("real loop devices need root")
	}
	for name, mk := range map[string]func(p string) error{
		"fifo":   func(p string) error { return unix.Mkfifo(p, 0o640) },
		"folder": func(p string) error { return os.Mkdir(p, 0o750) },
		"link":   func(p string) error { return os.Symlink("/dev/null", p) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			m := mount.NewLinux()
			e := newNode(t, m, nil)
			v := ownerVol{id: "vol-b", block: true}
			st := filepath.Join(e.dir, "st")
			cleanupLoops(t, m, e.srv.blockFile(v.id))
			if err := os.MkdirAll(st, 0o750); err != nil {
				t.Fatal(err)
			}
			if err := mk(v.stagedAt(st)); err != nil {
				t.Fatal(err)
			}
			_, err := e.srv.NodeStageVolume(ctx, v.stageReq(st))
			wantCode(t, err, codes.FailedPrecondition)
			if l := losetupOf(e.srv.blockFile(v.id)); l != "" {
				t.Errorf("a loop device is attached after the refused stage: %s", l)
			}
		})
	}
}

// TestNodeNoStageOrPublishInsideAVolume: a staging_target_path or target_path inside
// another volume's mount (its staging mount or its publish, at any depth) is
// FAILED_PRECONDITION and nothing is created in that volume's data.
func TestNodeNoStageOrPublishInsideAVolume(t *testing.T) {
	mounters(t, func(t *testing.T, m mount.Mounter) {
		ctx := context.Background()
		e := newNode(t, m, nil)
		a, b, c := ownerVol{id: "vol-a"}, ownerVol{id: "vol-b"}, ownerVol{id: "vol-c", block: true}
		sa, ta, sb := filepath.Join(e.dir, "sa"), filepath.Join(e.dir, "pods", "a"), filepath.Join(e.dir, "sb")
		inside := []string{filepath.Join(sa, "inner"), filepath.Join(ta, "x", "inner")}
		// The inner paths first: what a wrongly accepted stage or publish mounted there.
		cleanupMounts(t, m, ta, sa, sb)
		cleanupMounts(t, m, c.stagedAt(inside[0]), c.stagedAt(inside[1]), inside[0], inside[1])
		cleanupLoops(t, m, e.srv.blockFile(c.id))
		_, err := e.srv.NodeStageVolume(ctx, a.stageReq(sa))
		wantCode(t, err, codes.OK)
		_, err = e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: a.id, StagingTargetPath: sa, TargetPath: ta, VolumeCapability: a.cap()})
		wantCode(t, err, codes.OK)
		_, err = e.srv.NodeStageVolume(ctx, b.stageReq(sb))
		wantCode(t, err, codes.OK)
		for _, in := range inside {
			for _, v := range []ownerVol{{id: "vol-d"}, c} {
				_, err = e.srv.NodeStageVolume(ctx, v.stageReq(in))
				wantCode(t, err, codes.FailedPrecondition)
			}
			_, err = e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: b.id, StagingTargetPath: sb, TargetPath: in, VolumeCapability: b.cap()})
			wantCode(t, err, codes.FailedPrecondition)
		}
		for _, name := range []string{"inner", "x"} {
			if _, err := os.Lstat(filepath.Join(e.srv.dataDir(a.id), name)); err == nil {
				t.Errorf("a stage or publish created %s in vol-a's data", name)
			}
		}
	})
}
