package csi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// The node side of CLONE_VOLUME and of restoring a snapshot: the cloud keeps no data, the
// volumes' backing data is on the node (shared by every node with --volume-data-dir), so a
// clone gets its source's data, and a restored volume its snapshot's (snapshotdata.go), the
// first time it is staged.

// seedClone copies src's backing data (the mount data folder and the block file, whichever
// exist) to the clone id's (seedFrom). It is a copy of the source as it is now; a source in
// use elsewhere is copied while it may be written (crash-consistent at best), which is what a
// cloud clone of an attached disk gives too.
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
	if err := copyTree(from, tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return internalf("copy the data of %s to volume %s: %v", src, id, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		_ = os.RemoveAll(tmp)
		return internalf("put the data of %s in place: %v", id, err)
	}
	klog.FromContext(ctx).V(2).Info("Volume seeded from its source", "volumeID", id, "sourceKind", srcKind, "source", src)
	return nil
}

// copyTree copies the folder from to to (which must not exist): folders, regular files (with
// their holes) and symlinks, modes kept. Anything else (a device node, a socket) is an error.
func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		target := filepath.Join(to, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.Mkdir(target, info.Mode().Perm())
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			return copySparse(path, target, info.Mode().Perm())
		default:
			return fmt.Errorf("%s: cannot copy a %s", path, d.Type())
		}
	})
}

// copySparse copies a regular file, only its data extents (SEEK_DATA/SEEK_HOLE), so that a
// sparse block file of a TiB with little written costs what was written.
func copySparse(from, to string, perm fs.FileMode) (err error) {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	size := fi.Size()
	if err := out.Truncate(size); err != nil {
		return err
	}
	fd := int(in.Fd())
	for off := int64(0); off < size; {
		start, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole is left
		}
		if err != nil {
			return fmt.Errorf("seek data in %s: %w", from, err)
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("seek hole in %s: %w", from, err)
		}
		if _, err := io.Copy(io.NewOffsetWriter(out, start), io.NewSectionReader(in, start, end-start)); err != nil {
			return err
		}
		off = end
	}
	return out.Sync()
}
