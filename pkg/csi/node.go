package csi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/internal/atomicfile"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

// DefaultNodeInfoTimeout bounds NodeGetInfo when the caller's context has no deadline, so the
// call can never block forever on the cloud or the capacity reporter.
const DefaultNodeInfoTimeout = 30 * time.Second

// DefaultKubeletRoot is the kubelet's default --root-dir, the default of NodeConfig.KubeletRoot
// and --kubelet-root.
const DefaultKubeletRoot = "/var/lib/kubelet"

// stagedBlockFile is the file inside staging_target_path a block volume's loop device node is
// bind-mounted on at stage.
const stagedBlockFile = "block"

// stagedMarker is the file in a volume's state folder (<StateDir>/volumes/<id>/) naming the
// mount point that makes the volume staged on this node: with the mounts, which outlive the
// plugin, it lets StagedVolumes count correctly after a restart.
const stagedMarker = "staged"

// publishedDir is the folder in a volume's state folder that holds its publish records, one
// file per target_path (see publishRecord).
const publishedDir = "published"

// publishRecord is what the node keeps of one target_path it published a volume at, in
// <StateDir>/volumes/<id>/published/<hex SHA-256 of the path>: the path and whether this
// plugin created the file or directory there. NodeUnpublishVolume removes only what it
// created (CSI spec, NodeUnpublishVolumeRequest.target_path: "The SP MUST delete the file or
// directory it created at this path"), never a directory the CO or anyone else made. The
// record is written before the target is created, so a crash in between still knows.
type publishRecord struct {
	Target  string `json:"target"`
	Created bool   `json:"created"`
}

// NodeConfig is what NewNodeServer needs.
type NodeConfig struct {
	// NodeID is the cloud instance ID of this node (--node-id), reported as node_id.
	NodeID string
	// StateDir holds this node's state: each volume's staged marker in
	// <StateDir>/volumes/<volumeID>/ and the node identity, <StateDir>/node.json (see Zone).
	// Empty: nothing persists.
	StateDir string
	// DataDir holds each volume's data, the fake cloud's disk storage:
	// <DataDir>/<volumeID>/data (a folder, for mount volumes) or .../block.img (a sparse file
	// of the volume's size, for block volumes). Where every node of a cluster sees the same
	// folder, a volume's data follows it from node to node as a cloud disk's does. Empty:
	// <StateDir>/volumes, this node's own.
	DataDir string
	// KubeletRoot is the kubelet's root directory: the node stages and publishes only at
	// clean paths strictly inside it (checkNodePath). Empty: DefaultKubeletRoot.
	KubeletRoot string
	// Cloud is used once (until it succeeds) to learn the instance's zone, or to check the
	// zone persisted under StateDir (node.json, see NodeServer.Zone).
	Cloud NodeCloud
	// Mounter makes the bind mounts.
	Mounter mount.Mounter
	// Capacity answers max_volumes_per_node.
	Capacity CapacityReporter
	// TopologyReady, if not nil, is called once the zone is known (readiness).
	TopologyReady func()
}

// NodeServer is the CSI node service (CSI spec, "Node Service RPC"). A volume's data lives in
// a backing folder or sparse file under the state directory; NodeStageVolume bind-mounts the
// folder to staging_target_path, or attaches a loop device to the file and bind-mounts the
// device node into staging_target_path, and NodePublishVolume bind-mounts the staged volume to
// target_path. Every call is idempotent; unstaging or unpublishing what is not mounted is
// success.
type NodeServer struct {
	csi.UnimplementedNodeServer
	cfg      NodeConfig
	inflight *inflight

	// published maps a volume ID to the target paths this process published it at, to refuse
	// a second target for SINGLE_NODE_SINGLE_WRITER. It is not persisted: after a restart
	// only the CO's own ReadWriteOncePod enforcement remains for volumes published before.
	pubMu     sync.Mutex
	published map[string]map[string]bool

	// staged maps the ID of each volume staged here to its staged mount point; nil until
	// loaded from the markers under the state directory (StagedVolumes).
	stagedMu sync.Mutex
	staged   map[string]string

	// topoSem serialises the zone lookup while letting waiters give up with their ctx;
	// identityRead (guarded by it) is set once the persisted identity was looked at.
	topoSem      chan struct{}
	identityRead bool
	// topoMu guards the zone, whether it is known, where it came from (zoneSource*) and
	// whether the cloud has been compared with it (zoneChecked).
	topoMu      sync.Mutex
	zone        string
	zoneOK      bool
	zoneSource  string
	zoneChecked bool
}

var _ csi.NodeServer = (*NodeServer)(nil)

// NewNodeServer returns a node service; it does no I/O.
func NewNodeServer(cfg NodeConfig) *NodeServer {
	if cfg.TopologyReady == nil {
		cfg.TopologyReady = func() {}
	}
	if cfg.KubeletRoot == "" {
		cfg.KubeletRoot = DefaultKubeletRoot
	}
	return &NodeServer{cfg: cfg, inflight: newInflight(), topoSem: make(chan struct{}, 1), published: map[string]map[string]bool{}}
}

// Zone returns the node's zone, the accessible topology NodeGetInfo reports. It waits at most
// until ctx ends; errors are status errors.
//
// The first call takes the identity persisted in <StateDir>/node.json when it belongs to this
// node ID, without asking the cloud, so a restarted plugin answers NodeGetInfo (and turns
// ready) while the cloud is down; FetchTopology then checks it against the cloud in the
// background. Otherwise the zone comes from the cloud's instance (asked again after a failure,
// never after a success) and is persisted, atomically, for the next start; a failed write is
// logged, not returned. Once known the zone never changes for the life of the process, and a
// persisted zone is never replaced: the topology of a CSINode must not change (domain.md rule
// 4; the API server rejects the update). If the cloud later names a DIFFERENT zone than the
// persisted one, Zone keeps reporting the persisted zone and the mismatch is logged as an
// error; removing node.json (and re-registering the node) is the way to take the new zone.
func (n *NodeServer) Zone(ctx context.Context) (string, error) {
	if z, ok := n.knownZone(); ok {
		return z, nil
	}
	select {
	case n.topoSem <- struct{}{}:
	case <-ctx.Done():
		return "", status.FromContextError(ctx.Err()).Err()
	}
	defer func() { <-n.topoSem }()
	if z, ok := n.knownZone(); ok {
		return z, nil
	}
	logger := klog.FromContext(ctx)
	path := n.identityPath()
	if !n.identityRead && path != "" {
		n.identityRead = true
		id, ok, err := loadNodeIdentity(path)
		switch {
		case err != nil:
			logger.Error(err, "Ignoring the persisted node identity", "nodeID", n.cfg.NodeID, "path", path)
		case ok && id.NodeID != n.cfg.NodeID:
			logger.Info("Ignoring the persisted identity of another node", "nodeID", n.cfg.NodeID, "stateNodeID", id.NodeID, "path", path)
		case ok:
			n.setZone(id.Zone, zoneSourceStateDir, false)
			logger.Info("Node topology known", "nodeID", n.cfg.NodeID, "zone", id.Zone, "source", zoneSourceStateDir, "path", path)
			n.cfg.TopologyReady()
			return id.Zone, nil
		}
	}
	inst, err := n.cfg.Cloud.GetInstance(ctx, n.cfg.NodeID)
	if err != nil {
		return "", cloudStatus(opDefault, err, "get instance %s", n.cfg.NodeID)
	}
	n.setZone(inst.Zone, zoneSourceCloud, true)
	logger.Info("Node topology known", "nodeID", n.cfg.NodeID, "zone", inst.Zone, "source", zoneSourceCloud)
	if path != "" {
		if err := saveNodeIdentity(path, nodeIdentity{Version: 1, NodeID: n.cfg.NodeID, Zone: inst.Zone, SavedAt: time.Now().UTC()}); err != nil {
			logger.Error(err, "Cannot persist the node identity; a restart will need the cloud to answer NodeGetInfo", "nodeID", n.cfg.NodeID, "path", path)
		}
	}
	n.cfg.TopologyReady()
	return inst.Zone, nil
}

func (n *NodeServer) setZone(zone, source string, checked bool) {
	n.topoMu.Lock()
	defer n.topoMu.Unlock()
	n.zone, n.zoneOK, n.zoneSource, n.zoneChecked = zone, true, source, checked
}

func (n *NodeServer) knownZone() (string, bool) {
	n.topoMu.Lock()
	defer n.topoMu.Unlock()
	return n.zone, n.zoneOK
}

// checkZone compares a zone taken from the state dir with the cloud's, once the cloud
// answers; a zone from the cloud needs no check. A different zone is logged as an error and
// NOT adopted (see Zone). Errors: the cloud's, as status errors, when it could not be asked.
func (n *NodeServer) checkZone(ctx context.Context) error {
	n.topoMu.Lock()
	zone, checked := n.zone, n.zoneChecked
	n.topoMu.Unlock()
	if checked {
		return nil
	}
	inst, err := n.cfg.Cloud.GetInstance(ctx, n.cfg.NodeID)
	if err != nil {
		return cloudStatus(opDefault, err, "check zone of instance %s", n.cfg.NodeID)
	}
	n.topoMu.Lock()
	n.zoneChecked = true
	n.topoMu.Unlock()
	logger := klog.FromContext(ctx)
	if inst.Zone != zone {
		logger.Error(fmt.Errorf("the cloud says instance %s is in zone %q, the state dir says %q", n.cfg.NodeID, inst.Zone, zone),
			"Keeping the persisted zone: the CSINode topology cannot change; remove the node identity file and re-register the node to take the cloud's",
			"nodeID", n.cfg.NodeID, "zone", zone, "cloudZone", inst.Zone, "path", n.identityPath())
		return nil
	}
	logger.V(1).Info("Persisted node topology confirmed by the cloud", "nodeID", n.cfg.NodeID, "zone", zone)
	return nil
}

// FetchTopology calls Zone until it succeeds and, when the zone came from the state dir,
// checkZone until the cloud has answered, or until ctx ends; it backs off from 1s to 30s
// between tries. Driver.Run starts it so Probe turns ready without waiting for the first
// NodeGetInfo.
func (n *NodeServer) FetchTopology(ctx context.Context) {
	wait := time.Second
	for {
		_, err := n.Zone(ctx)
		if err == nil {
			err = n.checkZone(ctx)
		}
		if err == nil || ctx.Err() != nil {
			return
		}
		klog.FromContext(ctx).Error(err, "Cannot learn the node's zone from the cloud yet", "nodeID", n.cfg.NodeID, "retryIn", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, 30*time.Second)
	}
}

func (n *NodeServer) volumeDir(id string) string { return filepath.Join(n.cfg.StateDir, "volumes", id) }

// backingDir is the folder of a volume's data: under DataDir when set, else its state folder.
func (n *NodeServer) backingDir(id string) string {
	if n.cfg.DataDir != "" {
		return filepath.Join(n.cfg.DataDir, id)
	}
	return n.volumeDir(id)
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

// otherTarget returns a target other than target the volume is published at, or "".
func (n *NodeServer) otherTarget(id, target string) string {
	n.pubMu.Lock()
	defer n.pubMu.Unlock()
	for t := range n.published[id] {
		if t != target {
			return t
		}
	}
	return ""
}

func (n *NodeServer) setPublished(id, target string, on bool) {
	n.pubMu.Lock()
	defer n.pubMu.Unlock()
	if on {
		if n.published[id] == nil {
			n.published[id] = map[string]bool{}
		}
		n.published[id][target] = true
		return
	}
	delete(n.published[id], target)
	if len(n.published[id]) == 0 {
		delete(n.published, id)
	}
}

func (n *NodeServer) stagedMarkerPath(id string) string {
	return filepath.Join(n.volumeDir(id), stagedMarker)
}

// stagedAt returns the mount point volume id is staged at on this node (the staging path,
// or <staging>/block for a block volume), from the staged markers; ok is false when it is
// not staged here.
func (n *NodeServer) stagedAt(id string) (mp string, ok bool, err error) {
	n.stagedMu.Lock()
	defer n.stagedMu.Unlock()
	if err := n.loadStagedLocked(); err != nil {
		return "", false, err
	}
	mp, ok = n.staged[id]
	return mp, ok, nil
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

func (n *NodeServer) publishRecordPath(id, target string) string {
	sum := sha256.Sum256([]byte(target))
	return filepath.Join(n.volumeDir(id), publishedDir, hex.EncodeToString(sum[:]))
}

// loadPublishRecord returns the record of volume id at target; ok is false when there is
// none (nor any state dir). A record that cannot be parsed is logged and ignored: it was
// written atomically, so only a foreign hand makes one.
func (n *NodeServer) loadPublishRecord(ctx context.Context, id, target string) (publishRecord, bool, error) {
	if n.cfg.StateDir == "" {
		return publishRecord{}, false, nil
	}
	path := n.publishRecordPath(id, target)
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
	if n.cfg.StateDir == "" {
		return nil
	}
	path := n.publishRecordPath(id, r.Target)
	b, err := json.Marshal(r)
	if err == nil {
		if err = os.MkdirAll(filepath.Dir(path), 0o750); err == nil {
			err = atomicfile.WriteFile(path, append(b, '\n'), 0o640)
		}
	}
	if err != nil {
		return internalf("write publish record of %s: %v", id, err)
	}
	return nil
}

func (n *NodeServer) removePublishRecord(id, target string) error {
	if n.cfg.StateDir == "" {
		return nil
	}
	err := os.Remove(n.publishRecordPath(id, target))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return internalf("remove publish record of %s: %v", id, err)
	}
	_ = os.Remove(filepath.Dir(n.publishRecordPath(id, target))) // only when empty
	return nil
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

// StagedVolumes returns how many volumes are staged on this node now, the node's own count
// of this driver's volumes in use here (capacity.AttachedHereFunc: the live floor of the
// capacity policy). The first call reads the markers NodeStageVolume leaves under the state
// directory and keeps those whose mount still exists, so volumes staged before a restart
// count and ones whose mount went away (a reboot) do not; later calls are in memory.
// Errors: the state directory or a marker cannot be read (the count is then unknown).
func (n *NodeServer) StagedVolumes() (int, error) {
	n.stagedMu.Lock()
	defer n.stagedMu.Unlock()
	if err := n.loadStagedLocked(); err != nil {
		return 0, err
	}
	return len(n.staged), nil
}

func (n *NodeServer) loadStagedLocked() error {
	if n.staged != nil {
		return nil
	}
	dir := filepath.Join(n.cfg.StateDir, "volumes")
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("count staged volumes in %s: %w", dir, err)
	}
	staged := map[string]string{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		id := e.Name()
		b, err := os.ReadFile(n.stagedMarkerPath(id))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("count staged volumes: %w", err)
		}
		mp, err := n.cfg.Mounter.MountPoint(string(b))
		if err != nil {
			return fmt.Errorf("count staged volumes: inspect %s: %w", b, err)
		}
		if mp == nil {
			// Unstaged by a crash or a reboot after the marker was written: not staged.
			_ = os.Remove(n.stagedMarkerPath(id))
			continue
		}
		staged[id] = string(b)
	}
	n.staged = staged
	return nil
}

// setStaged records that volume id is staged at mount point mp (or no longer, mp == "").
// A marker that cannot be written or removed is logged, not returned: the mount is what
// counts, and a count that errs low only holds new pods back while the cloud is unreadable.
func (n *NodeServer) setStaged(ctx context.Context, id, mp string) {
	n.stagedMu.Lock()
	defer n.stagedMu.Unlock()
	path := n.stagedMarkerPath(id)
	var err error
	if mp != "" {
		// The state folder is this node's even when the data lives in a shared DataDir.
		if err = os.MkdirAll(filepath.Dir(path), 0o750); err == nil {
			err = os.WriteFile(path, []byte(mp), 0o640)
		}
	} else if err = os.Remove(path); errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot update the staged marker", "volumeID", id)
	}
	if n.staged == nil {
		return // the markers are read on the first StagedVolumes
	}
	if mp != "" {
		n.staged[id] = mp
	} else {
		delete(n.staged, id)
	}
}

func (n *NodeServer) lock(key string) (func(), error) {
	if !n.inflight.tryAcquire(key) {
		return nil, aborted(key)
	}
	return func() { n.inflight.release(key) }, nil
}

// NodeStageVolume makes the volume's backing data visible at staging_target_path: a
// read-write bind mount of the backing folder (mount), or, for block, a loop device attached
// to the backing file (sized from volume_context["sizeBytes"], see stageSize) and
// bind-mounted onto the file <staging_target_path>/block. The block volume is thus a real
// block device node wherever it is mounted, which the kubelet requires: it maps and unmaps a
// block volume's paths only when they are device nodes (volumepathhandler), and a plain file
// bind mount left pods that could never be deleted. Staging what is already staged is
// success, also after a plugin restart (the loop is found again, not attached twice). A
// failed stage may leave the loop attached: the retry reuses it, NodeUnstageVolume detaches.
func (n *NodeServer) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	if err := validateNodeStageVolumeRequest(req, n.cfg.KubeletRoot); err != nil {
		return nil, err
	}
	id, staging := req.GetVolumeId(), req.GetStagingTargetPath()
	isBlock := req.GetVolumeCapability().GetBlock() != nil
	var size int64
	if isBlock {
		var err error
		if size, err = stageSize(req.GetVolumeContext()); err != nil {
			return nil, err
		}
	}
	unlock, err := n.lock(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return nil, internalf("create staging path %s: %v", staging, err)
	}
	if isBlock {
		if _, err := ensureBackingFile(n.blockFile(id), size); err != nil {
			return nil, err
		}
		lp, err := n.cfg.Mounter.AttachLoop(n.blockFile(id))
		if err != nil {
			return nil, internalf("loop device for volume %s: %v", id, err)
		}
		target := filepath.Join(staging, stagedBlockFile)
		if err := ensureFile(target); err != nil {
			return nil, internalf("create %s: %v", target, err)
		}
		if err := n.bindOnce(ctx, lp.Path, target, false, lp.Device); err != nil {
			return nil, err
		}
		n.setStaged(ctx, id, target)
		klog.FromContext(ctx).V(2).Info("Volume staged", "volumeID", id, "stagingTargetPath", staging, "device", lp.Path)
		return &csi.NodeStageVolumeResponse{}, nil
	}
	if err := os.MkdirAll(n.dataDir(id), 0o750); err != nil {
		return nil, internalf("backing folder of %s: %v", id, err)
	}
	if err := n.bindOnce(ctx, n.dataDir(id), staging, false, ""); err != nil {
		return nil, err
	}
	n.setStaged(ctx, id, staging)
	klog.FromContext(ctx).V(2).Info("Volume staged", "volumeID", id, "stagingTargetPath", staging)
	return &csi.NodeStageVolumeResponse{}, nil
}

// NodeUnstageVolume undoes NodeStageVolume: unmounts, and detaches the loop device of a block
// volume (found by its backing file, so also when the plugin restarted since the stage; the
// kernel finishes the detach when the last user closes the device). Nothing staged is
// success. The backing data stays.
func (n *NodeServer) NodeUnstageVolume(ctx context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	if err := validateNodeUnstageVolumeRequest(req, n.cfg.KubeletRoot); err != nil {
		return nil, err
	}
	id, staging := req.GetVolumeId(), req.GetStagingTargetPath()
	unlock, err := n.lock(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	blockTarget := filepath.Join(staging, stagedBlockFile)
	if _, err := n.unmountAll(blockTarget); err != nil {
		return nil, err
	}
	if err := os.Remove(blockTarget); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, internalf("remove %s: %v", blockTarget, err)
	}
	if _, err := n.unmountAll(staging); err != nil {
		return nil, err
	}
	if err := n.cfg.Mounter.DetachLoop(n.blockFile(id)); err != nil {
		return nil, internalf("volume %s: %v", id, err)
	}
	n.setStaged(ctx, id, "")
	klog.FromContext(ctx).V(2).Info("Volume unstaged", "volumeID", id, "stagingTargetPath", staging)
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// NodePublishVolume bind-mounts the staged volume at target_path (a directory for mount; for
// block, a file it creates, onto which the staged loop device node is bound), read-only when
// readonly is set or the access mode is SINGLE_NODE_READER_ONLY. For block a read-only mount
// does not stop writes through the device node (the kernel checks mount flags for regular
// files only); the kubelet enforces it with the container's device permission ("r"). A volume
// that was not staged (for block: not as a device), or a SINGLE_NODE_SINGLE_WRITER volume
// already published at another target, is FAILED_PRECONDITION; publishing again with the same
// settings is success, with other read-only settings ALREADY_EXISTS.
func (n *NodeServer) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if err := validateNodePublishVolumeRequest(req, n.cfg.KubeletRoot); err != nil {
		return nil, err
	}
	id, staging, target := req.GetVolumeId(), req.GetStagingTargetPath(), req.GetTargetPath()
	unlock, err := n.lock(id + "\x00" + target)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if req.GetVolumeCapability().GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER {
		if other := n.otherTarget(id, target); other != "" {
			return nil, status.Errorf(codes.FailedPrecondition, "single-writer volume %s is already published at %s", id, other)
		}
	}
	ro := isReadOnly(req.GetVolumeCapability(), req.GetReadonly())
	isBlock := req.GetVolumeCapability().GetBlock() != nil
	source := staging
	if isBlock {
		source = filepath.Join(staging, stagedBlockFile)
	}
	mp, err := n.cfg.Mounter.MountPoint(source)
	if err != nil {
		return nil, internalf("inspect %s: %v", source, err)
	}
	if mp == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged at %s", id, staging)
	}
	if isBlock && mp.Device == "" {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is staged at %s as a plain file, not a block device: unstage and stage it again", id, staging)
	}
	if err := n.prepareTarget(ctx, id, target, isBlock, mp); err != nil {
		return nil, err
	}
	// For block the target becomes a bind mount of the staged loop device node.
	if err := n.bindOnce(ctx, source, target, ro, mp.Device); err != nil {
		return nil, err
	}
	n.setPublished(id, target, true)
	klog.FromContext(ctx).V(2).Info("Volume published", "volumeID", id, "targetPath", target, "readOnly", ro)
	return &csi.NodePublishVolumeResponse{}, nil
}

// prepareTarget makes target_path ready for the bind mount of the staged mount staged, and
// records (publishRecord) whether it created it. A missing target is created (a directory
// for mount, an empty file for block; missing parents too, though the CO makes the parent,
// CSI spec). An existing target must be what the publish would create, empty, or already a
// mount of this volume (a retry); anything else is FAILED_PRECONDITION: the request is
// well-formed (not INVALID_ARGUMENT), the node's state at that path is what stops it, and
// the CO may retry once it is cleared. A block target with another mount is left to bindOnce,
// which replaces a stale one.
func (n *NodeServer) prepareTarget(ctx context.Context, id, target string, isBlock bool, staged *mount.MountPoint) error {
	rec, hasRec, err := n.loadPublishRecord(ctx, id, target)
	if err != nil {
		return err
	}
	fi, err := os.Lstat(target)
	if errors.Is(err, os.ErrNotExist) {
		if !hasRec || !rec.Created {
			if err := n.savePublishRecord(id, publishRecord{Target: target, Created: true}); err != nil {
				return err
			}
		}
		if isBlock {
			err = ensureFile(target)
		} else {
			err = os.MkdirAll(target, 0o750)
		}
		if err != nil {
			return internalf("create target %s: %v", target, err)
		}
		return nil
	}
	if err != nil {
		return internalf("inspect target %s: %v", target, err)
	}
	mp, err := n.cfg.Mounter.MountPoint(target)
	if err != nil {
		return internalf("inspect %s: %v", target, err)
	}
	if mp != nil {
		if !isBlock && !sameVolumeMount(staged, mp) {
			return status.Errorf(codes.FailedPrecondition, "target_path %s holds another mount (root %s of %s), not volume %s", target, mp.Root, mp.Source, id)
		}
		return nil
	}
	why, err := targetProblem(target, fi, isBlock)
	if err != nil {
		return internalf("inspect target %s: %v", target, err)
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

// NodeUnpublishVolume unmounts whatever is mounted at target_path and removes the target
// when this plugin created it (its publishRecord says so) and it is an empty directory or
// empty file, as the publish left it. A target without a record (published by a driver
// before publish records) is removed, under the same emptiness rule, only when this call
// unmounted something there. What is not removed stays untouched and the call succeeds, so it
// is idempotent: nothing mounted and nothing recorded is success.
func (n *NodeServer) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if err := validateNodeUnpublishVolumeRequest(req, n.cfg.KubeletRoot); err != nil {
		return nil, err
	}
	id, target := req.GetVolumeId(), req.GetTargetPath()
	unlock, err := n.lock(id + "\x00" + target)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rec, hasRec, err := n.loadPublishRecord(ctx, id, target)
	if err != nil {
		return nil, err
	}
	unmounted, err := n.unmountAll(target)
	if err != nil {
		return nil, err
	}
	if (hasRec && rec.Created) || (!hasRec && unmounted) {
		kept, err := removeTarget(target)
		if err != nil {
			return nil, internalf("remove %s: %v", target, err)
		}
		if kept != "" {
			klog.FromContext(ctx).Info("Leaving the target in place: it is not what the publish created", "volumeID", id, "targetPath", target, "found", kept)
		}
	}
	if err := n.removePublishRecord(id, target); err != nil {
		return nil, err
	}
	n.setPublished(id, target, false)
	klog.FromContext(ctx).V(2).Info("Volume unpublished", "volumeID", id, "targetPath", target)
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// NodeGetVolumeStats reports usage of a mounted volume path: bytes and inodes of the backing
// file system (statfs) for a directory; for a block volume only the total bytes, the size of
// the device (CSI spec: used and available are unknown for block). It answers only for a
// volume_id staged on this node and a volume_path inside the kubelet root where that volume
// is mounted (its staging mount, a publish, or the kubelet's own bind of a published block
// device: sameVolumeMount); anything else is NOT_FOUND (CSI spec, NodeGetVolumeStats errors).
func (n *NodeServer) NodeGetVolumeStats(ctx context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	if err := validateNodeGetVolumeStatsRequest(req); err != nil {
		return nil, err
	}
	id, p := req.GetVolumeId(), req.GetVolumePath()
	if why := pathInside(p, n.cfg.KubeletRoot); why != "" {
		return nil, status.Errorf(codes.NotFound, "volume_path %s %s: no volume of this node is there", cloud.Quote(p), why)
	}
	staged, ok, err := n.stagedAt(id)
	if err != nil {
		return nil, internalf("volume %s: %v", id, err)
	}
	if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %s is not staged on this node", cloud.Quote(id))
	}
	smp, err := n.cfg.Mounter.MountPoint(staged)
	if err != nil {
		return nil, internalf("inspect %s: %v", staged, err)
	}
	mp, err := n.cfg.Mounter.MountPoint(p)
	if err != nil {
		return nil, internalf("inspect %s: %v", p, err)
	}
	if smp == nil || mp == nil || !sameVolumeMount(smp, mp) {
		return nil, status.Errorf(codes.NotFound, "volume %s is not mounted at %s", id, p)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "stat %s: %v", p, err)
	}
	if !fi.IsDir() {
		size, err := n.cfg.Mounter.BlockSize(p)
		if err != nil {
			return nil, internalf("volume %s: %v", req.GetVolumeId(), err)
		}
		return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
			{Unit: csi.VolumeUsage_BYTES, Total: size},
		}}, nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return nil, internalf("statfs %s: %v", p, err)
	}
	bsize := st.Bsize
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: int64(st.Blocks) * bsize, Available: int64(st.Bavail) * bsize,
			Used: int64(st.Blocks-st.Bfree) * bsize},
		{Unit: csi.VolumeUsage_INODES, Total: int64(st.Files), Available: int64(st.Ffree), Used: int64(st.Files - st.Ffree)},
	}}, nil
}

// NodeExpandVolume grows a block volume's backing file to capacity_range.required_bytes
// rounded up to whole GiB and makes its loop device follow (LOOP_SET_CAPACITY), answering the
// device's new size; a mount volume's folder has no size to grow, so only the answer changes.
// volume_path must be mounted (NOT_FOUND otherwise); more than MaxVolumeSize is OUT_OF_RANGE.
func (n *NodeServer) NodeExpandVolume(ctx context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	if err := validateNodeExpandVolumeRequest(req); err != nil {
		return nil, err
	}
	id, p := req.GetVolumeId(), req.GetVolumePath()
	unlock, err := n.lock(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if !filepath.IsAbs(p) {
		return nil, status.Errorf(codes.NotFound, "%s is not a mounted volume", p)
	}
	mp, err := n.cfg.Mounter.MountPoint(p)
	if err != nil {
		return nil, internalf("inspect %s: %v", p, err)
	}
	if mp == nil {
		return nil, status.Errorf(codes.NotFound, "%s is not a mounted volume", p)
	}
	if r := req.GetCapacityRange().GetRequiredBytes(); r > MaxVolumeSize {
		return nil, status.Errorf(codes.OutOfRange, "%d bytes exceeds the maximum volume size %d", r, MaxVolumeSize)
	}
	want := roundUpGiB(req.GetCapacityRange().GetRequiredBytes())
	isBlock := req.GetVolumeCapability().GetBlock() != nil
	if req.GetVolumeCapability() == nil {
		fi, err := os.Stat(p)
		isBlock = err == nil && !fi.IsDir()
	}
	if !isBlock {
		return &csi.NodeExpandVolumeResponse{CapacityBytes: want}, nil
	}
	size, err := ensureBackingFile(n.blockFile(id), want)
	if err != nil {
		return nil, err
	}
	switch dev, err := n.cfg.Mounter.ResizeLoop(n.blockFile(id)); {
	case errors.Is(err, mount.ErrNoLoop):
		// Mounted but no loop: staged by an older driver as a plain file, which has grown.
	case err != nil:
		return nil, internalf("volume %s: %v", id, err)
	default:
		size = dev
	}
	klog.FromContext(ctx).V(2).Info("Volume expanded on node", "volumeID", id, "sizeBytes", size)
	return &csi.NodeExpandVolumeResponse{CapacityBytes: size}, nil
}

// NodeGetCapabilities advertises exactly what this service implements.
func (n *NodeServer) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	var caps []*csi.NodeServiceCapability
	for _, t := range []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		csi.NodeServiceCapability_RPC_EXPAND_VOLUME,
		csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
	} {
		caps = append(caps, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{
			Rpc: &csi.NodeServiceCapability_RPC{Type: t},
		}})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

// NodeGetInfo reports node_id (= the cloud instance ID), the zone as accessible_topology
// (fixed once known; from the state dir when a previous process persisted it, so a restart
// answers while the cloud is down; see Zone) and max_volumes_per_node from the capacity
// reporter: the total slots this driver may use here, never 0 (0 means unlimited; KEP-4876,
// domain.md rules 2 and 3). Bounded by ctx, or by DefaultNodeInfoTimeout without a deadline;
// when the zone or the capacity cannot be had in time the call fails (UNAVAILABLE,
// DEADLINE_EXCEEDED, ...) rather than guess.
func (n *NodeServer) NodeGetInfo(ctx context.Context, _ *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultNodeInfoTimeout)
		defer cancel()
	}
	zone, err := n.Zone(ctx)
	if err != nil {
		return nil, err
	}
	slots, err := n.cfg.Capacity.MaxVolumesPerNode(ctx)
	if err != nil {
		return nil, cloudStatus(opDefault, err, "node capacity of %s", n.cfg.NodeID)
	}
	if slots < 1 {
		// A reporter bug must not turn into "unlimited".
		klog.FromContext(ctx).Error(fmt.Errorf("capacity reporter returned %d", slots), "Reporting 1 instead", "nodeID", n.cfg.NodeID)
		slots = 1
	}
	return &csi.NodeGetInfoResponse{
		NodeId:             n.cfg.NodeID,
		MaxVolumesPerNode:  slots,
		AccessibleTopology: &csi.Topology{Segments: map[string]string{TopologyZoneKey: zone}},
	}, nil
}
