package csi

// Regression tests of the node's isolation of one volume's paths from another's (issue 24,
// second attack run): an unpublish acts only on this volume's publish, an unstage waits for
// the unpublish, a refused block stage leaves no loop device, and nothing is staged or
// published inside a volume's mount.

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

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
