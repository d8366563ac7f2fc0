package csi

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

// stagedNode is a node (fake or real mounts) with vol-1 staged as a mount volume at
// <root>/staging; the kubelet root is e.dir.
func stagedNode(t *testing.T, m mount.Mounter) (*nodeEnv, string) {
	t.Helper()
	e := newNode(t, m, nil)
	staging := filepath.Join(e.dir, "staging")
	cleanupMounts(t, m, staging)
	_, err := e.srv.NodeStageVolume(context.Background(), &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging, VolumeCapability: rwo})
	wantCode(t, err, codes.OK)
	return e, staging
}

// TestNodePathsStayInsideTheKubeletRoot: a staging or target path outside --kubelet-root,
// with "..", not clean, or past PATH_MAX/NAME_MAX is INVALID_ARGUMENT and nothing is created
// or mounted, for stage, publish, unstage and unpublish. Before, a staging path outside the
// kubelet's directory was created and bind-mounted, and a target with ".." was mounted at
// the cleaned location.
func TestNodePathsStayInsideTheKubeletRoot(t *testing.T) {
	mounters(t, func(t *testing.T, m mount.Mounter) {
		ctx := context.Background()
		paths := map[string]func(root, outside string) string{
			"outside the root":      func(root, outside string) string { return outside },
			"dot-dot":               func(root, outside string) string { return root + "/pods/../cleaned" },
			"dot-dot above root":    func(root, outside string) string { return root + "/../" + filepath.Base(root) + "-x" },
			"double slash":          func(root, outside string) string { return root + "//cleaned" },
			"trailing slash":        func(root, outside string) string { return root + "/cleaned" + "/" },
			"dot":                   func(root, outside string) string { return root + "/./cleaned" },
			"the root itself":       func(root, outside string) string { return root },
			"relative":              func(root, outside string) string { return "cleaned" },
			"over PATH_MAX":         func(root, outside string) string { return root + "/" + strings.Repeat("d/", 2100) + "d" },
			"element over NAME_MAX": func(root, outside string) string { return root + "/" + strings.Repeat("n", 256) },
			"control character":     func(root, outside string) string { return root + "/cleaned" + "\n" },
		}
		for name, path := range paths {
			t.Run(name, func(t *testing.T) {
				// A node of its own, so that what one case creates cannot hide another's.
				e, staging := stagedNode(t, m)
				outside, cleaned := filepath.Join(t.TempDir(), "outside"), filepath.Join(e.dir, "cleaned")
				p := path(e.dir, outside)
				// Only a driver that takes the path mounts anything here (HEAD did).
				cleanupLoops(t, m, e.srv.blockFile("vol-3"))
				cleanupMounts(t, m, outside, cleaned, filepath.Join(outside, stagedBlockFile), p, filepath.Clean(p),
					filepath.Join(p, stagedBlockFile), filepath.Join(filepath.Clean(p), stagedBlockFile))
				_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-2", StagingTargetPath: p, VolumeCapability: rwo})
				wantCode(t, err, codes.InvalidArgument)
				_, err = e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-3", StagingTargetPath: p,
					VolumeCapability: blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER), VolumeContext: map[string]string{VolumeContextSizeBytes: "1048576"}})
				wantCode(t, err, codes.InvalidArgument)
				_, err = e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging, TargetPath: p, VolumeCapability: rwo})
				wantCode(t, err, codes.InvalidArgument)
				_, err = e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-1", StagingTargetPath: p, TargetPath: filepath.Join(e.dir, "t"), VolumeCapability: rwo})
				wantCode(t, err, codes.InvalidArgument)
				_, err = e.srv.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: p})
				wantCode(t, err, codes.InvalidArgument)
				_, err = e.srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: p})
				wantCode(t, err, codes.InvalidArgument)
				made := []string{outside, cleaned, filepath.Join(e.dir, "t")}
				if c := filepath.Clean(p); filepath.IsAbs(p) && c != e.dir {
					made = append(made, c)
				}
				for _, q := range made {
					// Lstat of a path past PATH_MAX or NAME_MAX fails without saying "not exist".
					if _, err := os.Lstat(q); err == nil {
						t.Errorf("%s was created", cloud.Quote(q))
					}
				}
				if mp, _ := m.MountPoint(staging); mp == nil {
					t.Error("the refused unstage unmounted the staged volume")
				}
			})
		}
	})
}

// TestNodePublishRefusesWhatItWouldHide: publishing over a non-empty directory (mount), a
// non-empty file (block), or the wrong kind of file is FAILED_PRECONDITION and leaves the
// contents visible. Before, the publish returned OK and hid the directory's contents.
func TestNodePublishRefusesWhatItWouldHide(t *testing.T) {
	mounters(t, func(t *testing.T, m mount.Mounter) {
		ctx := context.Background()
		e, staging := stagedNode(t, m)
		full, file := filepath.Join(e.dir, "pods", "full"), filepath.Join(e.dir, "pods", "file")
		cleanupMounts(t, m, full, file)
		if err := os.MkdirAll(full, 0o750); err != nil {
			t.Fatal(err)
		}
		keep := filepath.Join(full, "keep")
		if err := os.WriteFile(keep, []byte("mine"), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte("mine"), 0o640); err != nil {
			t.Fatal(err)
		}
		for _, target := range []string{full, file} {
			_, err := e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging, TargetPath: target, VolumeCapability: rwo})
			wantCode(t, err, codes.FailedPrecondition)
			if mp, _ := m.MountPoint(target); mp != nil {
				t.Errorf("%s was mounted", target)
			}
		}
		if b, err := os.ReadFile(keep); err != nil || string(b) != "mine" {
			t.Errorf("%s reads %q, %v; want its contents visible", keep, b, err)
		}

		bstaging := filepath.Join(e.dir, "bstaging")
		bcap := blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
		cleanupLoops(t, m, e.srv.blockFile("vol-b"))
		cleanupMounts(t, m, filepath.Join(bstaging, stagedBlockFile))
		_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-b", StagingTargetPath: bstaging, VolumeCapability: bcap,
			VolumeContext: map[string]string{VolumeContextSizeBytes: "1048576"}})
		wantCode(t, err, codes.OK)
		for _, target := range []string{file, full} {
			_, err = e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-b", StagingTargetPath: bstaging, TargetPath: target, VolumeCapability: bcap})
			wantCode(t, err, codes.FailedPrecondition)
		}
		if b, err := os.ReadFile(file); err != nil || string(b) != "mine" {
			t.Errorf("%s reads %q, %v; want it untouched", file, b, err)
		}
		_, err = e.srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-b", StagingTargetPath: bstaging})
		wantCode(t, err, codes.OK)
	})
}

// TestNodeUnpublishRemovesOnlyWhatItCreated: unpublish removes the target only when the
// publish created it, is idempotent when something else is left there, and survives a
// restart (the record is in the state dir). Before, it removed any empty directory it was
// given, and answered INTERNAL "directory not empty" on every retry.
func TestNodeUnpublishRemovesOnlyWhatItCreated(t *testing.T) {
	mounters(t, func(t *testing.T, m mount.Mounter) {
		ctx := context.Background()
		e, staging := stagedNode(t, m)
		pods := filepath.Join(e.dir, "pods")
		coMade, ours, foreign := filepath.Join(pods, "co-made"), filepath.Join(pods, "ours"), filepath.Join(pods, "foreign")
		cleanupMounts(t, m, coMade, ours)
		for _, d := range []string{coMade, foreign} {
			if err := os.MkdirAll(d, 0o750); err != nil {
				t.Fatal(err)
			}
		}
		unpublish := func(s *NodeServer, target string) {
			t.Helper()
			for range 2 {
				_, err := s.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: target})
				wantCode(t, err, codes.OK)
			}
		}
		exists := func(p string, want bool) {
			t.Helper()
			_, err := os.Lstat(p)
			if got := err == nil; got != want {
				t.Errorf("%s exists = %v (%v), want %v", p, got, err, want)
			}
		}
		// Never published here: an empty directory stays.
		unpublish(e.srv, foreign)
		exists(foreign, true)

		// The CO made the (empty) target: publish uses it, unpublish leaves it, also after a
		// restart of the plugin.
		publish := func(target string) {
			t.Helper()
			_, err := e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging, TargetPath: target, VolumeCapability: rwo})
			wantCode(t, err, codes.OK)
		}
		publish(coMade)
		publish(ours)
		restarted := NewNodeServer(NodeConfig{NodeID: "i-1", StateDir: e.srv.cfg.StateDir, KubeletRoot: e.dir, Cloud: e.fake, Mounter: m, Capacity: e.srv.cfg.Capacity})
		unpublish(restarted, coMade)
		exists(coMade, true)
		if mp, _ := m.MountPoint(coMade); mp != nil {
			t.Errorf("%s still mounted", coMade)
		}

		// Created by the publish, but something was put there once the mount went away:
		// unpublish keeps it and succeeds, every time.
		if err := m.Unmount(ours); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ours, "left"), nil, 0o640); err != nil {
			t.Fatal(err)
		}
		unpublish(restarted, ours)
		exists(filepath.Join(ours, "left"), true)

		// Created by the publish and empty: removed.
		if err := os.Remove(filepath.Join(ours, "left")); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(ours); err != nil {
			t.Fatal(err)
		}
		publish(ours)
		unpublish(restarted, ours)
		exists(ours, false)
		if entries, _ := os.ReadDir(filepath.Dir(e.srv.dir.PublishRecord("vol-1", ours))); len(entries) != 0 {
			t.Errorf("publish records left behind: %v", entries)
		}
	})
}

// TestNodeGetVolumeStatsOnlyForItsVolumes: stats answer for the volume's staging path, its
// publish, and the kubelet's bind of a published block device, and NOT_FOUND for any other
// path or volume: /proc, a path outside the kubelet root, another volume's mount, a volume
// that is not staged. Before, NodeGetVolumeStats{volume_path:"/proc"} answered OK.
func TestNodeGetVolumeStatsOnlyForItsVolumes(t *testing.T) {
	mounters(t, func(t *testing.T, m mount.Mounter) {
		ctx := context.Background()
		e, staging := stagedNode(t, m)
		target := filepath.Join(e.dir, "pods", "target")
		staging2, bstaging := filepath.Join(e.dir, "staging-2"), filepath.Join(e.dir, "bstaging")
		btarget, kubeletMap := filepath.Join(e.dir, "block", "publish"), filepath.Join(e.dir, "block", "map", "pod")
		cleanupLoops(t, m, e.srv.blockFile("vol-b"))
		cleanupMounts(t, m, kubeletMap, btarget, filepath.Join(bstaging, stagedBlockFile), target, staging2)
		_, err := e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging, TargetPath: target, VolumeCapability: rwo})
		wantCode(t, err, codes.OK)
		_, err = e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-2", StagingTargetPath: staging2, VolumeCapability: rwo})
		wantCode(t, err, codes.OK)
		bcap := blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
		_, err = e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-b", StagingTargetPath: bstaging, VolumeCapability: bcap,
			VolumeContext: map[string]string{VolumeContextSizeBytes: "1048576"}})
		wantCode(t, err, codes.OK)
		if err := os.MkdirAll(filepath.Dir(btarget), 0o750); err != nil {
			t.Fatal(err)
		}
		_, err = e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-b", StagingTargetPath: bstaging, TargetPath: btarget, VolumeCapability: bcap})
		wantCode(t, err, codes.OK)
		// The kubelet binds the published device node into its global map path.
		if err := ensureFile(kubeletMap); err != nil {
			t.Fatal(err)
		}
		if err := m.BindMount(btarget, kubeletMap, false); err != nil {
			t.Fatal(err)
		}

		restarted := NewNodeServer(NodeConfig{NodeID: "i-1", StateDir: e.srv.cfg.StateDir, KubeletRoot: e.dir, Cloud: e.fake, Mounter: m, Capacity: e.srv.cfg.Capacity})
		for _, s := range []*NodeServer{e.srv, restarted} {
			for _, c := range []struct {
				id, path string
				want     codes.Code
			}{
				{"vol-1", staging, codes.OK},
				{"vol-1", target, codes.OK},
				{"vol-b", btarget, codes.OK},
				{"vol-b", kubeletMap, codes.OK},
				{"vol-1", "/proc", codes.NotFound},
				{"vol-1", "/", codes.NotFound},
				{"vol-1", "some/path", codes.NotFound},
				{"vol-1", target + "/..", codes.NotFound},
				{"vol-1", staging2, codes.NotFound},   // vol-2's mount
				{"vol-2", target, codes.NotFound},     // vol-1's publish
				{"vol-b", target, codes.NotFound},     // a block volume asked at a mount volume's path
				{"vol-1", kubeletMap, codes.NotFound}, // a mount volume asked at a block device
				{"vol-9", target, codes.NotFound},     // not staged here
				{"vol-1", filepath.Join(e.dir, "pods"), codes.NotFound},
			} {
				_, err := s.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: c.id, VolumePath: c.path})
				if got := status.Code(err); got != c.want {
					t.Errorf("stats{%s, %s} = %v, want %s", c.id, c.path, err, c.want)
				}
			}
		}
		if err := m.Unmount(kubeletMap); err != nil {
			t.Fatal(err)
		}
		// Each target is unpublished with its own volume ID: another volume's unpublish
		// leaves it (TestNodeUnpublishOnlyThisVolumesPublish).
		for id, tp := range map[string]string{"vol-1": target, "vol-b": btarget} {
			_, err = e.srv.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: tp})
			wantCode(t, err, codes.OK)
		}
		for id, sp := range map[string]string{"vol-1": staging, "vol-2": staging2, "vol-b": bstaging} {
			_, err = e.srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: sp})
			wantCode(t, err, codes.OK)
		}
	})
}

// TestNodeBoundsEveryField: every string of a node request is bounded before use: IDs by the
// cloud's identifier rule (128 bytes, no control character), maps by CSI's 4 KiB, mount
// flags by 128 bytes, paths by PATH_MAX; INVALID_ARGUMENT, and nothing is created. Before, a
// volume ID with a control character, a 1 MiB secrets map and a 5000-byte volume_path were
// used as given.
func TestNodeBoundsEveryField(t *testing.T) {
	ctx := context.Background()
	big := map[string]string{"k": strings.Repeat("v", 1<<20)}
	longFlag := mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
	longFlag.GetMount().MountFlags = []string{strings.Repeat("f", 200)}
	longPath := "/" + strings.Repeat("p/", 2500)
	ids := []string{strings.Repeat("v", 129), "vol\x01", "vol\x7f", " ", "..", "a/b", `a\b`}
	tests := map[string]func(e *nodeEnv, staging, target string) error{
		"stage secrets": func(e *nodeEnv, staging, target string) error {
			_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: staging, VolumeCapability: rwo, Secrets: big})
			return err
		},
		"stage volume_context": func(e *nodeEnv, staging, target string) error {
			_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: staging, VolumeCapability: rwo, VolumeContext: big})
			return err
		},
		"stage publish_context": func(e *nodeEnv, staging, target string) error {
			_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: staging, VolumeCapability: rwo, PublishContext: big})
			return err
		},
		"stage mount flag": func(e *nodeEnv, staging, target string) error {
			_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: staging, VolumeCapability: longFlag})
			return err
		},
		"publish secrets": func(e *nodeEnv, staging, target string) error {
			_, err := e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "v", StagingTargetPath: staging, TargetPath: target, VolumeCapability: rwo, Secrets: big})
			return err
		},
		"stats volume_path": func(e *nodeEnv, staging, target string) error {
			_, err := e.srv.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "v", VolumePath: longPath})
			return err
		},
		"stats staging_target_path": func(e *nodeEnv, staging, target string) error {
			_, err := e.srv.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "v", VolumePath: target, StagingTargetPath: longPath})
			return err
		},
		"expand volume_path": func(e *nodeEnv, staging, target string) error {
			_, err := e.srv.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "v", VolumePath: longPath})
			return err
		},
		"expand secrets": func(e *nodeEnv, staging, target string) error {
			_, err := e.srv.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "v", VolumePath: target, Secrets: big})
			return err
		},
		"expand mount flag": func(e *nodeEnv, staging, target string) error {
			_, err := e.srv.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "v", VolumePath: target, VolumeCapability: longFlag})
			return err
		},
	}
	for _, id := range ids {
		tests["stage id "+id] = func(e *nodeEnv, staging, target string) error {
			_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: rwo})
			return err
		}
		tests["unstage id "+id] = func(e *nodeEnv, staging, target string) error {
			_, err := e.srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging})
			return err
		}
		tests["publish id "+id] = func(e *nodeEnv, staging, target string) error {
			_, err := e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: rwo})
			return err
		}
		tests["unpublish id "+id] = func(e *nodeEnv, staging, target string) error {
			_, err := e.srv.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target})
			return err
		}
		tests["stats id "+id] = func(e *nodeEnv, staging, target string) error {
			_, err := e.srv.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: target})
			return err
		}
		tests["expand id "+id] = func(e *nodeEnv, staging, target string) error {
			_, err := e.srv.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: target})
			return err
		}
	}
	for name, call := range tests {
		t.Run(name, func(t *testing.T) {
			// A node of its own, so that what one case creates cannot hide another's.
			e := newNode(t, mount.NewFake(), nil)
			staging, target := filepath.Join(e.dir, "staging"), filepath.Join(e.dir, "target")
			wantCode(t, call(e, staging, target), codes.InvalidArgument)
			for _, p := range []string{e.srv.cfg.StateDir, staging, target} {
				if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s was created: %v", p, err)
				}
			}
		})
	}
}
