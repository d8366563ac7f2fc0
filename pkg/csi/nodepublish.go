package csi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

// publishRecord is what the node keeps of one target_path it published a volume at, in
// the state dir (nodestate.Dir.PublishRecord): the path and whether this
// plugin created the file or directory there. NodeUnpublishVolume removes only what it
// created (CSI spec, NodeUnpublishVolumeRequest.target_path: "The SP MUST delete the file or
// directory it created at this path"), never a directory the CO or anyone else made. The
// record is written before the target is created, so a crash in between still knows.
type publishRecord struct {
	Target  string `json:"target"`
	Created bool   `json:"created"`
}

// publishedTargets maps a volume ID to the target paths this process published it at, to
// refuse a second target for SINGLE_NODE_SINGLE_WRITER. It is not persisted: after a restart
// only the CO's own ReadWriteOncePod enforcement remains for volumes published before. Safe
// for concurrent use.
type publishedTargets struct {
	mu sync.Mutex
	m  map[string]map[string]bool
}

func newPublishedTargets() *publishedTargets {
	return &publishedTargets{m: map[string]map[string]bool{}}
}

// has reports whether volume id is published at target.
func (p *publishedTargets) has(id, target string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m[id][target]
}

// targets returns the targets volume id is published at.
func (p *publishedTargets) targets(id string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for t := range p.m[id] {
		out = append(out, t)
	}
	return out
}

// other returns a target other than target the volume is published at, or "".
func (p *publishedTargets) other(id, target string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for t := range p.m[id] {
		if t != target {
			return t
		}
	}
	return ""
}

// set records that volume id is published at target (on) or no longer (!on).
func (p *publishedTargets) set(id, target string, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		if p.m[id] == nil {
			p.m[id] = map[string]bool{}
		}
		p.m[id][target] = true
		return
	}
	delete(p.m[id], target)
	if len(p.m[id]) == 0 {
		delete(p.m, id)
	}
}

// prepareTarget makes target_path ready for the bind mount of the staged mount staged, and
// records (publishRecord) whether it created it. A missing target is created (a directory
// for mount, an empty file for block; missing parents too, though the CO makes the parent,
// CSI spec). An existing target must be what the publish would create, empty, or already a
// mount of this volume (a retry); anything else is FAILED_PRECONDITION: the request is
// well-formed (not INVALID_ARGUMENT), the node's state at that path is what stops it, and
// the CO may retry once it is cleared. A block target with another mount is left to bindOnce,
// which replaces only a provably stale one of this volume (else FAILED_PRECONDITION). A
// target inside a volume's mount is FAILED_PRECONDITION (insideVolume).
func (n *NodeServer) prepareTarget(ctx context.Context, id, target string, isBlock bool, staged *mount.MountPoint) error {
	if err := n.insideVolume("target_path", target); err != nil {
		return err
	}
	rec, hasRec, err := n.loadPublishRecord(ctx, id, target)
	if err != nil {
		return err
	}
	root := n.kubeletRoot()
	st, err := root.Lstat(target)
	if errors.Is(err, os.ErrNotExist) {
		if !hasRec || !rec.Created {
			if err := n.savePublishRecord(id, publishRecord{Target: target, Created: true}); err != nil {
				return err
			}
		}
		var f *os.File
		if isBlock {
			f, err = root.CreateFile(target, 0o640)
		} else {
			f, err = root.MkdirAll(target, 0o750)
		}
		if err != nil {
			return pathStatus("target_path", target, err)
		}
		return f.Close()
	}
	if err != nil {
		return pathStatus("target_path", target, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return pathStatus("target_path", target, mount.ErrSymlink)
	}
	mp, err := n.mountAt("target_path", target)
	if err != nil {
		return err
	}
	if mp != nil {
		if !isBlock && !sameVolumeMount(staged, mp) {
			return status.Errorf(codes.FailedPrecondition, "target_path %s holds another mount (root %s of %s), not volume %s", target, mp.Root, mp.Source, id)
		}
		return nil
	}
	why, err := n.targetProblem(target, st, isBlock)
	if err != nil {
		return pathStatus("target_path", target, err)
	}
	if why != "" {
		return status.Errorf(codes.FailedPrecondition, "target_path %s %s", target, why)
	}
	if !hasRec {
		// Someone else made it: unpublish leaves it.
		return n.savePublishRecord(id, publishRecord{Target: target, Created: false})
	}
	return nil
}

// loadPublishRecord returns the record of volume id at target; ok is false when there is
// none (nor any state dir). A record that cannot be parsed is logged and ignored: it was
// written atomically, so only a foreign hand makes one.
func (n *NodeServer) loadPublishRecord(ctx context.Context, id, target string) (publishRecord, bool, error) {
	if !n.dir.Enabled() {
		return publishRecord{}, false, nil
	}
	path := n.dir.PublishRecord(id, target)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return publishRecord{}, false, nil
	}
	if err != nil {
		return publishRecord{}, false, internalf("read publish record of %s: %v", id, err)
	}
	var r publishRecord
	if err := json.Unmarshal(b, &r); err != nil || r.Target != target {
		klog.FromContext(ctx).Error(err, "Ignoring a publish record that is not this target's", "volumeID", id, "targetPath", target, "path", path)
		return publishRecord{}, false, nil
	}
	return r, true, nil
}

// savePublishRecord writes the record of volume id at r.Target (nothing without a state
// dir). Errors are INTERNAL: without the record an unpublish could not tell what to remove.
func (n *NodeServer) savePublishRecord(id string, r publishRecord) error {
	if !n.dir.Enabled() {
		return nil
	}
	path := n.dir.PublishRecord(id, r.Target)
	b, err := json.Marshal(r)
	if err == nil {
		err = n.dir.WriteAtomic(path, append(b, '\n'))
	}
	if err != nil {
		return internalf("write publish record of %s: %v", id, err)
	}
	return nil
}

func (n *NodeServer) removePublishRecord(id, target string) error {
	if !n.dir.Enabled() {
		return nil
	}
	err := os.Remove(n.dir.PublishRecord(id, target))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return internalf("remove publish record of %s: %v", id, err)
	}
	_ = os.Remove(filepath.Dir(n.dir.PublishRecord(id, target))) // only when empty
	return nil
}

// notOwnPublish says why target_path is not volume id's publish, or "" when it is: a path
// recorded as a stage (of any volume) never is; a target with this volume's publish record
// (hasRec) or published by this process is; without either, only a mount at target that
// provably is this volume's (its data folder, its loop device, or a bind of its backing
// file as an older driver published block volumes) is. NodeUnpublishVolume unmounts and
// removes nothing else.
func (n *NodeServer) notOwnPublish(id, target string, hasRec bool) (string, error) {
	if other, ok, err := n.staged.Owner(target); err != nil {
		return "", internalf("volume %s: %v", id, err)
	} else if ok {
		return "the stage of volume " + other, nil
	}
	if hasRec || n.published.has(id, target) {
		return "", nil
	}
	f, err := n.kubeletRoot().Open(target, unix.O_PATH, 0)
	if errors.Is(err, os.ErrNotExist) {
		return "nothing", nil
	}
	if err != nil {
		return "", pathStatus("target_path", target, err)
	}
	defer f.Close()
	mp, err := n.cfg.Mounter.MountPoint(mount.FdPath(f))
	if err != nil {
		return "", internalf("inspect %s: %v", target, err)
	}
	if mp == nil {
		return "no mount", nil
	}
	own, err := n.isVolumeMount(id, mount.FdPath(f), mp)
	if err != nil || own {
		return "", err
	}
	if mp.Device == "" {
		if own, err := n.showsBlockFile(id, "target_path", target); err != nil || own {
			return "", err
		}
	}
	return fmt.Sprintf("a mount that is not this volume's (root %s of %s, device %q)", mp.Root, mp.Source, mp.Device), nil
}

// maxPublishRecords bounds how many publish records of one volume publishedAt reads: past
// it, the node cannot tell whether the volume is still published and refuses the unstage
// (FAILED_PRECONDITION).
const maxPublishRecords = 4096

// publishedAt returns a target_path where volume id is still published, or "": one this
// process published it at, or one of its publish records, that still holds a mount of this
// volume (isVolumeMount). A record or target whose mount is gone does not count, so a
// failed publish never blocks the unstage.
func (n *NodeServer) publishedAt(id string) (string, error) {
	targets := n.published.targets(id)
	if n.dir.Enabled() {
		dir := filepath.Dir(n.dir.PublishRecord(id, "/"))
		d, err := os.Open(dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", internalf("publish records of %s: %v", id, err)
		}
		if err == nil {
			names, err := d.Readdirnames(maxPublishRecords + 1)
			d.Close()
			if err != nil && !errors.Is(err, io.EOF) {
				return "", internalf("publish records of %s: %v", id, err)
			}
			if len(names) > maxPublishRecords {
				return "", status.Errorf(codes.FailedPrecondition, "volume %s has more than %d publish records in %s: the node cannot tell whether it is still published, and refuses", id, maxPublishRecords, dir)
			}
			for _, name := range names {
				b, err := os.ReadFile(filepath.Join(dir, name))
				var r publishRecord
				if err == nil && json.Unmarshal(b, &r) == nil && r.Target != "" {
					targets = append(targets, r.Target)
				}
			}
		}
	}
	for _, t := range targets {
		f, err := n.kubeletRoot().Open(t, unix.O_PATH, 0)
		if err != nil {
			continue // gone, or no longer reachable without a link: nothing published there
		}
		mp, err := n.cfg.Mounter.MountPoint(mount.FdPath(f))
		own := false
		if err != nil {
			err = internalf("inspect %s: %v", t, err)
		} else if mp != nil {
			own, err = n.isVolumeMount(id, mount.FdPath(f), mp)
		}
		f.Close()
		if err != nil {
			return "", err
		}
		if own {
			return t, nil
		}
	}
	return "", nil
}
