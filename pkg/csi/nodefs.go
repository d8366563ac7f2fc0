package csi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

// The node service's file and mount helpers: the volumes' backing data, the targets, the
// bind mounts. node.go has the RPCs that use them.

// stagedBlockFile is the file inside staging_target_path a block volume's loop device node is
// bind-mounted on at stage.
const stagedBlockFile = "block"

// backingDir is the folder of a volume's data: under DataDir when set, else its state folder.
func (n *NodeServer) backingDir(id string) string {
	return filepath.Join(n.dataRoot().Dir(), id)
}

// dataRoot is the folder of every volume's backing folder (DataDir, else the state dir's
// volumes folder), below which the node follows no link (mount.Root).
func (n *NodeServer) dataRoot() mount.Root {
	if n.cfg.DataDir != "" {
		return mount.NewRoot(n.cfg.DataDir)
	}
	return mount.NewRoot(n.dir.VolumesDir())
}

// readyDataRoot is dataRoot, created (with its parents, as configured: a link in the
// configured path is the administrator's) when missing.
func (n *NodeServer) readyDataRoot() (mount.Root, error) {
	r := n.dataRoot()
	if err := os.MkdirAll(r.Dir(), 0o750); err != nil {
		return r, internalf("volume data folder %s: %v", r.Dir(), err)
	}
	return r, nil
}

// kubeletRoot is --kubelet-root, below which the node follows no link (mount.Root).
func (n *NodeServer) kubeletRoot() mount.Root { return mount.NewRoot(n.cfg.KubeletRoot) }

// pathStatus is the status of a failure to reach the request path p (field names it) below
// the kubelet root: a link on the way, or an element that is not a folder, is
// FAILED_PRECONDITION (the node's state at that path is what stops the call; nothing was
// mounted, unmounted or removed); anything else INTERNAL.
func pathStatus(field, p string, err error) error {
	switch {
	case errors.Is(err, mount.ErrSymlink):
		return status.Errorf(codes.FailedPrecondition, "%s %s: a symbolic link is on the path below the kubelet root; the node follows none there, so it touched nothing", field, cloud.Quote(p))
	case errors.Is(err, mount.ErrOutside):
		return status.Errorf(codes.FailedPrecondition, "%s %s is not below the kubelet root", field, cloud.Quote(p))
	case errors.Is(err, unix.ENOTDIR):
		return status.Errorf(codes.FailedPrecondition, "%s %s: an element of the path is not a directory", field, cloud.Quote(p))
	}
	return internalf("%s %s: %v", field, p, err)
}

// dataStatus is the status of a failure to reach a volume's backing data below the data
// folder: a link there is FAILED_PRECONDITION (someone replaced the backing data; it is not
// followed), anything else INTERNAL.
func dataStatus(id string, err error) error {
	if errors.Is(err, mount.ErrSymlink) || errors.Is(err, mount.ErrOutside) {
		return status.Errorf(codes.FailedPrecondition, "backing data of volume %s: %v; the node follows no link below its data folder", id, err)
	}
	return internalf("backing data of volume %s: %v", id, err)
}
func (n *NodeServer) dataDir(id string) string   { return filepath.Join(n.backingDir(id), "data") }
func (n *NodeServer) blockFile(id string) string { return filepath.Join(n.backingDir(id), "block.img") }

func internalf(format string, args ...any) error {
	return status.Errorf(codes.Internal, format, args...)
}

func isReadOnly(c *csi.VolumeCapability, readonlyFlag bool) bool {
	return readonlyFlag || c.GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY
}

// ensureBackingFile makes the sparse backing file of block volume id at least size bytes
// and returns its size; with create false a missing file is NOT_FOUND and none is made. The
// file is opened below the data folder without following any link (O_NOFOLLOW, mount.Root)
// and must be a regular file (fstat), so a backing file replaced by a link to something
// else is never extended (FAILED_PRECONDITION). A file it created is removed again when it
// cannot be sized, so a failed call leaves no 0-byte volume behind. Errors are status
// errors: OUT_OF_RANGE when the file system cannot hold a file that big (EFBIG: ext4 stops
// just short of 16 TiB), RESOURCE_EXHAUSTED when it is full, INTERNAL otherwise.
func (n *NodeServer) ensureBackingFile(id string, size int64, create bool) (int64, error) {
	f, got, err := n.openBackingFile(id, size, create)
	if err != nil {
		return 0, err
	}
	f.Close()
	return got, nil
}

// openBackingFile is ensureBackingFile, returning also the open (read-write) file it
// checked and sized, which the caller closes: NodeStageVolume attaches the loop device to
// this descriptor (mount.Mounter.AttachLoopFile), so a file swapped in under the name after
// the checks is never attached.
func (n *NodeServer) openBackingFile(id string, size int64, create bool) (_ *os.File, _ int64, retErr error) {
	path, root := n.blockFile(id), n.dataRoot()
	if create {
		var err error
		if root, err = n.readyDataRoot(); err != nil {
			return nil, 0, err
		}
	}
	created := false
	var f *os.File
	var err error
	if create {
		var dir *os.File
		if dir, err = root.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return nil, 0, dataStatus(id, err)
		}
		dir.Close()
		f, err = root.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, 0o640)
		if err == nil {
			created = true
		}
	}
	if !created && (!create || errors.Is(err, os.ErrExist)) {
		f, err = root.Open(path, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	}
	switch {
	case !create && errors.Is(err, os.ErrNotExist):
		return nil, 0, status.Errorf(codes.NotFound, "volume %s has no backing file on this node", id)
	case err != nil:
		return nil, 0, dataStatus(id, err)
	}
	defer func() {
		if retErr != nil {
			f.Close()
		}
	}()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, internalf("backing file %s: %v", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, status.Errorf(codes.FailedPrecondition, "backing file %s of volume %s is not a regular file (%s)", path, id, fi.Mode().Type())
	}
	if why, err := n.foreignBackingFile(root, path, f); err != nil {
		return nil, 0, dataStatus(id, err)
	} else if why != "" {
		return nil, 0, status.Errorf(codes.FailedPrecondition, "backing file %s of volume %s %s: the node sizes and attaches only the volume's own file", path, id, why)
	}
	if fi.Size() >= size {
		return f, fi.Size(), nil
	}
	if err := f.Truncate(size); err != nil {
		if created {
			_ = root.Remove(path)
		}
		switch {
		case errors.Is(err, unix.EFBIG):
			return nil, 0, status.Errorf(codes.OutOfRange, "the node's file system cannot hold a %d-byte volume: %v", size, err)
		case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
			return nil, 0, status.Errorf(codes.ResourceExhausted, "no space for a %d-byte volume: %v", size, err)
		}
		return nil, 0, internalf("size backing file %s to %d bytes: %v", path, size, err)
	}
	return f, size, nil
}

// foreignBackingFile says why f, the opened backing file at path below root, may be another
// file than the volume's own, or "": a hard link (st_nlink above 1: the same data under
// another name, maybe another volume's) or a mount (a bind mount over block.img: another
// mount ID, or another device, than its folder's). Errors: the folder or a statx failed.
func (n *NodeServer) foreignBackingFile(root mount.Root, path string, f *os.File) (string, error) {
	var fs unix.Statx_t
	if err := unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH|unix.AT_STATX_DONT_SYNC, unix.STATX_NLINK|unix.STATX_MNT_ID, &fs); err != nil {
		return "", fmt.Errorf("statx %s: %w", path, err)
	}
	if fs.Nlink != 1 {
		return fmt.Sprintf("has %d hard links", fs.Nlink), nil
	}
	d, err := root.Open(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return "", err
	}
	defer d.Close()
	var ds unix.Statx_t
	if err := unix.Statx(int(d.Fd()), "", unix.AT_EMPTY_PATH|unix.AT_STATX_DONT_SYNC, unix.STATX_MNT_ID, &ds); err != nil {
		return "", fmt.Errorf("statx %s: %w", filepath.Dir(path), err)
	}
	if fs.Dev_major != ds.Dev_major || fs.Dev_minor != ds.Dev_minor ||
		(fs.Mask&ds.Mask&unix.STATX_MNT_ID != 0 && fs.Mnt_id != ds.Mnt_id) {
		return "is on another mount than its folder (a mount over it)", nil
	}
	return "", nil
}

// stageSize is the size in bytes of a block volume's backing file: volume_context
// ["sizeBytes"] (which CreateVolume sets), DefaultVolumeSize when absent (a volume made
// outside this driver). Anything but a whole number in 1..MaxVolumeSize is INVALID_ARGUMENT,
// checked before any file is touched.
func stageSize(vc map[string]string) (int64, error) {
	v, ok := vc[VolumeContextSizeBytes]
	if !ok {
		return DefaultVolumeSize, nil
	}
	s, err := strconv.ParseInt(v, 10, 64)
	if err != nil || s < 1 || s > MaxVolumeSize {
		return 0, status.Errorf(codes.InvalidArgument, "volume_context %s=%q: want a whole number of bytes from 1 to %d", VolumeContextSizeBytes, v, MaxVolumeSize)
	}
	return s, nil
}

// bindOnce bind-mounts source (a FdPath or a path) on target, a path below the kubelet
// root, unless target is already a mount point; a mount with the other read-only setting is
// ALREADY_EXISTS (CSI spec, NodePublishVolume). With device set ("major:minor") the mount
// must be of that block device; another mount at target is replaced only when it is
// provably volume id's own stale one, a bind of its backing file (what an older driver
// staged, before loop devices); any other (another volume's device, anything else) is
// FAILED_PRECONDITION and stays. target is opened below the kubelet root without following
// a link and the mount made on that descriptor (mount.FdPath), so a link swapped in at any
// moment cannot move the mount elsewhere.
func (n *NodeServer) bindOnce(ctx context.Context, id, field, source, target string, readOnly bool, device string) error {
	mp, err := n.mountAt(field, target)
	if err != nil {
		return err
	}
	if mp != nil && device != "" && mp.Device != device {
		stale, err := n.showsBlockFile(id, field, target)
		if err != nil {
			return err
		}
		if !stale {
			return status.Errorf(codes.FailedPrecondition, "%s %s holds another mount (device %q, root %s), not volume %s's", field, target, mp.Device, mp.Root, id)
		}
		klog.FromContext(ctx).Info("Replacing a stale mount", "path", target, "mountedDevice", mp.Device, "root", mp.Root, "device", device)
		if _, err := n.unmountAll(field, target); err != nil {
			return err
		}
		mp = nil
	}
	if mp != nil {
		if mp.ReadOnly != readOnly {
			return status.Errorf(codes.AlreadyExists, "%s is already mounted with readOnly=%v", target, mp.ReadOnly)
		}
		return nil
	}
	tf, err := n.kubeletRoot().Open(target, unix.O_PATH, 0)
	if err != nil {
		return pathStatus(field, target, err)
	}
	defer tf.Close()
	if err := n.cfg.Mounter.BindMount(source, mount.FdPath(tf), readOnly); err != nil {
		return internalf("bind mount on %s: %v", target, err)
	}
	return nil
}

// openTarget opens p (a path below the kubelet root, reached without following a link; field
// names it in errors) as an O_PATH descriptor; a missing p is (nil, nil). The caller closes it.
func (n *NodeServer) openTarget(field, p string) (*os.File, error) {
	f, err := n.kubeletRoot().Open(p, unix.O_PATH, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, pathStatus(field, p, err)
	}
	return f, nil
}

// mountAt returns the topmost mount at p (a path below the kubelet root, reached without
// following a link; field names it in errors), nil when p is no mount point or missing.
func (n *NodeServer) mountAt(field, p string) (*mount.MountPoint, error) {
	f, err := n.openTarget(field, p)
	if f == nil || err != nil {
		return nil, err
	}
	defer f.Close()
	mp, err := n.cfg.Mounter.MountPoint(mount.FdPath(f))
	if err != nil {
		return nil, internalf("inspect %s: %v", p, err)
	}
	return mp, nil
}

// unmountAll removes every mount stacked at target, a path below the kubelet root; it
// reports whether anything was mounted. Each mount is unmounted through a descriptor of
// target opened without following a link (mount.Root, mount.FdPath), so what is unmounted
// is the mount at target, never one a link leads to.
func (n *NodeServer) unmountAll(field, target string) (bool, error) {
	found := false
	for i := 0; i < 16; i++ {
		f, err := n.kubeletRoot().Open(target, unix.O_PATH, 0)
		if errors.Is(err, os.ErrNotExist) {
			return found, nil
		}
		if err != nil {
			return found, pathStatus(field, target, err)
		}
		mp, err := n.cfg.Mounter.MountPoint(mount.FdPath(f))
		if err == nil && mp != nil {
			err = n.cfg.Mounter.Unmount(mount.FdPath(f))
		}
		f.Close()
		if err != nil {
			return found, internalf("unmount %s: %v", target, err)
		}
		if mp == nil {
			return found, nil
		}
		found = true
	}
	return found, internalf("%s is still mounted after 16 unmounts", target)
}

// sameVolumeMount reports whether the mount at is of the same volume as the staged mount
// staged: the same loop device for a block volume, else the same directory of the same
// file system (a bind of the staged mount, as a publish makes, or the staged mount itself).
func sameVolumeMount(staged, at *mount.MountPoint) bool {
	if staged.Device != "" {
		return at.Device == staged.Device
	}
	return at.Device == "" && at.Root == staged.Root && at.Source == staged.Source && at.FSType == staged.FSType
}

// targetProblem says why an existing target_path (or staging_target_path) that is not a
// mount point cannot be mounted at, or "": for mount a directory, for block a regular file,
// and empty, since a mount over anything else hides it (and its removal later could not be
// told apart). target is read below the kubelet root without following a link.
func (n *NodeServer) targetProblem(target string, st unix.Stat_t, isBlock bool) (string, error) {
	typ := os.FileMode(0)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		typ = os.ModeDir
	case unix.S_IFREG:
	case unix.S_IFLNK:
		typ = os.ModeSymlink
	default:
		typ = os.ModeIrregular
	}
	if isBlock {
		switch {
		case st.Mode&unix.S_IFMT != unix.S_IFREG:
			return "is not a regular file (" + typ.String() + ")", nil
		case st.Size != 0:
			return fmt.Sprintf("is a file of %d bytes, which the block device would hide", st.Size), nil
		}
		return "", nil
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return "is not a directory (" + typ.String() + ")", nil
	}
	d, err := n.kubeletRoot().Open(target, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return "", err
	}
	defer d.Close()
	names, err := d.Readdirnames(1)
	if len(names) > 0 {
		return "is a directory that is not empty: the mount would hide its contents", nil
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return "", nil
}

// removeTarget removes target (below the kubelet root, reached without following a link)
// when it is an empty directory or an empty regular file (what a publish creates) and
// reports what it kept otherwise, "" when nothing is left.
func (n *NodeServer) removeTarget(target string) (kept string, err error) {
	root := n.kubeletRoot()
	st, err := root.Lstat(target)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", nil
	case err != nil:
		return "", err
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		if err := root.Remove(target); err != nil {
			if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
				return "a directory that is not empty", nil
			}
			return "", err
		}
		return "", nil
	case st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == 0:
		return "", root.Remove(target)
	default:
		return fmt.Sprintf("a file of mode %o and %d bytes", st.Mode, st.Size), nil
	}
}

// accessType names a stage's access type in messages.
func accessType(block bool) string {
	if block {
		return "block"
	}
	return "mount"
}

// checkStageTarget refuses (FAILED_PRECONDITION) to stage volume id at staging when the
// volume is recorded as staged at another path (CSI spec, NodeStageVolume errors: a volume
// staged at a different staging_target_path), when another volume is recorded as staged
// there, or when a mount there is not this volume's own (a block stage's staging path is a
// plain folder, a mount stage's the bind of this volume's data folder), or when it lies inside
// a volume's mount (insideVolume). The same volume staged
// there with the other access type is ALREADY_EXISTS (incompatible volume_capability). It
// touches nothing.
func (n *NodeServer) checkStageTarget(id, staging string, isBlock bool) error {
	if err := n.insideVolume("staging_target_path", staging); err != nil {
		return err
	}
	rec, ok, err := n.staged.Get(id)
	if err != nil {
		return internalf("volume %s: %v", id, err)
	}
	if ok && rec.StagingPath() != staging {
		return status.Errorf(codes.FailedPrecondition, "volume %s is already staged at %s: unstage it there before staging it at %s", id, rec.StagingPath(), staging)
	}
	if ok && rec.Block != isBlock {
		return status.Errorf(codes.AlreadyExists, "volume %s is already staged at %s as a %s volume", id, staging, accessType(rec.Block))
	}
	for _, p := range []string{staging, filepath.Join(staging, stagedBlockFile)} {
		other, ok, err := n.staged.Owner(p)
		if err != nil {
			return internalf("volume %s: %v", id, err)
		}
		if ok && other != id {
			return status.Errorf(codes.FailedPrecondition, "staging_target_path %s: volume %s is staged there", staging, other)
		}
	}
	mp, err := n.mountAt("staging_target_path", staging)
	if err != nil || mp == nil {
		return err
	}
	if isBlock {
		return status.Errorf(codes.FailedPrecondition, "staging_target_path %s holds a mount (root %s of %s); a block volume is staged in a plain folder", staging, mp.Root, mp.Source)
	}
	own, err := n.showsData(id, "staging_target_path", staging)
	if err != nil {
		return err
	}
	if !own {
		return status.Errorf(codes.FailedPrecondition, "staging_target_path %s holds another mount (root %s of %s), not volume %s's", staging, mp.Root, mp.Source, id)
	}
	return nil
}

// unrecordedStage tells whether staging, where volume id has no stage record, holds a stage
// that is provably this volume's: a mount of its data folder at staging (mount), or its
// loop device, or a bind of its backing file, at <staging>/block (block). Nothing else is
// (another volume's mount, a publish, a path inside a mount), and is not touched.
func (n *NodeServer) unrecordedStage(id, staging string) (owned, isBlock bool, err error) {
	mp, err := n.mountAt("staging_target_path", staging)
	if err != nil {
		return false, false, err
	}
	if mp != nil {
		// A block stage mounts nothing at staging itself.
		own, err := n.showsData(id, "staging_target_path", staging)
		return own, false, err
	}
	blockTarget := filepath.Join(staging, stagedBlockFile)
	bmp, err := n.mountAt("staging_target_path", blockTarget)
	if err != nil || bmp == nil {
		return false, false, err
	}
	if bmp.Device != "" {
		own, err := n.isVolumeDevice(id, bmp)
		return own, own, err
	}
	own, err := n.showsBlockFile(id, "staging_target_path", blockTarget)
	return own, own, err
}

// isVolumeMount reports whether mp, the mount at p (a FdPath of it), is volume id's: its
// loop device for a device, else a mount of its data folder.
func (n *NodeServer) isVolumeMount(id, p string, mp *mount.MountPoint) (bool, error) {
	if mp.Device != "" {
		return n.isVolumeDevice(id, mp)
	}
	d, err := n.dataRoot().Open(n.dataDir(id), unix.O_PATH|unix.O_DIRECTORY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, dataStatus(id, err)
	}
	defer d.Close()
	own, err := n.cfg.Mounter.Shows(p, mount.FdPath(d))
	if err != nil {
		return false, internalf("inspect %s: %v", p, err)
	}
	return own, nil
}

// isVolumeDevice reports whether mp is of the loop device attached to volume id's backing
// file.
func (n *NodeServer) isVolumeDevice(id string, mp *mount.MountPoint) (bool, error) {
	if mp.Device == "" {
		return false, nil
	}
	lp, ok, err := n.cfg.Mounter.FindLoop(n.blockFile(id))
	if err != nil {
		return false, internalf("loop device of volume %s: %v", id, err)
	}
	return ok && lp.Device == mp.Device, nil
}

// showsData reports whether p (below the kubelet root, not followed) is a mount of volume
// id's data folder.
func (n *NodeServer) showsData(id, field, p string) (bool, error) {
	f, err := n.openTarget(field, p)
	if f == nil || err != nil {
		return false, err
	}
	defer f.Close()
	return n.isVolumeMount(id, mount.FdPath(f), &mount.MountPoint{})
}

// showsBlockFile reports whether p (below the kubelet root, not followed) is a bind mount
// of volume id's backing file itself (a plain file stage of an older driver).
func (n *NodeServer) showsBlockFile(id, field, p string) (bool, error) {
	f, err := n.openTarget(field, p)
	if f == nil || err != nil {
		return false, err
	}
	defer f.Close()
	b, err := n.dataRoot().Open(n.blockFile(id), unix.O_PATH|unix.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, mount.ErrSymlink) {
		return false, nil
	}
	if err != nil {
		return false, dataStatus(id, err)
	}
	defer b.Close()
	own, err := n.cfg.Mounter.Shows(mount.FdPath(f), mount.FdPath(b))
	if err != nil {
		return false, internalf("inspect %s: %v", p, err)
	}
	return own, nil
}

// removeStagedBlockFile removes <staging>/block of a block stage when it is the empty
// regular file the stage created (below the kubelet root, not followed), and reports what it
// kept otherwise, "" when nothing is left.
func (n *NodeServer) removeStagedBlockFile(p string) (kept string, err error) {
	root := n.kubeletRoot()
	st, err := root.Lstat(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", nil
	case err != nil:
		return "", err
	case st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == 0:
		return "", root.Remove(p)
	}
	return fmt.Sprintf("a file of mode %o and %d bytes", st.Mode, st.Size), nil
}

// maxDataEntries bounds how many entries of the volumes' data folder insideVolume reads to
// compare a mount with: past it, the node cannot tell whether the mount is a volume's and
// refuses the call (FAILED_PRECONDITION).
const maxDataEntries = 65536

// insideVolume refuses (FAILED_PRECONDITION) a staging_target_path or target_path p (field
// names it) that lies inside a volume's mount: a folder above p, below the kubelet root, is
// a mount point that is a volume's stage (nodestate.Staged) or shows a volume's data folder
// (the same device and inode: mount.Mounter.ShownFile; a publish or stage of a mount volume).
// Creating p there would write into that volume's data, and its unstage or unpublish would
// take this mount with it. A mount above p that is not one of this plugin's volumes (an
// emptyDir, a kubelet root on its own file system) is no reason to refuse. When it cannot
// tell, it refuses too: more than maxDataEntries entries in the data folder
// (FAILED_PRECONDITION), a data folder or mount it cannot inspect (INTERNAL). It touches
// nothing, and holds no descriptor per data folder (one stat each), so the process's
// descriptor limit does not decide the answer.
func (n *NodeServer) insideVolume(field, p string) error {
	root := n.kubeletRoot().Dir()
	var data map[mount.FileID]string // data folder -> its volume's ID, read when first needed
	for d := filepath.Dir(p); d != root && strings.HasPrefix(d, root+"/"); d = filepath.Dir(d) {
		f, err := n.kubeletRoot().Open(d, unix.O_PATH|unix.O_DIRECTORY, 0)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return pathStatus(field, p, err)
		}
		found, err := n.volumeShownAt(f, d, field, p, &data)
		f.Close()
		if err != nil {
			return err
		}
		if found != "" {
			return status.Errorf(codes.FailedPrecondition, "%s %s is inside %s, a mount of volume %s: the node stages and publishes nothing inside a volume", field, cloud.Quote(p), d, found)
		}
	}
	return nil
}

// volumeShownAt returns the volume whose stage is d, or whose data folder the mount at d
// (f, opened there) shows, or "" when d is no mount point or none of this plugin's. data
// caches the data folders' identities across calls (dataFolders); field and p name the
// request path for its errors.
func (n *NodeServer) volumeShownAt(f *os.File, d, field, p string, data *map[mount.FileID]string) (string, error) {
	mp, err := n.cfg.Mounter.MountPoint(mount.FdPath(f))
	if err != nil {
		return "", internalf("inspect %s: %v", d, err)
	}
	if mp == nil {
		return "", nil
	}
	if id, ok, err := n.staged.Owner(d); err != nil {
		return "", internalf("stage records: %v", err)
	} else if ok {
		return id, nil
	}
	shown, ok, err := n.cfg.Mounter.ShownFile(mount.FdPath(f))
	if err != nil {
		return "", internalf("inspect %s: %v; cannot tell whether %s %s is inside a volume", d, err, field, cloud.Quote(p))
	}
	if !ok {
		return "", nil // unmounted since MountPoint: nothing above p there any more
	}
	if *data == nil {
		if *data, err = n.dataFolders(field, p); err != nil {
			return "", err
		}
	}
	return (*data)[shown], nil
}

// dataFolders maps the identity of every volume's data folder (<data root>/<id>/data, a
// folder reached without a link) to the volume's ID, by one stat each. An entry of the data
// root without such a folder (a block volume's, one being removed, or not the plugin's) is
// no data folder. More than maxDataEntries entries is FAILED_PRECONDITION, an entry it
// cannot stat INTERNAL: either way insideVolume cannot tell (field and p name the request
// path), and refuses.
func (n *NodeServer) dataFolders(field, p string) (map[mount.FileID]string, error) {
	out := map[mount.FileID]string{}
	dir, err := os.Open(n.dataRoot().Dir())
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, internalf("volume data folder: %v; cannot tell whether %s %s is inside a volume", err, field, cloud.Quote(p))
	}
	names, err := dir.Readdirnames(maxDataEntries + 1)
	dir.Close()
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, internalf("volume data folder: %v; cannot tell whether %s %s is inside a volume", err, field, cloud.Quote(p))
	}
	if len(names) > maxDataEntries {
		return nil, status.Errorf(codes.FailedPrecondition, "the volume data folder %s has more than %d entries: the node cannot tell whether %s %s is inside a volume, and refuses", n.dataRoot().Dir(), maxDataEntries, field, cloud.Quote(p))
	}
	for _, id := range names {
		st, err := n.dataRoot().Lstat(n.dataDir(id))
		switch {
		case errors.Is(err, os.ErrNotExist), errors.Is(err, unix.ENOTDIR), errors.Is(err, mount.ErrSymlink):
			continue // no data folder the node would use (it follows no link below the data root)
		case err != nil:
			return nil, internalf("data folder of volume %s: %v; cannot tell whether %s %s is inside a volume", id, err, field, cloud.Quote(p))
		case st.Mode&unix.S_IFMT != unix.S_IFDIR:
			continue
		}
		out[mount.FileIDOf(&st)] = id
	}
	return out, nil
}
