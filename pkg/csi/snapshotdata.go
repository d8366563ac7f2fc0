package csi

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/internal/plural"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/treecopy"
)

// A snapshot's data. The fake cloud keeps no data: a volume's backing data (its mount folder
// and its block file) lives in the volume data folder every node shares (--volume-data-dir,
// <dir>/<volumeID>/). So that a volume restored from a snapshot holds what its source held when
// the snapshot was taken (CSI spec, CreateSnapshot: "a point-in-time copy"; CreateVolume with a
// snapshot content source), the controller copies the source's backing data to
// <dir>/.snapshots/<snapshotID>/ when it creates the snapshot (or a group snapshot, one folder
// per member), the node copies that to the new volume's backing folder the first time it
// stages it (as for a clone, nodeclone.go), and DeleteSnapshot (DeleteVolumeGroupSnapshot)
// removes the copy. The cloud's IDs are "vol-…" and "snap-…", so no volume's folder is named
// .snapshots. The copies are made by treecopy: a pod writing its volume cannot make them read
// anything outside it, and each is of one point in time.

// snapshotDataFolder is the folder of the snapshots' data inside the volume data folder.
const snapshotDataFolder = ".snapshots"

// snapshotData keeps the snapshots' data under a volume data folder; the zero value (no
// folder) keeps none, and restored volumes start empty.
type snapshotData struct {
	// dir is the volume data folder (--volume-data-dir); "" keeps no data.
	dir string
}

// snapshotMember is one snapshot to capture: its ID and its source volume's.
type snapshotMember struct {
	volID, snapID string
}

// path is the folder of snapshot snapID's data; "" when no data is kept.
func (d snapshotData) path(snapID string) string {
	if d.dir == "" {
		return ""
	}
	return filepath.Join(d.dir, snapshotDataFolder, snapID)
}

// capture copies volume volID's backing data to snapshot snapID's folder, once
// (captureGroup of one member).
func (d snapshotData) capture(ctx context.Context, volID, snapID string) error {
	return d.captureGroup(ctx, []snapshotMember{{volID: volID, snapID: snapID}})
}

// captureGroup copies each member's source volume's backing data to the member snapshot's
// folder, all as of one point in time (treecopy.CopyAll), all or none, once: when every
// member's folder exists the snapshots have their data already (a retried CreateSnapshot must
// not take a later copy); when only some do (a crash between renames), those are taken again
// with the rest. A source that was never staged has no data, so its snapshot gets an empty
// folder and a volume restored from it starts empty, as its source was. The copies are made
// beside the targets and renamed into place; on any error none is left, and nothing of the
// attempt either. Errors are copyStatus's (FAILED_PRECONDITION: a device node, a tree beyond
// the bounds; UNAVAILABLE: the volume kept changing) or INTERNAL.
func (d snapshotData) captureGroup(ctx context.Context, members []snapshotMember) error {
	if d.dir == "" || len(members) == 0 {
		return nil
	}
	log := klog.FromContext(ctx)
	have := 0
	for _, m := range members {
		if _, err := os.Stat(d.path(m.snapID)); err == nil {
			have++
		} else if !errors.Is(err, fs.ErrNotExist) {
			return internalf("data folder of snapshot %s: %v", m.snapID, err)
		}
	}
	if have == len(members) {
		return nil
	}
	if have > 0 {
		log.Info("Only some members of a group snapshot have their data; taking them all again", "members", len(members), "withData", have)
		if err := d.removeAll(ctx, members); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(d.dir, snapshotDataFolder), 0o750); err != nil {
		return internalf("create %s: %v", filepath.Join(d.dir, snapshotDataFolder), err)
	}
	var pairs []treecopy.Pair
	var pairMember []int // the index in members of each pair
	tmps := make([]string, 0, len(members))
	clean := func() {
		for _, tmp := range tmps {
			_ = os.RemoveAll(tmp)
		}
	}
	for i, m := range members {
		tmp := d.path(m.snapID) + ".tmp"
		if err := os.RemoveAll(tmp); err != nil {
			clean()
			return internalf("clear %s: %v", tmp, err)
		}
		tmps = append(tmps, tmp)
		from := filepath.Join(d.dir, m.volID)
		switch _, err := os.Lstat(from); {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(tmp, 0o750); err != nil {
				clean()
				return internalf("create %s: %v", tmp, err)
			}
		case err != nil:
			clean()
			return internalf("backing folder of volume %s: %v", m.volID, err)
		default:
			pairs = append(pairs, treecopy.Pair{Src: from, Dst: tmp})
			pairMember = append(pairMember, i)
		}
	}
	st, err := treecopy.CopyAll(ctx, pairs, treecopy.Options{})
	if err != nil {
		clean()
		var pe *treecopy.PairError
		if errors.As(err, &pe) && pe.Pair >= 0 && pe.Pair < len(pairMember) {
			m := members[pairMember[pe.Pair]]
			return copyStatus(err, "copy the data of volume %s to snapshot %s (%s)", m.volID, m.snapID, plural.Of(len(members), "member", "members"))
		}
		return copyStatus(err, "copy the data of the %s of a group snapshot", plural.Of(len(members), "member", "members"))
	}
	for i, m := range members {
		if err := os.Rename(tmps[i], d.path(m.snapID)); err != nil {
			clean()
			_ = d.removeAll(ctx, members[:i])
			return internalf("put the data of snapshot %s in place: %v", m.snapID, err)
		}
	}
	log.V(2).Info("Snapshot data captured", "snapshotID", members[0].snapID, "volumeID", members[0].volID, "members", len(members),
		"entries", st.Entries, "bytes", st.Bytes, "hardLinks", st.HardLinks, "attempts", st.Attempts)
	return nil
}

// removeAll removes every member's data (remove).
func (d snapshotData) removeAll(ctx context.Context, members []snapshotMember) error {
	for _, m := range members {
		if err := d.remove(ctx, m.snapID); err != nil {
			return err
		}
	}
	return nil
}

// remove deletes snapshot snapID's data; data that is gone is success. Errors are INTERNAL.
func (d snapshotData) remove(ctx context.Context, snapID string) error {
	p := d.path(snapID)
	if p == "" {
		return nil
	}
	if err := os.RemoveAll(p); err != nil {
		return internalf("remove the data of snapshot %s: %v", snapID, err)
	}
	klog.FromContext(ctx).V(4).Info("Snapshot data removed", "snapshotID", snapID)
	return nil
}
