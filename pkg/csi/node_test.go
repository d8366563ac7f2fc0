package csi

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/internal/cloudfake"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

// fixedCapacity is a CapacityReporter that answers a set value or error.
type fixedCapacity struct {
	slots int64
	err   error
	block bool
}

func (c *fixedCapacity) MaxVolumesPerNode(ctx context.Context) (int64, error) {
	if c.block {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return c.slots, c.err
}
func (c *fixedCapacity) DebugState() any { return map[string]int64{"slots": c.slots} }

type nodeEnv struct {
	srv     *NodeServer
	fake    *cloudfake.Fake
	mounter mount.Mounter
	dir     string
	real    bool
}

func newNode(t *testing.T, m mount.Mounter, c CapacityReporter) *nodeEnv {
	t.Helper()
	f := cloudfake.New()
	f.AddInstance("i-1", "zone-a", 8, 1)
	dir := t.TempDir()
	if c == nil {
		c = &fixedCapacity{slots: 7}
	}
	_, real := m.(*mount.Linux)
	return &nodeEnv{
		srv:  NewNodeServer(NodeConfig{NodeID: "i-1", StateDir: filepath.Join(dir, "state"), Cloud: f, Mounter: m, Capacity: c}),
		fake: f, mounter: m, dir: dir, real: real,
	}
}

// mounters runs fn with the fake mounter and, as root, with real bind mounts.
func mounters(t *testing.T, fn func(t *testing.T, m mount.Mounter)) {
	t.Run("fake", func(t *testing.T) { fn(t, mount.NewFake()) })
	t.Run("linux", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("real bind mounts need root (CAP_SYS_ADMIN)")
		}
		m := mount.NewLinux()
		fn(t, m)
	})
}

// cleanupMounts unmounts whatever a failed test left under dir, before t.TempDir removal.
func cleanupMounts(t *testing.T, m mount.Mounter, paths ...string) {
	t.Cleanup(func() {
		for _, p := range paths {
			for i := 0; i < 4; i++ {
				if mp, _ := m.MountPoint(p); mp == nil {
					break
				}
				_ = m.Unmount(p)
			}
		}
	})
}

func TestNodeMountLifecycle(t *testing.T) {
	mounters(t, func(t *testing.T, m mount.Mounter) {
		ctx := context.Background()
		e := newNode(t, m, nil)
		staging, target := filepath.Join(e.dir, "staging"), filepath.Join(e.dir, "pods", "target")
		target2 := filepath.Join(e.dir, "pods", "target-ro")
		cleanupMounts(t, m, target, target2, staging)
		stage := &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging, VolumeCapability: rwo}
		for i := 0; i < 2; i++ {
			_, err := e.srv.NodeStageVolume(ctx, stage)
			wantCode(t, err, codes.OK)
		}
		pub := &csi.NodePublishVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging, TargetPath: target, VolumeCapability: rwo}
		for i := 0; i < 2; i++ {
			_, err := e.srv.NodePublishVolume(ctx, pub)
			wantCode(t, err, codes.OK)
		}
		ro := &csi.NodePublishVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging, TargetPath: target2, VolumeCapability: rwo, Readonly: true}
		_, err := e.srv.NodePublishVolume(ctx, ro)
		wantCode(t, err, codes.OK)
		// Same target, other read-only setting: incompatible.
		_, err = e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging, TargetPath: target, VolumeCapability: rwo, Readonly: true})
		wantCode(t, err, codes.AlreadyExists)

		if e.real {
			if err := os.WriteFile(filepath.Join(target, "hello"), []byte("data"), 0o640); err != nil {
				t.Fatalf("write through the published volume: %v", err)
			}
			if b, err := os.ReadFile(filepath.Join(e.srv.dataDir("vol-1"), "hello")); err != nil || string(b) != "data" {
				t.Fatalf("backing folder has %q, %v", b, err)
			}
			if err := os.WriteFile(filepath.Join(target2, "x"), nil, 0o640); err == nil {
				t.Fatal("wrote through a read-only publish")
			}
		}
		stats, err := e.srv.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "vol-1", VolumePath: target})
		wantCode(t, err, codes.OK)
		if len(stats.GetUsage()) != 2 || stats.GetUsage()[0].GetTotal() <= 0 || stats.GetUsage()[1].GetUnit() != csi.VolumeUsage_INODES {
			t.Errorf("stats = %v, want bytes and inodes", stats)
		}
		exp, err := e.srv.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "vol-1", VolumePath: target, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * GiB}})
		wantCode(t, err, codes.OK)
		if exp.GetCapacityBytes() != 2*GiB {
			t.Errorf("expand = %d, want 2GiB", exp.GetCapacityBytes())
		}

		for _, tp := range []string{target, target2} {
			for i := 0; i < 2; i++ {
				_, err = e.srv.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: tp})
				wantCode(t, err, codes.OK)
			}
			if _, err := os.Stat(tp); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("target %s still exists after unpublish: %v", tp, err)
			}
		}
		_, err = e.srv.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "vol-1", VolumePath: target})
		wantCode(t, err, codes.NotFound)
		for i := 0; i < 2; i++ {
			_, err = e.srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging})
			wantCode(t, err, codes.OK)
		}
		if mp, _ := m.MountPoint(staging); mp != nil {
			t.Fatalf("staging still mounted: %+v", mp)
		}
		// Publishing what is not staged is refused.
		_, err = e.srv.NodePublishVolume(ctx, pub)
		wantCode(t, err, codes.FailedPrecondition)
	})
}

func TestNodeBlockLifecycle(t *testing.T) {
	mounters(t, func(t *testing.T, m mount.Mounter) {
		ctx := context.Background()
		e := newNode(t, m, nil)
		staging, target := filepath.Join(e.dir, "staging"), filepath.Join(e.dir, "dev", "vol-2")
		cleanupMounts(t, m, target, filepath.Join(staging, stagedBlockFile))
		bcap := blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
		stage := &csi.NodeStageVolumeRequest{VolumeId: "vol-2", StagingTargetPath: staging, VolumeCapability: bcap,
			VolumeContext: map[string]string{VolumeContextSizeBytes: "2147483648"}}
		for i := 0; i < 2; i++ {
			_, err := e.srv.NodeStageVolume(ctx, stage)
			wantCode(t, err, codes.OK)
		}
		fi, err := os.Stat(e.srv.blockFile("vol-2"))
		if err != nil || fi.Size() != 2*GiB {
			t.Fatalf("backing file: %v, %v; want 2GiB", fi, err)
		}
		pub := &csi.NodePublishVolumeRequest{VolumeId: "vol-2", StagingTargetPath: staging, TargetPath: target, VolumeCapability: bcap}
		for i := 0; i < 2; i++ {
			_, err := e.srv.NodePublishVolume(ctx, pub)
			wantCode(t, err, codes.OK)
		}
		stats, err := e.srv.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "vol-2", VolumePath: target})
		wantCode(t, err, codes.OK)
		if e.real && (len(stats.GetUsage()) != 1 || stats.GetUsage()[0].GetTotal() != 2*GiB) {
			t.Errorf("block stats = %v, want 2GiB", stats)
		}
		exp, err := e.srv.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "vol-2", VolumePath: target,
			CapacityRange: &csi.CapacityRange{RequiredBytes: 3*GiB - 7}, VolumeCapability: bcap})
		wantCode(t, err, codes.OK)
		if fi, err := os.Stat(e.srv.blockFile("vol-2")); err != nil || fi.Size() != 3*GiB || exp.GetCapacityBytes() != 3*GiB {
			t.Errorf("after expand: file %v (%v), answer %d; want 3GiB", fi, err, exp.GetCapacityBytes())
		}
		if e.real {
			if fi, err := os.Stat(target); err != nil || fi.Size() != 3*GiB {
				t.Errorf("published file size %v, %v; want 3GiB", fi, err)
			}
		}
		for i := 0; i < 2; i++ {
			_, err = e.srv.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-2", TargetPath: target})
			wantCode(t, err, codes.OK)
			_, err = e.srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-2", StagingTargetPath: staging})
			wantCode(t, err, codes.OK)
		}
		if _, err := os.Stat(filepath.Join(staging, stagedBlockFile)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("staged block file left behind: %v", err)
		}
	})
}

func TestNodeValidation(t *testing.T) {
	ctx := context.Background()
	e := newNode(t, mount.NewFake(), nil)
	abs := filepath.Join(e.dir, "p")
	multi := mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)
	tests := map[string]func() error{
		"stage no id": func() error {
			_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{StagingTargetPath: abs, VolumeCapability: rwo})
			return err
		},
		"stage id escapes": func() error {
			_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "../x", StagingTargetPath: abs, VolumeCapability: rwo})
			return err
		},
		"stage no path": func() error {
			_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "v", VolumeCapability: rwo})
			return err
		},
		"stage no capability": func() error {
			_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: abs})
			return err
		},
		"stage multi-node": func() error {
			_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: abs, VolumeCapability: multi})
			return err
		},
		"unstage no path": func() error {
			_, err := e.srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "v"})
			return err
		},
		"publish no target": func() error {
			_, err := e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "v", StagingTargetPath: abs, VolumeCapability: rwo})
			return err
		},
		"publish relative target": func() error {
			_, err := e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "v", StagingTargetPath: abs, TargetPath: "rel", VolumeCapability: rwo})
			return err
		},
		"unpublish no id": func() error {
			_, err := e.srv.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{TargetPath: abs})
			return err
		},
		"stats no path": func() error {
			_, err := e.srv.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "v"})
			return err
		},
		"expand no path": func() error {
			_, err := e.srv.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "v"})
			return err
		},
	}
	for name, call := range tests {
		t.Run(name, func(t *testing.T) {
			wantCode(t, call(), codes.InvalidArgument)
			if _, err := os.Stat(filepath.Join(e.dir, "state")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("state dir was touched: %v", err)
			}
			if _, err := os.Stat(abs); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("path was created: %v", err)
			}
		})
	}
}

func TestNodeGetInfo(t *testing.T) {
	tests := []struct {
		name      string
		capacity  *fixedCapacity
		instErr   error
		timeout   time.Duration
		wantCode  codes.Code
		wantSlots int64
	}{
		{name: "reports capacity", capacity: &fixedCapacity{slots: 7}, wantSlots: 7},
		{name: "zero becomes one", capacity: &fixedCapacity{slots: 0}, wantSlots: 1},
		{name: "negative becomes one", capacity: &fixedCapacity{slots: -3}, wantSlots: 1},
		{name: "reporter error", capacity: &fixedCapacity{err: cloud.NewError(cloud.CodeUnavailable, "down")}, wantCode: codes.Unavailable},
		{name: "reporter blocks", capacity: &fixedCapacity{block: true}, timeout: 50 * time.Millisecond, wantCode: codes.DeadlineExceeded},
		{name: "instance unknown", capacity: &fixedCapacity{slots: 7}, instErr: cloud.NewError(cloud.CodeInstanceNotFound, "no"), wantCode: codes.NotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newNode(t, mount.NewFake(), tc.capacity)
			if tc.instErr != nil {
				e.fake.FailNext(cloud.OperationGetInstance, tc.instErr)
			}
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			resp, err := e.srv.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
			wantCode(t, err, tc.wantCode)
			if err != nil {
				return
			}
			if resp.GetMaxVolumesPerNode() != tc.wantSlots || resp.GetNodeId() != "i-1" ||
				resp.GetAccessibleTopology().GetSegments()[TopologyZoneKey] != "zone-a" {
				t.Errorf("NodeGetInfo = %v, want i-1, zone-a, %d slots", resp, tc.wantSlots)
			}
		})
	}
}

func TestNodeZoneIsFetchedOnceAndFixed(t *testing.T) {
	var ready atomic.Int32
	f := cloudfake.New()
	f.AddInstance("i-1", "zone-a", 8, 1)
	n := NewNodeServer(NodeConfig{NodeID: "i-1", StateDir: t.TempDir(), Cloud: f, Mounter: mount.NewFake(),
		Capacity: &fixedCapacity{slots: 3}, TopologyReady: func() { ready.Add(1) }})
	ctx := context.Background()
	f.FailNext(cloud.OperationGetInstance, cloud.NewError(cloud.CodeThrottled, "slow down"))
	_, err := n.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	wantCode(t, err, codes.Unavailable)
	for i := 0; i < 3; i++ {
		resp, err := n.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
		wantCode(t, err, codes.OK)
		if z := resp.GetAccessibleTopology().GetSegments()[TopologyZoneKey]; z != "zone-a" {
			t.Fatalf("zone = %q", z)
		}
		// The instance moving zones later must not change the reported topology.
		f.AddInstance("i-1", "zone-z", 8, 1)
	}
	if got := f.Calls(cloud.OperationGetInstance); got != 2 {
		t.Errorf("GetInstance called %d times, want 2 (one failure, one success)", got)
	}
	if ready.Load() != 1 {
		t.Errorf("TopologyReady called %d times, want 1", ready.Load())
	}
}

func TestNodeGetInfoWaitsBoundedForTopology(t *testing.T) {
	e := newNode(t, mount.NewFake(), nil)
	release := make(chan struct{})
	holderDone := make(chan struct{})
	// The holder's lookup then succeeds and persists the identity: let it finish before the
	// temporary state dir is removed.
	defer func() { close(release); <-holderDone }()
	e.fake.SetHook(cloud.OperationGetInstance, func(ctx context.Context) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	// One caller holds the lookup; a second must give up with its own deadline.
	go func() {
		defer close(holderDone)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = e.srv.Zone(ctx)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := e.srv.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	wantCode(t, err, codes.DeadlineExceeded)
}

func TestNodeStagedVolumesSurviveARestart(t *testing.T) {
	mounters(t, func(t *testing.T, m mount.Mounter) {
		ctx := context.Background()
		e := newNode(t, m, nil)
		mountStaging, blockStaging := filepath.Join(e.dir, "staging-1"), filepath.Join(e.dir, "staging-2")
		cleanupMounts(t, m, mountStaging, filepath.Join(blockStaging, stagedBlockFile))
		count := func(s *NodeServer, want int) {
			t.Helper()
			if n, err := s.StagedVolumes(); err != nil || n != want {
				t.Fatalf("StagedVolumes = %d, %v; want %d", n, err, want)
			}
		}
		count(e.srv, 0)
		for _, req := range []*csi.NodeStageVolumeRequest{
			{VolumeId: "vol-1", StagingTargetPath: mountStaging, VolumeCapability: rwo},
			{VolumeId: "vol-1", StagingTargetPath: mountStaging, VolumeCapability: rwo},
			{VolumeId: "vol-2", StagingTargetPath: blockStaging, VolumeCapability: blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER),
				VolumeContext: map[string]string{VolumeContextSizeBytes: "1048576"}},
		} {
			_, err := e.srv.NodeStageVolume(ctx, req)
			wantCode(t, err, codes.OK)
		}
		count(e.srv, 2)

		restarted := func() *NodeServer {
			return NewNodeServer(NodeConfig{NodeID: "i-1", StateDir: e.srv.cfg.StateDir, Cloud: e.fake, Mounter: m, Capacity: e.srv.cfg.Capacity})
		}
		count(restarted(), 2)

		// A mount gone behind the plugin's back (a reboot) is not staged any more.
		if err := m.Unmount(filepath.Join(blockStaging, stagedBlockFile)); err != nil {
			t.Fatal(err)
		}
		s := restarted()
		count(s, 1)
		if _, err := os.Stat(s.stagedMarkerPath("vol-2")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale marker of vol-2 kept: %v", err)
		}
		_, err := s.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: mountStaging})
		wantCode(t, err, codes.OK)
		count(s, 0)
		count(restarted(), 0)
		_, err = s.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: mountStaging, VolumeCapability: rwo})
		wantCode(t, err, codes.OK)
		count(s, 1)
		_, err = s.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: mountStaging})
		wantCode(t, err, codes.OK)
	})
}

func TestNodeStagedVolumesUnreadableState(t *testing.T) {
	e := newNode(t, mount.NewFake(), nil)
	if err := os.MkdirAll(e.srv.cfg.StateDir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.srv.cfg.StateDir, "volumes"), []byte("not a folder"), 0o640); err != nil {
		t.Fatal(err)
	}
	if n, err := e.srv.StagedVolumes(); err == nil {
		t.Fatalf("StagedVolumes = %d, nil; want an error for an unreadable state dir", n)
	}
}
