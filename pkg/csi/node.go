package csi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/nodestate"
)

// DefaultNodeInfoTimeout bounds NodeGetInfo when the caller's context has no deadline, so the
// call can never block forever on the cloud or the capacity reporter.
const DefaultNodeInfoTimeout = 30 * time.Second

// DefaultKubeletRoot is the kubelet's default --root-dir, the default of NodeConfig.KubeletRoot
// and --kubelet-root.
const DefaultKubeletRoot = "/var/lib/kubelet"

// NodeConfig is what NewNodeServer needs.
type NodeConfig struct {
	// NodeID is the cloud instance ID of this node (--node-id), reported as node_id.
	NodeID string
	// StateDir holds this node's state (package nodestate has the layout). Empty: nothing
	// persists. Ignored when State is set.
	StateDir string
	// State is the owner of the state directory's paths and writes; the zero value means
	// nodestate.NewDir(StateDir).
	State nodestate.Dir
	// DataDir holds each volume's data, the fake cloud's disk storage:
	// <DataDir>/<volumeID>/data (a folder, for mount volumes) or .../block.img (a sparse file
	// of the volume's size, for block volumes). Where every node of a cluster sees the same
	// folder, a volume's data follows it from node to node as a cloud disk's does. Empty:
	// <StateDir>/volumes, this node's own.
	DataDir string
	// KubeletRoot is the kubelet's root directory: the node stages and publishes only at
	// clean paths strictly inside it (checkNodePath), reached without following any link
	// below it (mount.Root; a link there is FAILED_PRECONDITION). Empty: DefaultKubeletRoot.
	KubeletRoot string
	// Cloud is used once (until it succeeds) to learn the instance's zone, or to check the
	// zone persisted in the state dir (see Topology; not for that when Topology is set), and
	// by NodeGetVolumeHealth for the cloud's volume health. Required.
	Cloud NodeCloud
	// Mounter makes the bind mounts.
	Mounter mount.Mounter
	// Capacity answers max_volumes_per_node.
	Capacity CapacityReporter
	// Staged is the staged-volume tracker the node service writes; the capacity reporter
	// reads the same one. nil: a tracker of its own on State and Mounter (tests).
	Staged *nodestate.Staged
	// Topology is the node's identity. nil: one of its own on NodeID, State and Cloud,
	// calling TopologyReady.
	Topology *Topology
	// TopologyReady, if not nil, is called once the zone is known (readiness). Ignored when
	// Topology is set.
	TopologyReady func()
}

// NodeServer is the CSI node service (CSI spec, "Node Service RPC"). A volume's data lives in
// a backing folder or sparse file under the state directory; NodeStageVolume bind-mounts the
// folder to staging_target_path, or attaches a loop device to the file and bind-mounts the
// device node into staging_target_path, and NodePublishVolume bind-mounts the staged volume to
// target_path. Every call is idempotent; unstaging or unpublishing what is not mounted is
// success. The state it shares lives in its own types: the staged volumes
// (nodestate.Staged), the node's identity (Topology), the targets published by this process
// (publishedTargets), the state directory's files (nodestate.Dir).
type NodeServer struct {
	csi.UnimplementedNodeServer
	cfg       NodeConfig
	dir       nodestate.Dir
	staged    *nodestate.Staged
	topo      *Topology
	published *publishedTargets
	inflight  *inflight
	// cached is cfg.Capacity when it answers from memory (NodeGetInfo's fast path), else nil.
	cached cachedCapacity
}

var _ csi.NodeServer = (*NodeServer)(nil)

// NewNodeServer returns a node service; it does no I/O.
func NewNodeServer(cfg NodeConfig) *NodeServer {
	if cfg.KubeletRoot == "" {
		cfg.KubeletRoot = DefaultKubeletRoot
	}
	dir := cfg.State
	if !dir.Enabled() {
		dir = nodestate.NewDir(cfg.StateDir)
	}
	cfg.StateDir = dir.Root()
	staged := cfg.Staged
	if staged == nil {
		staged = nodestate.NewStaged(dir, cfg.Mounter)
	}
	topo := cfg.Topology
	if topo == nil {
		topo = NewTopology(cfg.NodeID, dir, cfg.Cloud, cfg.TopologyReady)
	}
	cached, _ := cfg.Capacity.(cachedCapacity)
	return &NodeServer{cfg: cfg, dir: dir, staged: staged, topo: topo, published: newPublishedTargets(), inflight: newInflight(),
		cached: cached}
}

// NodeStageVolume makes the volume's backing data visible at staging_target_path: a
// read-write bind mount of the backing folder (mount), or, for block, a loop device attached
// to the backing file (sized from volume_context["sizeBytes"], see stageSize) and
// bind-mounted onto the file <staging_target_path>/block. The block volume is thus a real
// block device node wherever it is mounted, which the kubelet requires: it maps and unmaps a
// block volume's paths only when they are device nodes (volumepathhandler), and a plain file
// bind mount left pods that could never be deleted. Staging what is already staged is
// success, also after a plugin restart (the loop is found again, not attached twice). A
// failed stage leaves no loop device it attached (<staging>/block is checked first, and the
// device is detached when the bind fails); one attached before stays for its stage.
//
// No link below the kubelet root or the data folder is followed (a link there, or a staging
// path that is a file, is FAILED_PRECONDITION); a mount volume is not staged over a folder
// that is not empty (FAILED_PRECONDITION, as NodePublishVolume); the block backing file is
// opened O_NOFOLLOW and must be a regular file. A volume is staged at one path only: staged
// at another path already is FAILED_PRECONDITION (CSI spec, NodeStageVolume errors), with
// the other access type at this path ALREADY_EXISTS; a path where another volume is recorded
// as staged, or that holds a mount which is not this volume's own, is FAILED_PRECONDITION
// (checkStageTarget), and the stage records the access type (nodestate.Stage). A clone or restore source in volume_context
// must be what the cloud's record of the volume names (checkSources: INVALID_ARGUMENT,
// NOT_FOUND, UNAVAILABLE), checked before any data is copied.
func (n *NodeServer) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	st, err := n.stageRequestFrom(req)
	if err != nil {
		return nil, err
	}
	unlock, err := n.lock(st.id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := n.checkStagePlace(ctx, st); err != nil {
		return nil, err
	}
	if err := n.seedSources(ctx, st); err != nil {
		return nil, err
	}
	sd, err := n.kubeletRoot().MkdirAll(st.staging, 0o750)
	if err != nil {
		return nil, pathStatus("staging_target_path", st.staging, err)
	}
	sd.Close()
	if st.block {
		err = n.stageBlock(ctx, st.id, st.staging, st.size)
	} else {
		err = n.stageMount(ctx, st.id, st.staging)
	}
	if err != nil {
		return nil, err
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

// stageRequest is what NodeStageVolume acts on, read from a request that passed every
// INVALID_ARGUMENT check: the volume, its staging path, the access type, the block size in
// bytes (0 for a mount volume) and the clone or restore source named in volume_context ("" when
// none).
type stageRequest struct {
	id, staging string
	block       bool
	size        int64
	cloneSrc    string
	snapshot    string
}

// stageRequestFrom validates a NodeStageVolume request and reads what the stage acts on:
// INVALID_ARGUMENT first (validateNodeStageVolumeRequest, stageSize, cloneSource,
// restoreSource), then NOT_FOUND for an ID the cloud never makes (checkCloudVolumeShape).
// It touches nothing on the node.
func (n *NodeServer) stageRequestFrom(req *csi.NodeStageVolumeRequest) (stageRequest, error) {
	if err := validateNodeStageVolumeRequest(req, n.cfg.KubeletRoot); err != nil {
		return stageRequest{}, err
	}
	st := stageRequest{
		id:      req.GetVolumeId(),
		staging: req.GetStagingTargetPath(),
		block:   req.GetVolumeCapability().GetBlock() != nil,
	}
	var err error
	if st.block {
		if st.size, err = stageSize(req.GetVolumeContext()); err != nil {
			return stageRequest{}, err
		}
	}
	if st.cloneSrc, err = cloneSource(st.id, req.GetVolumeContext()); err != nil {
		return stageRequest{}, err
	}
	if st.snapshot, err = restoreSource(req.GetVolumeContext()); err != nil {
		return stageRequest{}, err
	}
	// After every INVALID_ARGUMENT check: an ID the cloud never makes is no volume.
	if err := checkCloudVolumeShape(st.id); err != nil {
		return stageRequest{}, err
	}
	return st, nil
}

// checkStagePlace checks where the volume goes before any data is touched, in this order: a
// link below the kubelet root is refused, and so is a staging path that is not a folder
// (FAILED_PRECONDITION, pathStatus); the path must be free for this volume and access type
// (checkStageTarget); a clone or restore source must be what the cloud's record names
// (checkSources). The caller holds the volume's lock.
func (n *NodeServer) checkStagePlace(ctx context.Context, st stageRequest) error {
	if err := n.kubeletRoot().Check(st.staging); err != nil {
		return pathStatus("staging_target_path", st.staging, err)
	}
	if err := n.checkStageTarget(st.id, st.staging, st.block); err != nil {
		return err
	}
	return n.checkSources(ctx, st.id, st.cloneSrc, st.snapshot)
}

// seedSources copies a clone's or a snapshot's data into the volume's backing data, once
// checkStagePlace accepted the sources; a request that names none copies nothing.
func (n *NodeServer) seedSources(ctx context.Context, st stageRequest) error {
	if st.cloneSrc != "" {
		if err := n.seedClone(ctx, st.id, st.cloneSrc); err != nil {
			return err
		}
	}
	if st.snapshot != "" {
		if err := n.seedRestore(ctx, st.id, st.snapshot); err != nil {
			return err
		}
	}
	return nil
}

// stageBlock stages a block volume of size bytes at the folder staging (created by the
// caller, below the kubelet root): a loop device on the backing file (opened O_NOFOLLOW)
// bind-mounted onto <staging>/block. <staging>/block is checked before a loop device is
// attached, and a device this call attached is detached again when the stage fails after
// all: a refused stage leaves no device behind for the next attach to miss. It returns a
// gRPC status error.
func (n *NodeServer) stageBlock(ctx context.Context, id, staging string, size int64) error {
	bf, _, err := n.openBackingFile(id, size, true)
	if err != nil {
		return err
	}
	defer bf.Close()
	target := filepath.Join(staging, stagedBlockFile)
	if err := n.ensureStagedBlockFile(target); err != nil {
		return err
	}
	_, had, err := n.cfg.Mounter.FindLoop(n.blockFile(id))
	if err != nil {
		return internalf("loop device for volume %s: %v", id, err)
	}
	lp, err := n.cfg.Mounter.AttachLoopFile(n.blockFile(id), bf)
	if errors.Is(err, mount.ErrSymlink) {
		return dataStatus(id, err)
	}
	if err != nil {
		return internalf("loop device for volume %s: %v", id, err)
	}
	if err := n.bindOnce(ctx, id, "staging_target_path", lp.Path, target, false, lp.Device); err != nil {
		if !had {
			if derr := n.cfg.Mounter.DetachLoop(n.blockFile(id)); derr != nil {
				klog.FromContext(ctx).Error(derr, "Detaching the loop device of a failed stage", "volumeID", id, "device", lp.Path)
			}
		}
		return err
	}
	n.staged.Set(ctx, id, nodestate.Stage{Path: target, Block: true})
	klog.FromContext(ctx).V(2).Info("Volume staged", "volumeID", id, "stagingTargetPath", staging, "device", lp.Path)
	return nil
}

// stageMount stages a mount volume at the folder staging (created by the caller, below the
// kubelet root): a read-write bind mount of its data folder, created below the data root
// without following a link. A staging folder that is not empty and not yet mounted is
// FAILED_PRECONDITION, as for a publish target. It returns a gRPC status error.
func (n *NodeServer) stageMount(ctx context.Context, id, staging string) error {
	mp, err := n.mountAt("staging_target_path", staging)
	if err != nil {
		return err
	}
	if mp == nil {
		// Like a publish target: a mount would hide what is there.
		if err := n.checkStageFolderFree(staging); err != nil {
			return err
		}
	}
	droot, err := n.readyDataRoot()
	if err != nil {
		return err
	}
	data, err := droot.MkdirAll(n.dataDir(id), 0o750)
	if err != nil {
		return dataStatus(id, err)
	}
	defer data.Close()
	if err := n.bindOnce(ctx, id, "staging_target_path", mount.FdPath(data), staging, false, ""); err != nil {
		return err
	}
	n.staged.Set(ctx, id, nodestate.Stage{Path: staging})
	klog.FromContext(ctx).V(2).Info("Volume staged", "volumeID", id, "stagingTargetPath", staging)
	return nil
}

// checkStageFolderFree refuses a staging folder a mount would hide something in
// (targetProblem: FAILED_PRECONDITION), read below the kubelet root without following a link.
func (n *NodeServer) checkStageFolderFree(staging string) error {
	st, err := n.kubeletRoot().Lstat(staging)
	if err != nil {
		return pathStatus("staging_target_path", staging, err)
	}
	why, err := n.targetProblem(staging, st, false)
	if err != nil {
		return pathStatus("staging_target_path", staging, err)
	}
	if why != "" {
		return status.Errorf(codes.FailedPrecondition, "staging_target_path %s %s", staging, why)
	}
	return nil
}

// ensureStagedBlockFile creates <staging_target_path>/block, the empty file a block volume's
// loop device node is bound on, below the kubelet root without following a link. An existing
// one must be a mount point (a retry; bindOnce checks the device) or an empty regular file.
func (n *NodeServer) ensureStagedBlockFile(target string) error {
	f, err := n.kubeletRoot().CreateFile(target, 0o640)
	if err != nil {
		return pathStatus("staging_target_path", target, err)
	}
	defer f.Close()
	mp, err := n.cfg.Mounter.MountPoint(mount.FdPath(f))
	if err != nil {
		return internalf("inspect %s: %v", target, err)
	}
	if mp != nil {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return internalf("inspect %s: %v", target, err)
	}
	why, err := n.targetProblem(target, st, true)
	if err != nil {
		return pathStatus("staging_target_path", target, err)
	}
	if why != "" {
		return status.Errorf(codes.FailedPrecondition, "%s %s", target, why)
	}
	return nil
}

// NodeUnstageVolume undoes NodeStageVolume: unmounts, and detaches the loop device of a block
// volume (found by its backing file, so also when the plugin restarted since the stage; the
// kernel finishes the detach when the last user closes the device). Nothing staged is
// success. The backing data stays. It acts only on this volume's stage at this path: when
// the volume is recorded as staged elsewhere (nodestate.Staged), or another volume is staged
// at this path, it touches nothing and succeeds, so a wrong path never detaches a loop device
// in use. Without a stage record it undoes only a mount that is provably this volume's (its
// data folder at the path, or its loop device or backing file at <path>/block:
// unrecordedStage); anything else (another volume's stage or publish, a folder inside a
// mount) is left untouched and the call succeeds. <path>/block is touched only for a block
// stage (the record's access type), and removed only when it is the empty regular file the
// stage created: for a mount volume it is the pod's data. While the volume is still
// published (publishedAt: a target it was published at still holds its mount) the call is
// FAILED_PRECONDITION and nothing is unmounted or detached (CSI spec: the CO unpublishes
// first); so is a volume with more than maxPublishRecords publish records, of which the node
// cannot tell. A link below the kubelet root is FAILED_PRECONDITION, nothing unmounted.
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
	if err := n.kubeletRoot().Check(staging); err != nil {
		return nil, pathStatus("staging_target_path", staging, err)
	}
	blockTarget := filepath.Join(staging, stagedBlockFile)
	rec, isStaged, err := n.staged.Get(id)
	if err != nil {
		return nil, internalf("volume %s: %v", id, err)
	}
	log := klog.FromContext(ctx)
	if isStaged && rec.StagingPath() != staging {
		// The volume is staged elsewhere: nothing of it is at this path, and its loop device
		// and mounts serve that stage.
		log.Info("Volume is not staged at this path; nothing to unstage here", "volumeID", id, "stagingTargetPath", staging, "stagedAt", rec.Path)
		return &csi.NodeUnstageVolumeResponse{}, nil
	}
	isBlock := rec.Block
	if !isStaged {
		// Not staged by this plugin (no record): what is mounted here may be another
		// volume's, or a pod's data. Only a mount that is provably this volume's is undone.
		for _, p := range []string{staging, blockTarget} {
			if other, ok, err := n.staged.Owner(p); err != nil {
				return nil, internalf("volume %s: %v", id, err)
			} else if ok && other != id {
				log.Info("Another volume is staged at this path; nothing of this volume to unstage here", "volumeID", id, "stagingTargetPath", staging, "stagedVolumeID", other)
				return &csi.NodeUnstageVolumeResponse{}, nil
			}
		}
		owned, blk, err := n.unrecordedStage(id, staging)
		if err != nil {
			return nil, err
		}
		if !owned {
			log.Info("Nothing of this volume is mounted at this path; nothing to unstage here", "volumeID", id, "stagingTargetPath", staging)
			return &csi.NodeUnstageVolumeResponse{}, nil
		}
		isBlock = blk
	}
	// CSI spec, NodeUnstageVolume errors: "Volume published to target paths" is
	// FAILED_PRECONDITION. A loop device detached under a publish would hand its number,
	// and so the pod's device, to the next volume staged.
	if at, err := n.publishedAt(id); err != nil {
		return nil, err
	} else if at != "" {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is still published at %s: unpublish it before unstaging", id, at)
	}
	if isBlock {
		// Only a block stage has <staging>/block of the plugin's own: for a mount volume that
		// name is the pod's data, never touched.
		if _, err := n.unmountAll("staging_target_path", blockTarget); err != nil {
			return nil, err
		}
		kept, err := n.removeStagedBlockFile(blockTarget)
		if err != nil {
			return nil, pathStatus("staging_target_path", blockTarget, err)
		}
		if kept != "" {
			log.Info("Leaving the staged block file in place: it is not the empty file the stage created", "volumeID", id, "path", blockTarget, "found", kept)
		}
		if err := n.cfg.Mounter.DetachLoop(n.blockFile(id)); err != nil {
			return nil, internalf("volume %s: %v", id, err)
		}
	} else if _, err := n.unmountAll("staging_target_path", staging); err != nil {
		return nil, err
	}
	n.staged.Set(ctx, id, nodestate.Stage{})
	klog.FromContext(ctx).V(2).Info("Volume unstaged", "volumeID", id, "stagingTargetPath", staging)
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// NodePublishVolume bind-mounts the staged volume at target_path (a directory for mount; for
// block, a file it creates, onto which the staged loop device node is bound), read-only when
// readonly is set, the access mode is SINGLE_NODE_READER_ONLY, or the cloud attached the
// volume read-only (publish_context readOnly, PUBLISH_READONLY). For block a read-only mount
// does not stop writes through the device node (the kernel checks mount flags for regular
// files only); the kubelet enforces it with the container's device permission ("r"). A volume
// that is not recorded as staged at exactly staging_target_path with this access type (for
// block: not as a device), whose mount there is not its own (its data folder, its loop
// device), or a SINGLE_NODE_SINGLE_WRITER volume already published at another target, is
// FAILED_PRECONDITION; publishing again with the same
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
		if other := n.published.other(id, target); other != "" {
			return nil, status.Errorf(codes.FailedPrecondition, "single-writer volume %s is already published at %s", id, other)
		}
	}
	// A read-only attachment is read-only on the node too, even when the CO's own readonly
	// flag says otherwise: the instance may not write the device.
	ro := isReadOnly(req.GetVolumeCapability(), req.GetReadonly()) || req.GetPublishContext()[PublishContextReadOnly] == "true"
	isBlock := req.GetVolumeCapability().GetBlock() != nil
	source := staging
	if isBlock {
		source = filepath.Join(staging, stagedBlockFile)
	}
	if err := n.kubeletRoot().Check(target); err != nil {
		return nil, pathStatus("target_path", target, err)
	}
	// Only this volume's own stage is published: staging_target_path must be where it is
	// recorded as staged, with the same access type.
	rec, isStaged, err := n.staged.Get(id)
	if err != nil {
		return nil, internalf("volume %s: %v", id, err)
	}
	if !isStaged || rec.StagingPath() != staging {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged at %s", id, staging)
	}
	if rec.Block != isBlock {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is staged at %s as a %s volume", id, staging, accessType(rec.Block))
	}
	// The staged mount is held open from here to the bind, which is made from this
	// descriptor: what is bound is what was checked.
	sf, err := n.kubeletRoot().Open(source, unix.O_PATH, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged at %s", id, staging)
	}
	if err != nil {
		return nil, pathStatus("staging_target_path", source, err)
	}
	defer sf.Close()
	mp, err := n.cfg.Mounter.MountPoint(mount.FdPath(sf))
	if err != nil {
		return nil, internalf("inspect %s: %v", source, err)
	}
	if mp == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged at %s", id, staging)
	}
	if isBlock && mp.Device == "" {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is staged at %s as a plain file, not a block device: unstage and stage it again", id, staging)
	}
	if own, err := n.isVolumeMount(id, mount.FdPath(sf), mp); err != nil {
		return nil, err
	} else if !own {
		return nil, status.Errorf(codes.FailedPrecondition, "the mount at %s (root %s, device %q) is not volume %s's", source, mp.Root, mp.Device, id)
	}
	if err := n.prepareTarget(ctx, id, target, isBlock, mp); err != nil {
		return nil, err
	}
	// For block the target becomes a bind mount of the staged loop device node.
	if err := n.bindOnce(ctx, id, "target_path", mount.FdPath(sf), target, ro, mp.Device); err != nil {
		return nil, err
	}
	n.published.set(id, target, true)
	klog.FromContext(ctx).V(2).Info("Volume published", "volumeID", id, "targetPath", target, "readOnly", ro)
	return &csi.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume unmounts what is mounted at target_path when it is this volume's
// publish (notOwnPublish: its publish record, or a mount that provably shows its data folder
// or loop device; never a path recorded as any volume's stage), and removes the target
// when this plugin created it (its publishRecord says so) and it is an empty directory or
// empty file, as the publish left it. A target without a record (published by a driver
// before publish records) is removed, under the same emptiness rule, only when this call
// unmounted something there. What is not removed stays untouched and the call succeeds, so it
// is idempotent: nothing mounted and nothing recorded is success. A link below the kubelet
// root is FAILED_PRECONDITION: nothing is unmounted or removed.
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
	if err := n.kubeletRoot().Check(target); err != nil {
		return nil, pathStatus("target_path", target, err)
	}
	if why, err := n.notOwnPublish(id, target, hasRec); err != nil {
		return nil, err
	} else if why != "" {
		// Idempotent (CSI spec): nothing of this volume is published here, so there is
		// nothing to undo, and what is here (another volume's, a stage) is not touched.
		klog.FromContext(ctx).Info("Target is not a publish of this volume; nothing to unpublish here", "volumeID", id, "targetPath", target, "found", why)
		return &csi.NodeUnpublishVolumeResponse{}, nil
	}
	unmounted, err := n.unmountAll("target_path", target)
	if err != nil {
		return nil, err
	}
	if (hasRec && rec.Created) || (!hasRec && unmounted) {
		kept, err := n.removeTarget(target)
		if err != nil {
			return nil, pathStatus("target_path", target, err)
		}
		if kept != "" {
			klog.FromContext(ctx).Info("Leaving the target in place: it is not what the publish created", "volumeID", id, "targetPath", target, "found", kept)
		}
	}
	if err := n.removePublishRecord(id, target); err != nil {
		return nil, err
	}
	n.published.set(id, target, false)
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
	f, _, err := n.volumeMountAt(id, p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, status.Errorf(codes.NotFound, "stat %s: %v", p, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		size, err := n.cfg.Mounter.BlockSize(mount.FdPath(f))
		if err != nil {
			return nil, internalf("volume %s: %v", req.GetVolumeId(), err)
		}
		return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
			{Unit: csi.VolumeUsage_BYTES, Total: size},
		}}, nil
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &sfs); err != nil {
		return nil, internalf("statfs %s: %v", p, err)
	}
	bsize := sfs.Bsize
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: int64(sfs.Blocks) * bsize, Available: int64(sfs.Bavail) * bsize,
			Used: int64(sfs.Blocks-sfs.Bfree) * bsize},
		{Unit: csi.VolumeUsage_INODES, Total: int64(sfs.Files), Available: int64(sfs.Ffree), Used: int64(sfs.Files - sfs.Ffree)},
	}}, nil
}

// volumeMountAt opens volume_path p (O_PATH) when it is where volume id, staged on this
// node, is mounted: inside the kubelet root, reached without following a link, and the
// volume's staging mount, a publish of it, or the kubelet's own bind of a published block
// device (sameVolumeMount). Anything else is NOT_FOUND (CSI spec, NodeGetVolumeStats and
// NodeExpandVolume errors): the node acts on no other path. The caller closes the file.
func (n *NodeServer) volumeMountAt(id, p string) (*os.File, *mount.MountPoint, error) {
	if why := pathInside(p, n.cfg.KubeletRoot); why != "" {
		return nil, nil, status.Errorf(codes.NotFound, "volume_path %s %s: no volume of this node is there", cloud.Quote(p), why)
	}
	staged, ok, err := n.staged.At(id)
	if err != nil {
		return nil, nil, internalf("volume %s: %v", id, err)
	}
	if !ok {
		return nil, nil, status.Errorf(codes.NotFound, "volume %s is not staged on this node", cloud.Quote(id))
	}
	smp, err := n.mountAt("staging_target_path", staged)
	if err != nil {
		return nil, nil, err
	}
	f, err := n.kubeletRoot().Open(p, unix.O_PATH, 0)
	if err != nil {
		return nil, nil, status.Errorf(codes.NotFound, "volume_path %s: %v", cloud.Quote(p), err)
	}
	mp, err := n.cfg.Mounter.MountPoint(mount.FdPath(f))
	if err != nil {
		f.Close()
		return nil, nil, internalf("inspect %s: %v", p, err)
	}
	if smp == nil || mp == nil || !sameVolumeMount(smp, mp) {
		f.Close()
		return nil, nil, status.Errorf(codes.NotFound, "volume %s is not mounted at %s", id, p)
	}
	return f, mp, nil
}

// NodeExpandVolume grows a block volume's backing file to capacity_range.required_bytes
// rounded up to whole GiB and makes its loop device follow (LOOP_SET_CAPACITY), answering the
// device's new size; a mount volume's folder has no size to grow, so only the answer changes.
// volume_path must be where this volume, staged on this node, is mounted (its staging mount
// or a publish: volumeMountAt), else NOT_FOUND, and nothing is created or grown; more than
// MaxVolumeSize is OUT_OF_RANGE.
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
	if r := req.GetCapacityRange().GetRequiredBytes(); r > MaxVolumeSize {
		return nil, status.Errorf(codes.OutOfRange, "%d bytes exceeds the maximum volume size %d", r, MaxVolumeSize)
	}
	f, mp, err := n.volumeMountAt(id, p)
	if err != nil {
		return nil, err
	}
	f.Close()
	want := roundUpGiB(req.GetCapacityRange().GetRequiredBytes())
	isBlock := req.GetVolumeCapability().GetBlock() != nil
	if req.GetVolumeCapability() == nil {
		isBlock = mp.Device != ""
	}
	if !isBlock {
		return &csi.NodeExpandVolumeResponse{CapacityBytes: want}, nil
	}
	size, err := n.ensureBackingFile(id, want, false)
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
		csi.NodeServiceCapability_RPC_GET_VOLUME_HEALTH,
		csi.NodeServiceCapability_RPC_GET_STORAGE_HEALTH,
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
// docs/design.md, rules 2 and 3). Bounded by ctx, or by DefaultNodeInfoTimeout without a deadline;
// when the zone or the capacity cannot be had in time the call fails (UNAVAILABLE,
// DEADLINE_EXCEEDED, ...) rather than guess.
//
// The kubelet's periodic call finds the zone known and, with a capacity reporter that
// implements cachedCapacity, no lookup due: it is answered from memory, with neither the
// timeout (a timer and a child of the call's context, the largest part of the handler's
// cost; nothing waits) nor a new topology map.
func (n *NodeServer) NodeGetInfo(ctx context.Context, _ *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	if topo, ok := n.topo.accessible(); ok && n.cached != nil {
		if slots, ok := n.cached.CachedMaxVolumesPerNode(ctx); ok {
			return n.nodeInfo(ctx, topo, slots), nil
		}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultNodeInfoTimeout)
		defer cancel()
	}
	zone, err := n.topo.Zone(ctx)
	if err != nil {
		return nil, err
	}
	slots, err := n.cfg.Capacity.MaxVolumesPerNode(ctx)
	if err != nil {
		return nil, cloudStatus(opDefault, err, "node capacity of %s", n.cfg.NodeID)
	}
	return n.nodeInfo(ctx, &csi.Topology{Segments: map[string]string{TopologyZoneKey: zone}}, slots), nil
}

// nodeInfo is NodeGetInfo's answer for topo and the reporter's slots.
func (n *NodeServer) nodeInfo(ctx context.Context, topo *csi.Topology, slots int64) *csi.NodeGetInfoResponse {
	if slots < 1 {
		// A reporter bug must not turn into "unlimited".
		klog.FromContext(ctx).Error(fmt.Errorf("capacity reporter returned %d", slots), "Reporting 1 instead", "nodeID", n.cfg.NodeID)
		slots = 1
	}
	return &csi.NodeGetInfoResponse{NodeId: n.cfg.NodeID, MaxVolumesPerNode: slots, AccessibleTopology: topo}
}

// cachedCapacity is the part of a CapacityReporter that answers NodeGetInfo from memory:
// CachedMaxVolumesPerNode returns what MaxVolumesPerNode would, with ok true, when that needs
// no I/O and no wait (no cloud lookup due); otherwise ok is false and it does nothing.
// *capacity.Reporter and *capacity.Static implement it.
type cachedCapacity interface {
	CachedMaxVolumesPerNode(ctx context.Context) (slots int64, ok bool)
}

func (n *NodeServer) lock(key string) (func(), error) {
	if !n.inflight.tryAcquire(key) {
		return nil, aborted(key)
	}
	return func() { n.inflight.release(key) }, nil
}
