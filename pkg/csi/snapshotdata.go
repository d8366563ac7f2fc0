package csi

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"k8s.io/klog/v2"
)

// A snapshot's data. The fake cloud keeps no data: a volume's backing data (its mount folder
// and its block file) lives in the volume data folder every node shares (--volume-data-dir,
// <dir>/<volumeID>/). So that a volume restored from a snapshot holds what its source held when
// the snapshot was taken (CSI spec, CreateSnapshot: "a point-in-time copy"; CreateVolume with a
// snapshot content source), the controller copies the source's backing data to
// <dir>/.snapshots/<snapshotID>/ when it creates the snapshot, the node copies that to the new
// volume's backing folder the first time it stages it (as for a clone, nodeclone.go), and
// DeleteSnapshot removes the copy. The cloud's IDs are "vol-…" and "snap-…", so no volume's
// folder is named .snapshots.

// snapshotDataFolder is the folder of the snapshots' data inside the volume data folder.
const snapshotDataFolder = ".snapshots"

// snapshotData keeps the snapshots' data under a volume data folder; the zero value (no
// folder) keeps none, and restored volumes start empty.
type snapshotData struct {
	// dir is the volume data folder (--volume-data-dir); "" keeps no data.
	dir string
}

// path is the folder of snapshot snapID's data; "" when no data is kept.
func (d snapshotData) path(snapID string) string {
	if d.dir == "" {
		return ""
	}
	return filepath.Join(d.dir, snapshotDataFolder, snapID)
}

// capture copies volume volID's backing data to snapshot snapID's folder, once: a snapshot
// whose folder exists has its data already (a retried CreateSnapshot must not take a later
// copy), and a source that was never staged has no data, so the snapshot gets an empty folder
// and a volume restored from it starts empty, as its source was. The copy is made beside the
// target and renamed into place, so a crash leaves either no data or all of it. A source in use
// is copied while it may be written: crash-consistent, what a cloud snapshot of an attached
// disk gives too. Errors are INTERNAL.
func (d snapshotData) capture(ctx context.Context, volID, snapID string) error {
	dst := d.path(snapID)
	if dst == "" {
		return nil
	}
	if _, err := os.Stat(dst); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return internalf("data folder of snapshot %s: %v", snapID, err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
		return internalf("create %s: %v", filepath.Dir(dst), err)
	}
	tmp := dst + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return internalf("clear %s: %v", tmp, err)
	}
	from := filepath.Join(d.dir, volID)
	switch _, err := os.Stat(from); {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Mkdir(tmp, 0o750); err != nil {
			return internalf("create %s: %v", tmp, err)
		}
	case err != nil:
		return internalf("backing folder of volume %s: %v", volID, err)
	default:
		if err := copyTree(from, tmp); err != nil {
			_ = os.RemoveAll(tmp)
			return internalf("copy the data of volume %s to snapshot %s: %v", volID, snapID, err)
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		_ = os.RemoveAll(tmp)
		return internalf("put the data of snapshot %s in place: %v", snapID, err)
	}
	klog.FromContext(ctx).V(2).Info("Snapshot data captured", "snapshotID", snapID, "volumeID", volID)
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
