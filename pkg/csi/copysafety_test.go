package csi

import (
	"bytes"
	"context"
	"encoding/binary"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

// The data copies of snapshots, clones and restores (issue 24: items 1, 2, 3, 4, 11), through
// snapshotData.capture, NodeServer.seedClone/seedRestore and the controllers, with a shared
// volume data folder.

// copyEnv is a controller, a group controller and a node sharing one fake cloud and one
// volume data folder.
type copyEnv struct {
	data string
	ctl  *ControllerServer
	grp  *GroupControllerServer
	node *NodeServer
}

func newCopyEnv(t *testing.T) *copyEnv {
	t.Helper()
	data := t.TempDir()
	s, f := newController(t)
	s.snapData = snapshotData{dir: data}
	g := NewGroupControllerServer(f, s.inflight, nil)
	g.snapData = s.snapData
	dir := t.TempDir()
	n := NewNodeServer(NodeConfig{NodeID: "i-1", StateDir: filepath.Join(dir, "state"), DataDir: data, KubeletRoot: dir,
		Cloud: f, Mounter: mount.NewFake(), Capacity: &fixedCapacity{slots: 7}})
	return &copyEnv{data: data, ctl: s, grp: g, node: n}
}

// volumeData is the folder a pod writes in volume id.
func (e *copyEnv) volumeData(t *testing.T, id string) string {
	t.Helper()
	d := e.node.dataDir(id)
	if err := os.MkdirAll(d, 0o750); err != nil {
		t.Fatal(err)
	}
	return d
}

// holdsSecret says whether any regular file under dir (symlinks not followed) holds secret.
func holdsSecret(t *testing.T, dir, secret string) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(secret)) {
			found = true
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return found
}

// copyCodeOK fails t unless err is nil or says the source kept changing (UNAVAILABLE).
func copyCodeOK(t *testing.T, what string, err error) bool {
	t.Helper()
	switch status.Code(err) {
	case codes.OK:
		return true
	case codes.Unavailable:
		return false
	}
	t.Errorf("%s: %v; want OK or UNAVAILABLE (changed while copying)", what, err)
	return false
}

// TestCopiesCannotBeSteeredByAPod (item 1): a pod swapping an entry of its volume between a
// regular file (or a folder) and a symlink to a secret outside it (renameat2 RENAME_EXCHANGE
// in a loop) while the controller snapshots the volume (capture) or a node clones it
// (seedClone) never gets the secret into a snapshot or a clone.
func TestCopiesCannotBeSteeredByAPod(t *testing.T) {
	ctx := context.Background()
	e := newCopyEnv(t)
	outside := t.TempDir()
	const secret = "TENANT-B-SECRET"
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(outside, "secretdir"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secretdir", "f"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	vol := e.volumeData(t, "vol-src")
	for _, err := range []error{
		os.WriteFile(filepath.Join(vol, "victim"), []byte("harmless"), 0o644),
		os.Mkdir(filepath.Join(vol, "victimdir"), 0o755),
		os.WriteFile(filepath.Join(vol, "victimdir", "f"), []byte("harmless"), 0o644),
		os.Symlink(filepath.Join(outside, "secret"), filepath.Join(vol, "swap")),
		os.Symlink(filepath.Join(outside, "secretdir"), filepath.Join(vol, "swapdir")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			_ = unix.Renameat2(unix.AT_FDCWD, filepath.Join(vol, "victim"), unix.AT_FDCWD, filepath.Join(vol, "swap"), unix.RENAME_EXCHANGE)
			_ = unix.Renameat2(unix.AT_FDCWD, filepath.Join(vol, "victimdir"), unix.AT_FDCWD, filepath.Join(vol, "swapdir"), unix.RENAME_EXCHANGE)
		}
	}()
	defer func() { stop.Store(true); wg.Wait() }()

	escapes, copied := 0, 0
	for i := range 40 {
		snap := "snap-" + strconv.Itoa(i)
		if copyCodeOK(t, "capture "+snap, e.ctl.snapData.capture(ctx, "vol-src", snap)) {
			copied++
		}
		if holdsSecret(t, e.ctl.snapData.path(snap), secret) {
			escapes++
		}
	}
	for i := range 24 {
		clone := "vol-clone-" + strconv.Itoa(i)
		if copyCodeOK(t, "clone "+clone, e.node.seedClone(ctx, clone, "vol-src")) {
			copied++
		}
		if holdsSecret(t, e.node.backingDir(clone), secret) {
			escapes++
		}
	}
	if escapes > 0 {
		t.Errorf("%d of 64 snapshots and clones hold the secret from outside the volume", escapes)
	}
	t.Logf("%d of 64 copies made while the pod swapped entries (the others found the volume changing)", copied)
}

// TestCopiesKeepSpecialFilesLinksAndDeepTrees (items 3, 4): a volume holding a FIFO and a unix
// socket, a 1 MiB file with 16 hard links, or a tree deeper than PATH_MAX is snapshotted,
// restored and cloned with all of it: the FIFO and socket recreated, the links one file (1 MiB
// on disk, not 16), the deep leaf there.
func TestCopiesKeepSpecialFilesLinksAndDeepTrees(t *testing.T) {
	deepName := strings.Repeat("d", 50)
	cases := []struct {
		name  string
		make  func(t *testing.T, vol string)
		check func(t *testing.T, dir string)
	}{{
		name: "FIFO and socket",
		make: func(t *testing.T, vol string) {
			if err := unix.Mkfifo(filepath.Join(vol, "fifo"), 0o640); err != nil {
				t.Fatal(err)
			}
			l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(vol, "sock"), Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			l.SetUnlinkOnClose(false)
			l.Close()
		},
		check: func(t *testing.T, dir string) {
			var st unix.Stat_t
			for name, kind := range map[string]uint32{"fifo": unix.S_IFIFO, "sock": unix.S_IFSOCK} {
				if err := unix.Lstat(filepath.Join(dir, name), &st); err != nil || st.Mode&unix.S_IFMT != kind {
					t.Errorf("%s/%s: mode %o, %v; want type %o", dir, name, st.Mode, err, kind)
				}
			}
		},
	}, {
		name: "hard links",
		make: func(t *testing.T, vol string) {
			if err := os.WriteFile(filepath.Join(vol, "big"), bytes.Repeat([]byte{1}, 1<<20), 0o644); err != nil {
				t.Fatal(err)
			}
			for i := range 15 {
				if err := os.Link(filepath.Join(vol, "big"), filepath.Join(vol, "link"+strconv.Itoa(i))); err != nil {
					t.Fatal(err)
				}
			}
		},
		check: func(t *testing.T, dir string) {
			var st unix.Stat_t
			if err := unix.Lstat(filepath.Join(dir, "big"), &st); err != nil || st.Nlink != 16 {
				t.Errorf("%s/big: %d links, %v; want 16 (hard links kept)", dir, st.Nlink, err)
			}
			var copies int64
			for i := range 15 {
				var s unix.Stat_t
				if err := unix.Lstat(filepath.Join(dir, "link"+strconv.Itoa(i)), &s); err != nil || s.Ino != st.Ino {
					copies += s.Size
				}
			}
			if copies > 0 {
				t.Errorf("%s: the links to big are %d bytes of separate copies; want links", dir, copies)
			}
		},
	}, {
		name: "tree deeper than PATH_MAX",
		make: func(t *testing.T, vol string) { mkdeepAt(t, vol, deepName, 100) }, // 5 KiB of path
		check: func(t *testing.T, dir string) {
			if got := deepLeafAt(t, dir, deepName, 100); got != "deep" {
				t.Errorf("%s: deep leaf = %q, want \"deep\"", dir, got)
			}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e := newCopyEnv(t)
			tc.make(t, e.volumeData(t, "vol-src"))
			if err := e.ctl.snapData.capture(ctx, "vol-src", "snap-1"); err != nil {
				t.Fatalf("capture: %v", err)
			}
			if err := e.node.seedRestore(ctx, "vol-restored", "snap-1"); err != nil {
				t.Fatalf("seedRestore: %v", err)
			}
			if err := e.node.seedClone(ctx, "vol-clone", "vol-src"); err != nil {
				t.Fatalf("seedClone: %v", err)
			}
			for _, dir := range []string{filepath.Join(e.ctl.snapData.path("snap-1"), "data"), e.node.dataDir("vol-restored"), e.node.dataDir("vol-clone")} {
				tc.check(t, dir)
			}
		})
	}
}

// mkdeepAt makes depth nested folders named name under dir, fd-relatively (the path may be
// longer than PATH_MAX), with a file "leaf" holding "deep" at the bottom.
func mkdeepAt(t *testing.T, dir, name string, depth int) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range depth {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	defer unix.Close(fd)
	f, err := unix.Openat(fd, "leaf", unix.O_WRONLY|unix.O_CREAT, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(f)
	if _, err := unix.Write(f, []byte("deep")); err != nil {
		t.Fatal(err)
	}
}

// deepLeafAt reads the leaf mkdeepAt made; "" when it is not there.
func deepLeafAt(t *testing.T, dir, name string, depth int) string {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return ""
	}
	for range depth {
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
		unix.Close(fd)
		if err != nil {
			return ""
		}
		fd = next
	}
	defer unix.Close(fd)
	b := make([]byte, 16)
	f, err := unix.Openat(fd, "leaf", unix.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return ""
	}
	defer unix.Close(f)
	n, _ := unix.Read(f, b)
	return string(b[:max(n, 0)])
}

// wantCodeOn is wantCode that lets the test go on.
func wantCodeOn(t *testing.T, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Errorf("code = %s (%v), want %s", got, err, want)
	}
}

// snapshotsIn lists the snapshots the cloud holds.
func snapshotsIn(t *testing.T, s *ControllerServer) []string {
	t.Helper()
	resp, err := s.ListSnapshots(context.Background(), &csi.ListSnapshotsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range resp.GetEntries() {
		ids = append(ids, e.GetSnapshot().GetSnapshotId())
	}
	return ids
}

// snapshotFolder lists the snapshot data folder.
func snapshotFolder(t *testing.T, data string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(data, snapshotDataFolder))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestFailedCaptureLeavesNothing (item 3): a volume the copy refuses (a tree deeper than the
// bound and than PATH_MAX; as root also a device node) is FAILED_PRECONDITION for
// CreateSnapshot, CreateVolumeGroupSnapshot and a clone, and leaves no cloud snapshot, no group,
// no snapshot data and no clone data.
func TestFailedCaptureLeavesNothing(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		root bool
		make func(t *testing.T, dir string)
	}{
		{name: "tree too deep", make: func(t *testing.T, dir string) { mkdeepAt(t, dir, strings.Repeat("d", 20), 600) }},
		{name: "device node", root: true, make: func(t *testing.T, dir string) {
			if err := unix.Mknod(filepath.Join(dir, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && os.Geteuid() != 0 {
				t.Skip("needs root (mknod of a device node)")
			}
			e := newCopyEnv(t)
			bad := mustCreate(t, e.ctl, "bad").GetVolumeId()
			good := mustCreate(t, e.ctl, "good").GetVolumeId()
			if err := os.WriteFile(filepath.Join(e.volumeData(t, good), "f"), []byte("good"), 0o644); err != nil {
				t.Fatal(err)
			}
			tc.make(t, e.volumeData(t, bad))

			_, err := e.ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap", SourceVolumeId: bad})
			wantCodeOn(t, err, codes.FailedPrecondition)
			if ids := snapshotsIn(t, e.ctl); len(ids) != 0 {
				t.Errorf("a failed CreateSnapshot left cloud snapshots %v", ids)
			}
			if names := snapshotFolder(t, e.data); len(names) != 0 {
				t.Errorf("a failed CreateSnapshot left snapshot data %v", names)
			}

			_, err = e.grp.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "group", SourceVolumeIds: []string{good, bad}})
			wantCodeOn(t, err, codes.FailedPrecondition)
			if ids := snapshotsIn(t, e.ctl); len(ids) != 0 {
				t.Errorf("a failed CreateVolumeGroupSnapshot left cloud snapshots %v", ids)
			}
			if names := snapshotFolder(t, e.data); len(names) != 0 {
				t.Errorf("a failed CreateVolumeGroupSnapshot left snapshot data %v", names)
			}

			wantCodeOn(t, e.node.seedClone(ctx, "vol-clone", bad), codes.FailedPrecondition)
			for _, p := range []string{e.node.backingDir("vol-clone"), e.node.backingDir("vol-clone") + ".clone"} {
				if _, err := os.Lstat(p); !os.IsNotExist(err) {
					t.Errorf("a failed clone left %s (%v)", p, err)
				}
			}
		})
	}
}

// TestGroupSnapshotMembersKeepTheirData (item 2): a volume restored from a member of a group
// snapshot holds its source's data as of the group snapshot; deleting the group removes the
// members' data.
func TestGroupSnapshotMembersKeepTheirData(t *testing.T) {
	ctx := context.Background()
	e := newCopyEnv(t)
	var vols []string
	for i := range 3 {
		id := mustCreate(t, e.ctl, "v"+strconv.Itoa(i)).GetVolumeId()
		if err := os.WriteFile(filepath.Join(e.volumeData(t, id), "f"), []byte("data of "+id), 0o644); err != nil {
			t.Fatal(err)
		}
		vols = append(vols, id)
	}
	resp, err := e.grp.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "group", SourceVolumeIds: vols})
	wantCode(t, err, codes.OK)
	for _, id := range vols {
		if err := os.WriteFile(filepath.Join(e.volumeData(t, id), "f"), []byte("written later"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	members := resp.GetGroupSnapshot().GetSnapshots()
	if len(members) != len(vols) {
		t.Fatalf("%d members, want %d", len(members), len(vols))
	}
	for i, m := range members {
		restored := "vol-restored-" + strconv.Itoa(i)
		if err := e.node.seedRestore(ctx, restored, m.GetSnapshotId()); err != nil {
			t.Fatalf("seedRestore from member %s: %v", m.GetSnapshotId(), err)
		}
		got, err := os.ReadFile(filepath.Join(e.node.dataDir(restored), "f"))
		if want := "data of " + m.GetSourceVolumeId(); err != nil || string(got) != want {
			t.Errorf("volume restored from member %s holds %q, %v; want %q", m.GetSnapshotId(), got, err, want)
		}
	}
	_, err = e.grp.DeleteVolumeGroupSnapshot(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: resp.GetGroupSnapshot().GetGroupSnapshotId()})
	wantCode(t, err, codes.OK)
	if names := snapshotFolder(t, e.data); len(names) != 0 {
		t.Errorf("a deleted group snapshot left member data %v", names)
	}
}

// TestSnapshotIsOnePointInTime (item 11): a pod that keeps files a and z of its volume equal
// (writes a, then z, the same counter, a 4 MiB file m between them in the copy's order) while
// its volume is snapshotted never gets a snapshot holding a state that never existed: each
// holds a = z or a one step ahead of z (a written, z not yet), or the capture says the volume
// kept changing (UNAVAILABLE).
func TestSnapshotIsOnePointInTime(t *testing.T) {
	ctx := context.Background()
	e := newCopyEnv(t)
	vol := e.volumeData(t, "vol-src")
	if err := os.WriteFile(filepath.Join(vol, "m"), make([]byte, 4<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(name string, v uint64) {
		f, err := os.OpenFile(filepath.Join(vol, name), os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		if _, err := f.WriteAt(binary.LittleEndian.AppendUint64(nil, v), 0); err != nil {
			t.Error(err)
		}
	}
	read := func(p string) uint64 {
		b, err := os.ReadFile(p)
		if err != nil || len(b) < 8 {
			t.Fatalf("read %s: %v", p, err)
		}
		return binary.LittleEndian.Uint64(b)
	}
	write("a", 0)
	write("z", 0)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for v := uint64(1); !stop.Load(); v++ {
			write("a", v)
			write("z", v)
			// In bursts, so that some captures may find the volume still; what is asserted does not
			// depend on it.
			if v%4 == 0 {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}()
	defer func() { stop.Store(true); wg.Wait() }()
	bad, copied := 0, 0
	for i := range 12 {
		snap := "snap-" + strconv.Itoa(i)
		if !copyCodeOK(t, "capture "+snap, e.ctl.snapData.capture(ctx, "vol-src", snap)) {
			continue
		}
		copied++
		d := filepath.Join(e.ctl.snapData.path(snap), "data")
		if va, vz := read(filepath.Join(d, "a")), read(filepath.Join(d, "z")); va != vz && va != vz+1 {
			bad++
			t.Logf("snapshot %s holds a=%d z=%d", snap, va, vz)
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d snapshots taken during writes hold a state that never existed", bad, copied)
	}
	t.Logf("%d of 12 captures made during writes", copied)
}
