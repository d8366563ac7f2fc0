package csi

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

// Regression tests of issue 24 items 5, 6, 7, 12, 14 and 15: the node plugin acts only on
// what it created for a volume, below its roots, and follows no link there.

// ensureFile creates an empty regular file (and its parents) if missing.
func ensureFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o640)
	if err != nil {
		return err
	}
	return f.Close()
}

// wantEmptyDir fails unless dir holds exactly the names in keep.
func wantEmptyDir(t *testing.T, dir string, keep ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != strings.Join(keep, ",") {
		t.Errorf("%s holds %v, want %v: the node touched something outside its root", dir, names, keep)
	}
}

// realMountsUnder lists the kernel's mount points at or below dir (root only).
func realMountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mps, err := mount.ParseMountInfo(f)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mp := range mps {
		if mp.Path == dir || strings.HasPrefix(mp.Path, dir+"/") {
			out = append(out, mp.Path)
		}
	}
	return out
}

// detachAllUnder lazily unmounts every real mount below dir when the test ends.
func detachAllUnder(t *testing.T, dir string) {
	t.Cleanup(func() {
		for i := 0; i < 64; i++ {
			mps := realMountsUnder(t, dir)
			if len(mps) == 0 {
				return
			}
			for j := len(mps) - 1; j >= 0; j-- {
				_ = unix.Unmount(mps[j], unix.MNT_DETACH)
			}
		}
	})
}

// TestNodeSymlinkBelowKubeletRoot (item 5): a link inside --kubelet-root leading outside is
// followed by none of stage, publish, unpublish, unstage: FAILED_PRECONDITION, and nothing
// outside is created, mounted, unmounted or removed.
func TestNodeSymlinkBelowKubeletRoot(t *testing.T) {
	mounters(t, func(t *testing.T, m mount.Mounter) {
		ctx := context.Background()
		e := newNode(t, m, nil)
		outside := t.TempDir()
		if e.real {
			detachAllUnder(t, e.dir)
			detachAllUnder(t, outside)
		}
		if err := os.Symlink(outside, filepath.Join(e.dir, "pods")); err != nil {
			t.Fatal(err)
		}
		linked := func(name string) string { return filepath.Join(e.dir, "pods", name) }

		// Stage and publish through the link.
		_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: linked("staging"), VolumeCapability: rwo})
		wantCode(t, err, codes.FailedPrecondition)
		staging := filepath.Join(e.dir, "staging")
		cleanupMounts(t, m, staging)
		_, err = e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging, VolumeCapability: rwo})
		wantCode(t, err, codes.OK)
		_, err = e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging, TargetPath: linked("target"), VolumeCapability: rwo})
		wantCode(t, err, codes.FailedPrecondition)
		wantEmptyDir(t, outside)

		// Unpublish and unstage through the link: what is mounted outside stays, and so
		// does the folder.
		src := t.TempDir()
		for _, name := range []string{"target", "staged"} {
			p := filepath.Join(outside, name)
			if err := os.Mkdir(p, 0o750); err != nil {
				t.Fatal(err)
			}
			if err := m.BindMount(src, p, false); err != nil {
				t.Fatal(err)
			}
			cleanupMounts(t, m, p)
		}
		_, err = e.srv.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: linked("target")})
		wantCode(t, err, codes.FailedPrecondition)
		_, err = e.srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-2", StagingTargetPath: linked("staged")})
		wantCode(t, err, codes.FailedPrecondition)
		wantEmptyDir(t, outside, "staged", "target")
		for _, name := range []string{"target", "staged"} {
			if mp, err := m.MountPoint(filepath.Join(outside, name)); err != nil || mp == nil {
				t.Errorf("%s was unmounted through a link (%v)", name, err)
			}
		}
		// A link as the last element is not followed either.
		if err := os.Symlink(filepath.Join(outside, "target"), filepath.Join(e.dir, "last")); err != nil {
			t.Fatal(err)
		}
		_, err = e.srv.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: filepath.Join(e.dir, "last")})
		wantCode(t, err, codes.FailedPrecondition)
		if mp, err := m.MountPoint(filepath.Join(outside, "target")); err != nil || mp == nil {
			t.Errorf("target was unmounted through a last-element link (%v)", err)
		}
	})
}

// TestNodeUnstageAtAnotherPathKeepsTheVolume (item 6): unstaging a volume at a path where it
// is not staged succeeds and leaves the volume's loop device and mounts alone.
func TestNodeUnstageAtAnotherPathKeepsTheVolume(t *testing.T) {
	mounters(t, func(t *testing.T, m mount.Mounter) {
		ctx := context.Background()
		e := newNode(t, m, nil)
		staging, target, other := filepath.Join(e.dir, "staging"), filepath.Join(e.dir, "target"), filepath.Join(e.dir, "other")
		file := e.srv.blockFile("vol-a")
		cleanupLoops(t, m, file)
		cleanupMounts(t, m, target, filepath.Join(staging, stagedBlockFile))
		bcap := blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
		_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-a", StagingTargetPath: staging, VolumeCapability: bcap,
			VolumeContext: map[string]string{VolumeContextSizeBytes: "1048576"}})
		wantCode(t, err, codes.OK)
		_, err = e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-a", StagingTargetPath: staging, TargetPath: target, VolumeCapability: bcap})
		wantCode(t, err, codes.OK)
		lp := wantLoop(t, m, file, true)
		if err := os.Mkdir(other, 0o750); err != nil {
			t.Fatal(err)
		}
		_, err = e.srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-a", StagingTargetPath: other})
		wantCode(t, err, codes.OK)
		if got := wantLoop(t, m, file, true); got.Device != lp.Device {
			t.Errorf("loop device of vol-a changed from %s to %s", lp.Device, got.Device)
		}
		for _, p := range []string{filepath.Join(staging, stagedBlockFile), target} {
			if mp, err := m.MountPoint(p); err != nil || mp == nil || mp.Device != lp.Device {
				t.Errorf("MountPoint(%s) = %+v, %v; want vol-a's device still mounted", p, mp, err)
			}
		}
		if at, ok, _ := e.srv.staged.At("vol-a"); !ok || at != filepath.Join(staging, stagedBlockFile) {
			t.Errorf("vol-a is recorded as staged at %q (%v), want its staging path", at, ok)
		}
		// Unstaging a volume not staged here at another volume's staging path leaves that
		// volume mounted.
		mstaging := filepath.Join(e.dir, "mstaging")
		cleanupMounts(t, m, mstaging)
		_, err = e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-m", StagingTargetPath: mstaging, VolumeCapability: rwo})
		wantCode(t, err, codes.OK)
		_, err = e.srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-z", StagingTargetPath: mstaging})
		wantCode(t, err, codes.OK)
		if mp, err := m.MountPoint(mstaging); err != nil || mp == nil {
			t.Errorf("vol-m's staging mount is gone after an unstage of vol-z there (%v)", err)
		}
		_, err = e.srv.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-a", TargetPath: target})
		wantCode(t, err, codes.OK)
		_, err = e.srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-a", StagingTargetPath: staging})
		wantCode(t, err, codes.OK)
		wantLoop(t, m, file, false)
	})
}

// TestNodeExpandOnlyItsOwnMount (item 7): NodeExpandVolume answers NOT_FOUND for a
// volume_path that is not this volume's staging or publish mount ("/", "/proc/../", another
// volume's target) and for a volume never staged here, and creates no backing file.
func TestNodeExpandOnlyItsOwnMount(t *testing.T) {
	mounters(t, func(t *testing.T, m mount.Mounter) {
		ctx := context.Background()
		e := newNode(t, m, nil)
		staging, target := filepath.Join(e.dir, "staging"), filepath.Join(e.dir, "target")
		cleanupLoops(t, m, e.srv.blockFile("vol-b"))
		cleanupMounts(t, m, target, filepath.Join(staging, stagedBlockFile))
		bcap := blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
		_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-b", StagingTargetPath: staging, VolumeCapability: bcap,
			VolumeContext: map[string]string{VolumeContextSizeBytes: "1048576"}})
		wantCode(t, err, codes.OK)
		_, err = e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-b", StagingTargetPath: staging, TargetPath: target, VolumeCapability: bcap})
		wantCode(t, err, codes.OK)
		for _, c := range []struct{ id, path string }{
			{"vol-b", "/"}, {"vol-b", "/proc/../"}, {"vol-b", e.dir},
			{"vol-never", "/"}, {"vol-never", target}, {"vol-never", staging},
		} {
			_, err := e.srv.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: c.id, VolumePath: c.path, VolumeCapability: bcap,
				CapacityRange: &csi.CapacityRange{RequiredBytes: 4 * GiB}})
			wantCode(t, err, codes.NotFound)
		}
		if _, err := os.Stat(e.srv.backingDir("vol-never")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("expand of a volume never staged here made its backing folder (%v)", err)
		}
		if fi, err := os.Stat(e.srv.blockFile("vol-b")); err != nil || fi.Size() != 1<<20 {
			t.Errorf("vol-b's backing file: %v, %v; want it left at 1 MiB", fi, err)
		}
		// Its own publish target grows it.
		exp, err := e.srv.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "vol-b", VolumePath: target, VolumeCapability: bcap,
			CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * GiB}})
		wantCode(t, err, codes.OK)
		if exp.GetCapacityBytes() != 2*GiB {
			t.Errorf("expanded to %d bytes, want %d", exp.GetCapacityBytes(), 2*GiB)
		}
	})
}

// TestNodeBlockBackingFileLinkIsRefused (item 12): a block volume's backing file replaced by
// a link is not followed at stage: FAILED_PRECONDITION, the link's target keeps its size and
// gets no loop device.
func TestNodeBlockBackingFileLinkIsRefused(t *testing.T) {
	mounters(t, func(t *testing.T, m mount.Mounter) {
		ctx := context.Background()
		e := newNode(t, m, nil)
		victim := filepath.Join(t.TempDir(), "victim")
		if err := os.WriteFile(victim, []byte("twenty bytes of data"), 0o640); err != nil {
			t.Fatal(err)
		}
		cleanupLoops(t, m, victim)
		if err := os.MkdirAll(e.srv.backingDir("vol-c"), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(victim, e.srv.blockFile("vol-c")); err != nil {
			t.Fatal(err)
		}
		staging := filepath.Join(e.dir, "staging")
		cleanupMounts(t, m, filepath.Join(staging, stagedBlockFile))
		_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-c", StagingTargetPath: staging,
			VolumeCapability: blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER),
			VolumeContext:    map[string]string{VolumeContextSizeBytes: "1073741824"}})
		wantCode(t, err, codes.FailedPrecondition)
		if fi, err := os.Stat(victim); err != nil || fi.Size() != 20 {
			t.Errorf("the link's target: %v, %v; want it left at 20 bytes", fi, err)
		}
		wantLoop(t, m, victim, false)
		// The mounter itself refuses a link as the backing file, too.
		if _, err := m.AttachLoop(e.srv.blockFile("vol-c")); !errors.Is(err, mount.ErrSymlink) {
			t.Errorf("AttachLoop(link) = %v, want ErrSymlink", err)
		}
		wantLoop(t, m, victim, false)
	})
}

// TestNodeStageRefusesWhatItWouldHide (item 14): staging a mount volume onto a folder that is
// not empty, or onto a regular file, is FAILED_PRECONDITION and mounts nothing.
func TestNodeStageRefusesWhatItWouldHide(t *testing.T) {
	mounters(t, func(t *testing.T, m mount.Mounter) {
		ctx := context.Background()
		e := newNode(t, m, nil)
		full, file := filepath.Join(e.dir, "full"), filepath.Join(e.dir, "file")
		cleanupMounts(t, m, full, file)
		if err := os.MkdirAll(full, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(full, "precious"), []byte("x"), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, nil, 0o640); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{full, file} {
			_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-d", StagingTargetPath: p, VolumeCapability: rwo})
			wantCode(t, err, codes.FailedPrecondition)
			if mp, err := m.MountPoint(p); err != nil || mp != nil {
				t.Errorf("MountPoint(%s) = %+v, %v; want nothing mounted", p, mp, err)
			}
		}
		if b, err := os.ReadFile(filepath.Join(full, "precious")); err != nil || string(b) != "x" {
			t.Errorf("the folder's content: %q, %v", b, err)
		}
	})
}

// TestNodeStageChecksSourcesWithTheCloud (item 15): the clone or restore source named by
// volume_context must be the one the cloud's record of the volume names; volume and source
// IDs that are not cloud-shaped (".snapshots") are refused; nothing is copied then.
func TestNodeStageChecksSourcesWithTheCloud(t *testing.T) {
	ctx := context.Background()
	e := newNode(t, mount.NewFake(), nil)
	n := e.srv
	srcVol := e.fake.AddVolume(cloud.CreateVolumeRequest{Name: "src", SizeBytes: GiB, Zone: "zone-a"}).ID
	mineVol := e.fake.AddVolume(cloud.CreateVolumeRequest{Name: "mine", SizeBytes: GiB, Zone: "zone-a", SourceVolumeID: srcVol}).ID
	plainVol := e.fake.AddVolume(cloud.CreateVolumeRequest{Name: "plain", SizeBytes: GiB, Zone: "zone-a"}).ID
	for _, id := range []string{srcVol, "vol-tenant"} {
		if err := os.MkdirAll(n.dataDir(id), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(n.dataDir(id), "secret"), []byte(id), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name, id string
		vc       map[string]string
		want     codes.Code
	}{
		{"another volume than recorded", mineVol, map[string]string{VolumeContextSourceVolume: "vol-tenant"}, codes.InvalidArgument},
		{"a clone source for a volume made empty", plainVol, map[string]string{VolumeContextSourceVolume: "vol-tenant"}, codes.InvalidArgument},
		{"a snapshot not recorded", plainVol, map[string]string{VolumeContextSourceSnapshot: "snap-tenant"}, codes.InvalidArgument},
		{"a volume the cloud does not know", "vol-unknown", map[string]string{VolumeContextSourceVolume: "vol-tenant"}, codes.NotFound},
		{"the snapshot store as source volume", mineVol, map[string]string{VolumeContextSourceVolume: ".snapshots"}, codes.InvalidArgument},
		{"the snapshot store as snapshot", mineVol, map[string]string{VolumeContextSourceSnapshot: ".snapshots"}, codes.InvalidArgument},
		{"the snapshot store as volume", ".snapshots", nil, codes.InvalidArgument},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: c.id, StagingTargetPath: filepath.Join(e.dir, "staging", "x"),
				VolumeCapability: rwo, VolumeContext: c.vc})
			wantCode(t, err, c.want)
			if _, err := os.Stat(n.backingDir(c.id)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("refused stage made %s (%v)", n.backingDir(c.id), err)
			}
			if _, err := os.Stat(filepath.Join(e.dir, "staging", "x")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("refused stage made its staging path (%v)", err)
			}
		})
	}
	// The cloud unreachable: UNAVAILABLE, nothing copied.
	e.fake.FailNext(cloud.OperationGetVolume, cloud.NewError(cloud.CodeUnavailable, "down"))
	_, err := n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: mineVol, StagingTargetPath: filepath.Join(e.dir, "staging", "mine"),
		VolumeCapability: rwo, VolumeContext: map[string]string{VolumeContextSourceVolume: srcVol}})
	wantCode(t, err, codes.Unavailable)
	if _, err := os.Stat(n.backingDir(mineVol)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stage without the cloud's word copied the source (%v)", err)
	}
	// The recorded source is copied.
	_, err = n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: mineVol, StagingTargetPath: filepath.Join(e.dir, "staging", "mine"),
		VolumeCapability: rwo, VolumeContext: map[string]string{VolumeContextSourceVolume: srcVol}})
	wantCode(t, err, codes.OK)
	if b, err := os.ReadFile(filepath.Join(n.dataDir(mineVol), "secret")); err != nil || string(b) != srcVol {
		t.Errorf("clone's data = %q, %v; want the recorded source's", b, err)
	}
}

// TestNodePathRaceWithALinkSwap: while a goroutine keeps exchanging a folder below the
// kubelet root with a link to a folder outside it (renameat2 RENAME_EXCHANGE), stage,
// publish, unpublish and unstage run through that folder; nothing is ever created or mounted
// outside. Root only: the point is what the kernel does with real mounts.
func TestNodePathRaceWithALinkSwap(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("real bind mounts need root (CAP_SYS_ADMIN)")
	}
	ctx := context.Background()
	m := mount.NewLinux()
	e := newNode(t, m, nil)
	outside := t.TempDir()
	detachAllUnder(t, e.dir)
	detachAllUnder(t, outside)
	pods, alt := filepath.Join(e.dir, "pods"), filepath.Join(e.dir, "alt")
	if err := os.Mkdir(pods, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, alt); err != nil {
		t.Fatal(err)
	}
	staging, target := filepath.Join(e.dir, "staging"), filepath.Join(pods, "target")
	_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-r", StagingTargetPath: staging, VolumeCapability: rwo})
	wantCode(t, err, codes.OK)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, pods, unix.AT_FDCWD, alt, unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("exchange: %v", err)
				return
			}
		}
	}()
	const rounds = 300
	ok := 0
	for i := 0; i < rounds; i++ {
		s2 := filepath.Join(pods, "staging")
		_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-s", StagingTargetPath: s2, VolumeCapability: rwo})
		if err == nil {
			ok++
		}
		_, _ = e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-r", StagingTargetPath: staging, TargetPath: target, VolumeCapability: rwo})
		if mps := realMountsUnder(t, outside); len(mps) > 0 {
			t.Fatalf("round %d: mounted outside the kubelet root: %v", i, mps)
		}
		_, _ = e.srv.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-r", TargetPath: target})
		_, _ = e.srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-s", StagingTargetPath: s2})
	}
	close(stop)
	wg.Wait()
	if mps := realMountsUnder(t, outside); len(mps) > 0 {
		t.Fatalf("mounted outside the kubelet root: %v", mps)
	}
	wantEmptyDir(t, outside)
	t.Logf("%d of %d stages through the swapped folder succeeded (the rest met the link)", ok, rounds)
}
