package csi

import (
	"context"
	"errors"
	"io/fs"
	"os"

	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/treecopy"
)

// The node side of CLONE_VOLUME and of restoring a snapshot: the cloud keeps no data, the
// volumes' backing data is on the node (shared by every node with --volume-data-dir), so a
// clone gets its source's data, and a restored volume its snapshot's (snapshotdata.go), the
// first time it is staged.

// seedClone copies src's backing data (the mount data folder and the block file, whichever
// exist) to the clone id's (seedFrom). It is a copy of the source as it is now; a source in
// use elsewhere may be written while it is copied, and the copy is still of one point in time
// (treecopy: checked after the copy, made again when the source changed, UNAVAILABLE when it
// never held still).
func (n *NodeServer) seedClone(ctx context.Context, id, src string) error {
	return n.seedFrom(ctx, id, n.backingDir(src), "volume", src)
}

// seedRestore copies snapshot snap's data, which the controller kept when it took the
// snapshot (snapshotdata.go), to the restored volume id's (seedFrom). Without a shared volume
// data folder no snapshot data is kept, and the volume starts empty.
func (n *NodeServer) seedRestore(ctx context.Context, id, snap string) error {
	from := snapshotData{dir: n.cfg.DataDir}.path(snap)
	if from == "" {
		klog.FromContext(ctx).V(2).Info("No volume data folder, so no snapshot data; the restored volume starts empty", "volumeID", id, "sourceSnapshotID", snap)
		return nil
	}
	return n.seedFrom(ctx, id, from, "snapshot", snap)
}

// seedFrom copies the backing data in the folder from (a source volume's, a snapshot's) to
// volume id's, once: a volume whose backing folder exists already has its data (its own,
// written since) and is left alone, and a source without data leaves the volume empty. The
// copy is made beside the target and renamed into place, so a crash leaves either no data or
// all of it. srcKind ("volume", "snapshot") and src name the source in logs and errors.
//
// The copy (treecopy) cannot be steered by a pod writing the source: no symlink is followed,
// symlinks, hard links, FIFOs and sockets are kept as such, and a source holding a device node
// or a tree beyond treecopy's bounds is FAILED_PRECONDITION, one that kept changing while it
// was copied UNAVAILABLE; on any error no data is left for id.
func (n *NodeServer) seedFrom(ctx context.Context, id, from, srcKind, src string) error {
	dst := n.backingDir(id)
	if _, err := os.Stat(dst); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return internalf("backing folder of %s: %v", id, err)
	}
	if _, err := os.Stat(from); errors.Is(err, fs.ErrNotExist) {
		klog.FromContext(ctx).V(2).Info("The source has no data; the volume starts empty", "volumeID", id, "sourceKind", srcKind, "source", src)
		return nil
	} else if err != nil {
		return internalf("data of source %s: %v", src, err)
	}
	tmp := dst + ".clone"
	if err := os.RemoveAll(tmp); err != nil {
		return internalf("clear %s: %v", tmp, err)
	}
	st, err := treecopy.Copy(ctx, from, tmp, treecopy.Options{})
	if err != nil {
		_ = os.RemoveAll(tmp)
		return copyStatus(err, "copy the data of %s %s to volume %s", srcKind, src, id)
	}
	if err := os.Rename(tmp, dst); err != nil {
		_ = os.RemoveAll(tmp)
		return internalf("put the data of %s in place: %v", id, err)
	}
	klog.FromContext(ctx).V(2).Info("Volume seeded from its source", "volumeID", id, "sourceKind", srcKind, "source", src,
		"entries", st.Entries, "bytes", st.Bytes, "hardLinks", st.HardLinks, "attempts", st.Attempts)
	return nil
}
