package csi

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
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

// Run has no background work: it returns at once.
func (c *fixedCapacity) Run(context.Context) error { return nil }

// Restore has nothing persisted to read.
func (c *fixedCapacity) Restore(context.Context) {}

type nodeEnv struct {
	srv     *NodeServer
	fake    *realCloud
	mounter mount.Mounter
	dir     string
	real    bool
}

func newNode(t *testing.T, m mount.Mounter, c CapacityReporter) *nodeEnv {
	t.Helper()
	f := newRealCloud(t)
	f.AddInstance("i-1", "zone-a", 8, 1)
	dir := t.TempDir()
	if c == nil {
		c = &fixedCapacity{slots: 7}
	}
	_, real := m.(*mount.Linux)
	return &nodeEnv{
		srv:  NewNodeServer(NodeConfig{NodeID: "i-1", StateDir: filepath.Join(dir, "state"), KubeletRoot: dir, Cloud: f, Mounter: m, Capacity: c}),
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

// loopFinder is what both mount.Mounter implementations offer besides the interface.
type loopFinder interface {
	FindLoop(file string) (mount.Loop, bool, error)
}

// cleanupLoops detaches whatever loop devices a failed test left on files, after the
// mounts (t.Cleanup runs last-registered first, so call this before cleanupMounts).
func cleanupLoops(t *testing.T, m mount.Mounter, files ...string) {
	t.Cleanup(func() {
		for _, f := range files {
			_ = m.DetachLoop(f)
		}
	})
}

// wantLoop checks whether file has a loop device attached, and returns it.
func wantLoop(t *testing.T, m mount.Mounter, file string, want bool) mount.Loop {
	t.Helper()
	lp, ok, err := m.(loopFinder).FindLoop(file)
	if err != nil || ok != want {
		t.Fatalf("FindLoop(%s) = %+v, %v, %v; want attached=%v", file, lp, ok, err, want)
	}
	return lp
}

// isDeviceNode is the kubelet's test of a mapped block volume path
// (volumepathhandler.IsDeviceBindMountExist): Lstat says it is a device.
func isDeviceNode(t *testing.T, p string) bool {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatalf("lstat %s: %v", p, err)
	}
	return fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0
}

func TestNodeBlockLifecycle(t *testing.T) {
	mounters(t, func(t *testing.T, m mount.Mounter) {
		ctx := context.Background()
		e := newNode(t, m, nil)
		staging, target := filepath.Join(e.dir, "staging"), filepath.Join(e.dir, "dev", "vol-2")
		staged := filepath.Join(staging, stagedBlockFile)
		cleanupLoops(t, m, e.srv.blockFile("vol-2"))
		cleanupMounts(t, m, target, staged)
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
		lp := wantLoop(t, m, e.srv.blockFile("vol-2"), true)
		if e.real && sysfsLoopCount(t, e.srv.blockFile("vol-2")) != 1 {
			t.Fatal("staging twice attached two loop devices")
		}
		pub := &csi.NodePublishVolumeRequest{VolumeId: "vol-2", StagingTargetPath: staging, TargetPath: target, VolumeCapability: bcap}
		for i := 0; i < 2; i++ {
			_, err := e.srv.NodePublishVolume(ctx, pub)
			wantCode(t, err, codes.OK)
		}
		// Both paths are mounts of the loop device, which the kubelet sees as device nodes.
		for _, p := range []string{staged, target} {
			mp, err := m.MountPoint(p)
			if err != nil || mp == nil || mp.Device != lp.Device {
				t.Fatalf("MountPoint(%s) = %+v, %v; want a mount of %s (%s)", p, mp, err, lp.Path, lp.Device)
			}
			if e.real && !isDeviceNode(t, p) {
				t.Fatalf("%s is not a block device node", p)
			}
		}
		if e.real {
			msg := []byte("written through the published device")
			f, err := os.OpenFile(target, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.WriteAt(msg, 1<<20)
			if err == nil {
				err = f.Sync()
			}
			f.Close()
			if err != nil {
				t.Fatalf("write through the published device: %v", err)
			}
			b := make([]byte, len(msg))
			bf, err := os.Open(e.srv.blockFile("vol-2"))
			if err != nil {
				t.Fatal(err)
			}
			_, err = bf.ReadAt(b, 1<<20)
			bf.Close()
			if err != nil || string(b) != string(msg) {
				t.Fatalf("backing file has %q, %v; want %q", b, err, msg)
			}
		}
		stats, err := e.srv.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "vol-2", VolumePath: target})
		wantCode(t, err, codes.OK)
		if len(stats.GetUsage()) != 1 || stats.GetUsage()[0].GetUnit() != csi.VolumeUsage_BYTES || stats.GetUsage()[0].GetTotal() != 2*GiB {
			t.Errorf("block stats = %v, want total 2GiB", stats)
		}
		exp, err := e.srv.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "vol-2", VolumePath: target,
			CapacityRange: &csi.CapacityRange{RequiredBytes: 3*GiB - 7}, VolumeCapability: bcap})
		wantCode(t, err, codes.OK)
		if fi, err := os.Stat(e.srv.blockFile("vol-2")); err != nil || fi.Size() != 3*GiB || exp.GetCapacityBytes() != 3*GiB {
			t.Errorf("after expand: file %v (%v), answer %d; want 3GiB", fi, err, exp.GetCapacityBytes())
		}
		// The device itself grew, as seen through the published path (what a pod sees).
		if got, err := m.BlockSize(target); err != nil || got != 3*GiB {
			t.Errorf("published device size after expand = %d, %v; want 3GiB", got, err)
		}
		_, err = e.srv.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "vol-2", VolumePath: target,
			CapacityRange: &csi.CapacityRange{RequiredBytes: MaxVolumeSize + 1}, VolumeCapability: bcap})
		wantCode(t, err, codes.OutOfRange)
		// Without a capability the kind of volume is told by the path.
		exp, err = e.srv.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "vol-2", VolumePath: target,
			CapacityRange: &csi.CapacityRange{RequiredBytes: 4 * GiB}})
		wantCode(t, err, codes.OK)
		if got, err := m.BlockSize(target); err != nil || got != 4*GiB || exp.GetCapacityBytes() != 4*GiB {
			t.Errorf("device size after a capability-less expand = %d, %v (answer %d); want 4GiB", got, err, exp.GetCapacityBytes())
		}
		for i := 0; i < 2; i++ {
			_, err = e.srv.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-2", TargetPath: target})
			wantCode(t, err, codes.OK)
		}
		if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("target left behind: %v", err)
		}
		for i := 0; i < 2; i++ {
			_, err = e.srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-2", StagingTargetPath: staging})
			wantCode(t, err, codes.OK)
		}
		if _, err := os.Lstat(staged); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("staged block file left behind: %v", err)
		}
		wantLoop(t, m, e.srv.blockFile("vol-2"), false)
		if e.real && sysfsLoopCount(t, e.srv.blockFile("vol-2")) != 0 {
			t.Error("loop device still attached after unstage")
		}
		// The data outlives the loop: staging again shows it on a (new) device.
		_, err = e.srv.NodeStageVolume(ctx, stage)
		wantCode(t, err, codes.OK)
		if got, err := m.BlockSize(staged); err != nil || got != 4*GiB {
			t.Errorf("restaged device size = %d, %v; want the grown 4GiB", got, err)
		}
		_, err = e.srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-2", StagingTargetPath: staging})
		wantCode(t, err, codes.OK)
		wantLoop(t, m, e.srv.blockFile("vol-2"), false)
	})
}

// TestNodeBlockKubeletMapUnmap replays what the kubelet does with a published block volume
// (volumepathhandler MapDevice/UnmapDevice with bindMount): bind-mount the published path
// onto <globalMapPath>/<podUID>, then, at pod deletion, unmount it only if it is a device
// node and remove it. With a plain file there, the unmount was skipped and the removal
// failed with EBUSY for ever: pods with block volumes could never be deleted.
func TestNodeBlockKubeletMapUnmap(t *testing.T) {
	mounters(t, func(t *testing.T, m mount.Mounter) {
		ctx := context.Background()
		e := newNode(t, m, nil)
		staging := filepath.Join(e.dir, "volumeDevices", "staging", "pv-1")
		target := filepath.Join(e.dir, "volumeDevices", "publish", "pv-1", "pod-uid")
		mapped := filepath.Join(e.dir, "volumeDevices", "pv-1", "dev", "pod-uid")
		cleanupLoops(t, m, e.srv.blockFile("vol-3"))
		cleanupMounts(t, m, mapped, target, filepath.Join(staging, stagedBlockFile))
		bcap := blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
		_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-3", StagingTargetPath: staging, VolumeCapability: bcap,
			VolumeContext: map[string]string{VolumeContextSizeBytes: "1048576"}})
		wantCode(t, err, codes.OK)
		_, err = e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-3", StagingTargetPath: staging, TargetPath: target, VolumeCapability: bcap})
		wantCode(t, err, codes.OK)

		// Map: create the file, bind-mount the published path onto it.
		if err := ensureFile(mapped); err != nil {
			t.Fatal(err)
		}
		if err := m.BindMount(target, mapped, false); err != nil {
			t.Fatal(err)
		}
		// Unmap: the kubelet unmounts only what it sees as a device bind mount.
		mp, err := m.MountPoint(mapped)
		if err != nil || mp == nil || mp.Device == "" {
			t.Fatalf("MountPoint(%s) = %+v, %v; want a device mount", mapped, mp, err)
		}
		if e.real && !isDeviceNode(t, mapped) {
			t.Fatalf("%s is not a device node: the kubelet would skip the unmount and fail to remove it", mapped)
		}
		if err := m.Unmount(mapped); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(mapped); err != nil {
			t.Fatalf("remove the mapped path: %v", err)
		}
		_, err = e.srv.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-3", TargetPath: target})
		wantCode(t, err, codes.OK)
		_, err = e.srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-3", StagingTargetPath: staging})
		wantCode(t, err, codes.OK)
		wantLoop(t, m, e.srv.blockFile("vol-3"), false)
	})
}

// TestNodeBlockAcrossRestarts: a restarted plugin finds the loop it attached (no second
// device), publishes from it, and a plugin restarted again detaches it at unstage.
func TestNodeBlockAcrossRestarts(t *testing.T) {
	mounters(t, func(t *testing.T, m mount.Mounter) {
		ctx := context.Background()
		e := newNode(t, m, nil)
		staging, target := filepath.Join(e.dir, "staging"), filepath.Join(e.dir, "target")
		file := e.srv.blockFile("vol-4")
		cleanupLoops(t, m, file)
		cleanupMounts(t, m, target, filepath.Join(staging, stagedBlockFile))
		restarted := func() *NodeServer {
			// A new process has a new Linux mounter; the fake's state is the kernel's.
			mm := m
			if e.real {
				mm = mount.NewLinux()
			}
			return NewNodeServer(NodeConfig{NodeID: "i-1", StateDir: e.srv.cfg.StateDir, KubeletRoot: e.dir, Cloud: e.fake, Mounter: mm, Capacity: e.srv.cfg.Capacity})
		}
		bcap := blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
		stage := &csi.NodeStageVolumeRequest{VolumeId: "vol-4", StagingTargetPath: staging, VolumeCapability: bcap,
			VolumeContext: map[string]string{VolumeContextSizeBytes: "1048576"}}
		_, err := e.srv.NodeStageVolume(ctx, stage)
		wantCode(t, err, codes.OK)
		first := wantLoop(t, m, file, true)

		s2 := restarted()
		_, err = s2.NodeStageVolume(ctx, stage)
		wantCode(t, err, codes.OK)
		if again := wantLoop(t, m, file, true); again != first {
			t.Fatalf("after a restart the volume is on %+v, was %+v", again, first)
		}
		if e.real && sysfsLoopCount(t, file) != 1 {
			t.Fatal("a restarted plugin attached a second loop device")
		}
		_, err = s2.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-4", StagingTargetPath: staging, TargetPath: target, VolumeCapability: bcap})
		wantCode(t, err, codes.OK)
		if n, err := s2.staged.Count(); err != nil || n != 1 {
			t.Fatalf("StagedVolumes after a restart = %d, %v; want 1", n, err)
		}

		s3 := restarted()
		_, err = s3.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-4", TargetPath: target})
		wantCode(t, err, codes.OK)
		_, err = s3.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-4", StagingTargetPath: staging})
		wantCode(t, err, codes.OK)
		wantLoop(t, m, file, false)
		if e.real && sysfsLoopCount(t, file) != 0 {
			t.Fatal("loop leaked across restarts")
		}
	})
}

// TestNodeBlockStaleStagedMount: a staged path left as a plain file bind mount (what the
// driver did before it used loop devices) is replaced by the device at the next stage, and
// publishing from it is refused until then.
func TestNodeBlockStaleStagedMount(t *testing.T) {
	mounters(t, func(t *testing.T, m mount.Mounter) {
		ctx := context.Background()
		e := newNode(t, m, nil)
		staging, target := filepath.Join(e.dir, "staging"), filepath.Join(e.dir, "target")
		staged, file := filepath.Join(staging, stagedBlockFile), e.srv.blockFile("vol-5")
		cleanupLoops(t, m, file)
		cleanupMounts(t, m, target, staged)
		if _, err := e.srv.ensureBackingFile("vol-5", 1<<20, true); err != nil {
			t.Fatal(err)
		}
		if err := ensureFile(staged); err != nil {
			t.Fatal(err)
		}
		if err := m.BindMount(file, staged, false); err != nil {
			t.Fatal(err)
		}
		bcap := blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
		pub := &csi.NodePublishVolumeRequest{VolumeId: "vol-5", StagingTargetPath: staging, TargetPath: target, VolumeCapability: bcap}
		_, err := e.srv.NodePublishVolume(ctx, pub)
		wantCode(t, err, codes.FailedPrecondition)
		_, err = e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-5", StagingTargetPath: staging, VolumeCapability: bcap,
			VolumeContext: map[string]string{VolumeContextSizeBytes: "1048576"}})
		wantCode(t, err, codes.OK)
		lp := wantLoop(t, m, file, true)
		if mp, err := m.MountPoint(staged); err != nil || mp == nil || mp.Device != lp.Device {
			t.Fatalf("MountPoint(%s) = %+v, %v; want the loop device %s", staged, mp, err, lp.Device)
		}
		_, err = e.srv.NodePublishVolume(ctx, pub)
		wantCode(t, err, codes.OK)
		_, err = e.srv.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-5", TargetPath: target})
		wantCode(t, err, codes.OK)
		_, err = e.srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-5", StagingTargetPath: staging})
		wantCode(t, err, codes.OK)
		if mp, _ := m.MountPoint(staged); mp != nil {
			t.Fatalf("%s still mounted after unstage: %+v", staged, mp)
		}
		wantLoop(t, m, file, false)
	})
}

// TestNodeBlockStageTooBigForTheFileSystem: a valid size the node's file system cannot hold
// (ext4 stops just short of 16 TiB) is OUT_OF_RANGE and leaves no 0-byte backing file.
func TestNodeBlockStageTooBigForTheFileSystem(t *testing.T) {
	ctx := context.Background()
	m := mount.NewFake()
	e := newNode(t, m, nil)
	staging := filepath.Join(e.dir, "staging")
	cleanupLoops(t, m, e.srv.blockFile("vol-6"))
	_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-6", StagingTargetPath: staging,
		VolumeCapability: blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER),
		VolumeContext:    map[string]string{VolumeContextSizeBytes: strconv.FormatInt(MaxVolumeSize, 10)}})
	if err == nil {
		t.Skipf("the file system of %s holds a %d-byte file; nothing to refuse", e.dir, MaxVolumeSize)
	}
	wantCode(t, err, codes.OutOfRange)
	if _, err := os.Stat(e.srv.blockFile("vol-6")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("backing file left behind: %v", err)
	}
	if m.Loops() != 0 {
		t.Error("a loop device was attached for a volume that could not be created")
	}
}

// sysfsLoopCount counts the kernel's loop devices whose backing file is p.
func sysfsLoopCount(t *testing.T, p string) int {
	t.Helper()
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	matches, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range matches {
		if b, err := os.ReadFile(f); err == nil && strings.TrimSpace(string(b)) == p {
			n++
		}
	}
	return n
}

func TestNodeValidation(t *testing.T) {
	ctx := context.Background()
	e := newNode(t, mount.NewFake(), nil)
	abs := filepath.Join(e.dir, "p")
	multi := mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)
	bcap := blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
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
		"stage block size not a number": func() error {
			_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: abs, VolumeCapability: bcap,
				VolumeContext: map[string]string{VolumeContextSizeBytes: "1Gi"}})
			return err
		},
		"stage block size zero": func() error {
			_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: abs, VolumeCapability: bcap,
				VolumeContext: map[string]string{VolumeContextSizeBytes: "0"}})
			return err
		},
		"stage block size negative": func() error {
			_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: abs, VolumeCapability: bcap,
				VolumeContext: map[string]string{VolumeContextSizeBytes: "-1048576"}})
			return err
		},
		"stage block size over the maximum": func() error {
			_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: abs, VolumeCapability: bcap,
				VolumeContext: map[string]string{VolumeContextSizeBytes: strconv.FormatInt(MaxVolumeSize+1, 10)}})
			return err
		},
		"stage block size overflows int64": func() error {
			_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: abs, VolumeCapability: bcap,
				VolumeContext: map[string]string{VolumeContextSizeBytes: "99999999999999999999999"}})
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
	f := newRealCloud(t)
	f.AddInstance("i-1", "zone-a", 8, 1)
	// The real cloud keeps an instance in its zone: the instance "moves" in the answers.
	moved := &movedInstance{realCloud: f}
	n := NewNodeServer(NodeConfig{NodeID: "i-1", StateDir: t.TempDir(), Cloud: moved, Mounter: mount.NewFake(),
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
		moved.zone.Store("zone-z")
	}
	if got := f.Calls(cloud.OperationGetInstance); got != 2 {
		t.Errorf("GetInstance called %d times, want 2 (one failure, one success)", got)
	}
	if ready.Load() != 1 {
		t.Errorf("TopologyReady called %d times, want 1", ready.Load())
	}
}

// movedInstance answers GetInstance with the instance in zone, once set.
type movedInstance struct {
	*realCloud
	zone atomic.Value // string
}

func (m *movedInstance) GetInstance(ctx context.Context, id string) (*cloud.Instance, error) {
	in, err := m.realCloud.GetInstance(ctx, id)
	if z, ok := m.zone.Load().(string); ok && err == nil {
		in.Zone = z
	}
	return in, err
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
		_, _ = e.srv.topo.Zone(ctx)
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
		cleanupLoops(t, m, e.srv.blockFile("vol-2"))
		cleanupMounts(t, m, mountStaging, filepath.Join(blockStaging, stagedBlockFile))
		count := func(s *NodeServer, want int) {
			t.Helper()
			if n, err := s.staged.Count(); err != nil || n != want {
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
			return NewNodeServer(NodeConfig{NodeID: "i-1", StateDir: e.srv.cfg.StateDir, KubeletRoot: e.dir, Cloud: e.fake, Mounter: m, Capacity: e.srv.cfg.Capacity})
		}
		count(restarted(), 2)

		// A mount gone behind the plugin's back (a reboot: loop devices go too) is not staged
		// any more.
		if err := m.Unmount(filepath.Join(blockStaging, stagedBlockFile)); err != nil {
			t.Fatal(err)
		}
		if err := m.DetachLoop(e.srv.blockFile("vol-2")); err != nil {
			t.Fatal(err)
		}
		s := restarted()
		count(s, 1)
		if _, err := os.Stat(s.dir.StagedMarker("vol-2")); !errors.Is(err, os.ErrNotExist) {
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
	if n, err := e.srv.staged.Count(); err == nil {
		t.Fatalf("StagedVolumes = %d, nil; want an error for an unreadable state dir", n)
	}
}

// Two nodes that share a DataDir (the cloud's disk storage) see one volume's data: what a
// pod wrote on node A is there when the volume is staged on node B next, while each node's
// staged state stays its own.
func TestNodeDataFollowsTheVolumeThroughASharedDataDir(t *testing.T) {
	mounters(t, func(t *testing.T, m mount.Mounter) {
		ctx := context.Background()
		dir := t.TempDir()
		shared := filepath.Join(dir, "disks")
		node := func(id string) *NodeServer {
			f := newRealCloud(t)
			f.AddInstance(id, "zone-a", 8, 1)
			return NewNodeServer(NodeConfig{NodeID: id, StateDir: filepath.Join(dir, id), DataDir: shared, KubeletRoot: dir,
				Cloud: f, Mounter: m, Capacity: &fixedCapacity{slots: 7}})
		}
		a, b := node("i-a"), node("i-b")
		stagingA, stagingB := filepath.Join(dir, "a-staging"), filepath.Join(dir, "b-staging")
		cleanupMounts(t, m, stagingA, stagingB)
		stage := func(n *NodeServer, staging string) {
			t.Helper()
			_, err := n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging, VolumeCapability: rwo})
			wantCode(t, err, codes.OK)
		}
		stage(a, stagingA)
		if got, want := a.dataDir("vol-1"), filepath.Join(shared, "vol-1", "data"); got != want {
			t.Fatalf("data folder %s, want %s", got, want)
		}
		if err := os.WriteFile(filepath.Join(a.dataDir("vol-1"), "token"), []byte("written on a"), 0o640); err != nil {
			t.Fatal(err)
		}
		_, err := a.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: stagingA})
		wantCode(t, err, codes.OK)
		stage(b, stagingB)
		readAt := b.dataDir("vol-1")
		if _, real := m.(*mount.Linux); real {
			readAt = stagingB // through node B's real bind mount
		}
		if got, err := os.ReadFile(filepath.Join(readAt, "token")); err != nil || string(got) != "written on a" {
			t.Fatalf("node b reads %q (%v), want what node a wrote", got, err)
		}
		if _, err := os.Stat(b.dir.StagedMarker("vol-1")); err != nil {
			t.Errorf("node b keeps no staged marker of its own: %v", err)
		}
		if c, err := a.staged.Count(); err != nil || c != 0 {
			t.Errorf("node a after unstage: %d staged (%v), want 0", c, err)
		}
		if c, err := b.staged.Count(); err != nil || c != 1 {
			t.Errorf("node b: %d staged (%v), want 1", c, err)
		}
		_, err = b.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: stagingB})
		wantCode(t, err, codes.OK)
	})
}
