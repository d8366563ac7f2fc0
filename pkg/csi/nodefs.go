package csi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

// The node service's file and mount helpers: the volumes' backing data, the targets, the
// bind mounts. node.go has the RPCs that use them.

// stagedBlockFile is the file inside staging_target_path a block volume's loop device node is
// bind-mounted on at stage.
const stagedBlockFile = "block"

// backingDir is the folder of a volume's data: under DataDir when set, else its state folder.
func (n *NodeServer) backingDir(id string) string {
	if n.cfg.DataDir != "" {
		return filepath.Join(n.cfg.DataDir, id)
	}
	return n.dir.VolumeDir(id)
}
func (n *NodeServer) dataDir(id string) string   { return filepath.Join(n.backingDir(id), "data") }
func (n *NodeServer) blockFile(id string) string { return filepath.Join(n.backingDir(id), "block.img") }

func internalf(format string, args ...any) error {
	return status.Errorf(codes.Internal, format, args...)
}

func isReadOnly(c *csi.VolumeCapability, readonlyFlag bool) bool {
	return readonlyFlag || c.GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY
}

// ensureBackingFile makes the sparse backing file of a block volume at least size bytes and
// returns its size. A file it created is removed again when it cannot be sized, so a failed
// call leaves no 0-byte volume behind. Errors are status errors: OUT_OF_RANGE when the file
// system cannot hold a file that big (EFBIG: ext4 stops just short of 16 TiB),
// RESOURCE_EXHAUSTED when it is full, INTERNAL otherwise.
func ensureBackingFile(path string, size int64) (int64, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return 0, internalf("backing file %s: %v", path, err)
	}
	created := false
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o640)
	switch {
	case err == nil:
		created = true
	case errors.Is(err, os.ErrExist):
		f, err = os.OpenFile(path, os.O_RDWR, 0)
	}
	if err != nil {
		return 0, internalf("backing file %s: %v", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, internalf("backing file %s: %v", path, err)
	}
	if fi.Size() >= size {
		return fi.Size(), nil
	}
	if err := f.Truncate(size); err != nil {
		if created {
			_ = os.Remove(path)
		}
		switch {
		case errors.Is(err, unix.EFBIG):
			return 0, status.Errorf(codes.OutOfRange, "the node's file system cannot hold a %d-byte volume: %v", size, err)
		case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
			return 0, status.Errorf(codes.ResourceExhausted, "no space for a %d-byte volume: %v", size, err)
		}
		return 0, internalf("size backing file %s to %d bytes: %v", path, size, err)
	}
	return size, nil
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

// ensureFile creates an empty regular file (a bind-mount target for a file) if missing.
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

// bindOnce bind-mounts source on target unless target is already a mount point; a mount with
// the other read-only setting is ALREADY_EXISTS (CSI spec, NodePublishVolume). With device
// set ("major:minor") the mount must be of that block device: any other mount at target (a
// plain file bind mount left by an older driver, or a loop device since detached) is stale
// and replaced.
func (n *NodeServer) bindOnce(ctx context.Context, source, target string, readOnly bool, device string) error {
	mp, err := n.cfg.Mounter.MountPoint(target)
	if err != nil {
		return internalf("inspect %s: %v", target, err)
	}
	if mp != nil && device != "" && mp.Device != device {
		klog.FromContext(ctx).Info("Replacing a stale mount", "path", target, "mountedDevice", mp.Device, "root", mp.Root, "device", device)
		if _, err := n.unmountAll(target); err != nil {
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
	if err := n.cfg.Mounter.BindMount(source, target, readOnly); err != nil {
		return internalf("%v", err)
	}
	return nil
}

// unmountAll removes every mount stacked at target; it reports whether anything was mounted.
func (n *NodeServer) unmountAll(target string) (bool, error) {
	found := false
	for i := 0; i < 16; i++ {
		mp, err := n.cfg.Mounter.MountPoint(target)
		if err != nil {
			return found, internalf("inspect %s: %v", target, err)
		}
		if mp == nil {
			return found, nil
		}
		found = true
		if err := n.cfg.Mounter.Unmount(target); err != nil {
			return found, internalf("%v", err)
		}
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

// targetProblem says why an existing target_path that is not a mount point cannot be
// published at, or "": for mount a directory, for block a regular file, and empty, since a
// mount over anything else hides it (and its removal later could not be told apart).
func targetProblem(target string, fi os.FileInfo, isBlock bool) (string, error) {
	if isBlock {
		switch {
		case !fi.Mode().IsRegular():
			return "is not a regular file (" + fi.Mode().Type().String() + ")", nil
		case fi.Size() != 0:
			return fmt.Sprintf("is a file of %d bytes, which the block device would hide", fi.Size()), nil
		}
		return "", nil
	}
	if !fi.IsDir() {
		return "is not a directory (" + fi.Mode().Type().String() + ")", nil
	}
	d, err := os.Open(target)
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

// removeTarget removes target when it is an empty directory or an empty regular file (what
// a publish creates) and reports what it kept otherwise, "" when nothing is left.
func removeTarget(target string) (kept string, err error) {
	fi, err := os.Lstat(target)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", nil
	case err != nil:
		return "", err
	case fi.IsDir():
		if err := os.Remove(target); err != nil {
			if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
				return "a directory that is not empty", nil
			}
			return "", err
		}
		return "", nil
	case fi.Mode().IsRegular() && fi.Size() == 0:
		return "", os.Remove(target)
	default:
		return fmt.Sprintf("a %s of %d bytes", fi.Mode().Type(), fi.Size()), nil
	}
}
