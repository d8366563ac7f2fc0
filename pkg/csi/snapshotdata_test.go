package csi

import (
	"context"
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

// TestSnapshotDataFollowsRestores: with a shared volume data folder, CreateSnapshot keeps the
// source's data as it was then (a retried CreateSnapshot keeps the first copy, a later write
// to the source is not in it), a volume restored from the snapshot gets that data at its first
// stage (and keeps its own writes at the next), a snapshot of a volume never staged restores
// empty, DeleteSnapshot removes the copy (twice is OK), and a restore source that cannot name
// a folder is INVALID_ARGUMENT before anything is touched. Without a data folder nothing is
// kept.
func TestSnapshotDataFollowsRestores(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	s, f := newController(t)
	s.snapData = snapshotData{dir: data}
	dir := t.TempDir()
	n := NewNodeServer(NodeConfig{NodeID: "i-1", StateDir: filepath.Join(dir, "state"), DataDir: data, KubeletRoot: dir,
		Cloud: f, Mounter: mount.NewFake(), Capacity: &fixedCapacity{slots: 7}})
	write := func(id, content string) {
		t.Helper()
		if err := os.MkdirAll(n.dataDir(id), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(n.dataDir(id), "f"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	read := func(id string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(n.dataDir(id), "f"))
		if os.IsNotExist(err) {
			return "<none>"
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	snapshot := func(name, src string) string {
		t.Helper()
		resp, err := s.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: name, SourceVolumeId: src})
		wantCode(t, err, codes.OK)
		return resp.GetSnapshot().GetSnapshotId()
	}
	restore := func(name, snap string) string {
		t.Helper()
		resp, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{
			Name: name, VolumeCapabilities: []*csi.VolumeCapability{rwo},
			AccessibilityRequirements: &csi.TopologyRequirement{Preferred: topologyOf("zone-a")},
			VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
				Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap}}},
		})
		wantCode(t, err, codes.OK)
		v := resp.GetVolume()
		if got := v.GetVolumeContext()[VolumeContextSourceSnapshot]; got != snap {
			t.Fatalf("volume_context[%s] = %q, want %q", VolumeContextSourceSnapshot, got, snap)
		}
		_, err = n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: v.GetVolumeId(),
			StagingTargetPath: filepath.Join(dir, "staging", v.GetVolumeId()), VolumeCapability: rwo, VolumeContext: v.GetVolumeContext()})
		wantCode(t, err, codes.OK)
		return v.GetVolumeId()
	}

	src := mustCreate(t, s, "src").GetVolumeId()
	write(src, "at snapshot time")
	snap := snapshot("snap", src)
	write(src, "written after the snapshot")
	if again := snapshot("snap", src); again != snap {
		t.Fatalf("retried CreateSnapshot = %s, want %s", again, snap)
	}
	restored := restore("restored", snap)
	if got := read(restored); got != "at snapshot time" {
		t.Errorf("restored volume holds %q, want the source's data at snapshot time", got)
	}
	write(restored, "the restored volume's own")
	_, err := n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: restored,
		StagingTargetPath: filepath.Join(dir, "staging", restored), VolumeCapability: rwo,
		VolumeContext: map[string]string{VolumeContextSourceSnapshot: snap}})
	wantCode(t, err, codes.OK)
	if got := read(restored); got != "the restored volume's own" {
		t.Errorf("restage overwrote the restored volume's data: %q", got)
	}

	never := mustCreate(t, s, "never-staged").GetVolumeId()
	emptySnap := snapshot("empty", never)
	write(never, "written after the snapshot")
	if got := read(restore("from-empty", emptySnap)); got != "<none>" {
		t.Errorf("restore of a snapshot of a volume never staged holds %q, want nothing", got)
	}

	for range 2 {
		_, err := s.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: snap})
		wantCode(t, err, codes.OK)
	}
	if _, err := os.Stat(s.snapData.path(snap)); !os.IsNotExist(err) {
		t.Errorf("the data of a deleted snapshot is still there (%v)", err)
	}

	for _, bad := range []string{"../" + src, "snap/x", ""} {
		id := "vol-bad"
		_, err := n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id,
			StagingTargetPath: filepath.Join(dir, "staging", id), VolumeCapability: rwo,
			VolumeContext: map[string]string{VolumeContextSourceSnapshot: bad}})
		wantCode(t, err, codes.InvalidArgument)
		if _, err := os.Stat(n.backingDir(id)); !os.IsNotExist(err) {
			t.Errorf("refused restore from %q left a backing folder (%v)", bad, err)
		}
	}

	// No data folder: the controller keeps nothing.
	plain, _ := newController(t)
	v := mustCreate(t, plain, "v").GetVolumeId()
	if _, err := plain.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s", SourceVolumeId: v}); err != nil {
		t.Fatal(err)
	}
	if p := plain.snapData.path("snap-1"); p != "" {
		t.Errorf("a controller without a data folder keeps snapshot data at %q", p)
	}
}

// TestSnapshotGroupCaptureNamesTheFailingMember: when one member's data cannot be captured
// (a device node in it: FAILED_PRECONDITION), the error names that member's volume and
// snapshot. Before, it named the group's first member whatever member failed.
func TestSnapshotGroupCaptureNamesTheFailingMember(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a device node in the volume's data needs root (mknod)")
	}
	d := snapshotData{dir: t.TempDir()}
	members := []snapshotMember{{volID: "vol-1", snapID: "snap-1"}, {volID: "vol-2", snapID: "snap-2"}, {volID: "vol-3", snapID: "snap-3"}}
	for _, m := range members {
		if err := os.MkdirAll(filepath.Join(d.dir, m.volID, "data"), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mknod(filepath.Join(d.dir, "vol-2", "data", "null"), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	err := d.captureGroup(context.Background(), members)
	wantCode(t, err, codes.FailedPrecondition)
	if msg := status.Convert(err).Message(); !strings.Contains(msg, "volume vol-2 to snapshot snap-2") || strings.Contains(msg, "vol-1") {
		t.Errorf("error %q does not name the failing member vol-2/snap-2 (only)", msg)
	}
	for _, m := range members {
		if _, err := os.Stat(d.path(m.snapID)); !os.IsNotExist(err) {
			t.Errorf("snapshot %s has data after the failed capture: %v", m.snapID, err)
		}
	}
}
