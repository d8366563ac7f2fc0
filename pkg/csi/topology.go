package csi

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/nodestate"
)

// Where the zone a Topology reports came from (log key "source").
const (
	zoneSourceCloud    = "cloud"
	zoneSourceStateDir = "stateDir"
)

// Topology owns the node's identity as NodeGetInfo reports it: the node ID and its zone, the
// accessible topology. It learns the zone once (from the state directory's persisted identity
// or from the cloud), persists it, and never changes it for the life of the process: the
// topology of a CSINode must not change (docs/design.md, rule 4; the API server rejects the
// update). Safe for concurrent use.
type Topology struct {
	nodeID string
	dir    nodestate.Dir
	cloud  NodeCloud
	ready  func()
	// tokenFile is the driver's --cloud-token-file ("" when none was given), named by
	// Fetch's log line when the cloud refuses the node plugin (nodeCloudWaitMessage).
	tokenFile string

	// sem serialises the zone lookup while letting waiters give up with their ctx;
	// identityRead (guarded by it) is set once the persisted identity was looked at.
	sem          chan struct{}
	identityRead bool
	// mu guards the zone, whether it is known, where it came from (zoneSource*), whether
	// the cloud has been compared with it (checked) and the zone as accessible topology.
	mu      sync.Mutex
	zone    string
	known   bool
	source  string
	checked bool
	topo    *csi.Topology
}

// NewTopology returns the topology of instance nodeID, persisted in dir, learnt from c;
// ready, if not nil, is called once the zone is known (readiness). It does no I/O.
func NewTopology(nodeID string, dir nodestate.Dir, c NodeCloud, ready func()) *Topology {
	if ready == nil {
		ready = func() {}
	}
	return &Topology{nodeID: nodeID, dir: dir, cloud: c, ready: ready, sem: make(chan struct{}, 1)}
}

// Zone returns the node's zone, the accessible topology NodeGetInfo reports. It waits at most
// until ctx ends; errors are status errors.
//
// The first call takes the identity persisted in the state directory (node.json) when it
// belongs to this node ID, without asking the cloud, so a restarted plugin answers
// NodeGetInfo (and turns ready) while the cloud is down; Fetch then checks it against the
// cloud in the background. Otherwise the zone comes from the cloud's instance (asked again
// after a failure, never after a success) and is persisted, atomically, for the next start; a
// failed write is logged, not returned. Once known the zone never changes for the life of
// the process, and a persisted zone is never replaced. If the cloud later names a DIFFERENT
// zone than the persisted one, Zone keeps reporting the persisted zone and the mismatch is
// logged as an error; removing node.json (and re-registering the node) is the way to take the
// new zone.
func (t *Topology) Zone(ctx context.Context) (string, error) {
	if z, ok := t.knownZone(); ok {
		return z, nil
	}
	select {
	case t.sem <- struct{}{}:
	case <-ctx.Done():
		return "", status.FromContextError(ctx.Err()).Err()
	}
	defer func() { <-t.sem }()
	if z, ok := t.knownZone(); ok {
		return z, nil
	}
	logger := klog.FromContext(ctx)
	path := t.dir.IdentityFile()
	if !t.identityRead && path != "" {
		t.identityRead = true
		id, ok, err := t.dir.LoadIdentity()
		switch {
		case err != nil:
			logger.Error(err, "Ignoring the persisted node identity", "nodeID", t.nodeID, "path", path)
		case ok && id.NodeID != t.nodeID:
			logger.Info("Ignoring the persisted identity of another node", "nodeID", t.nodeID, "stateNodeID", id.NodeID, "path", path)
		case ok:
			t.setZone(id.Zone, zoneSourceStateDir, false)
			logger.Info("Node topology known", "nodeID", t.nodeID, "zone", id.Zone, "source", zoneSourceStateDir, "path", path)
			t.ready()
			return id.Zone, nil
		}
	}
	inst, err := t.cloud.GetInstance(ctx, t.nodeID)
	if err != nil {
		return "", cloudStatus(opDefault, err, "get instance %s", t.nodeID)
	}
	t.setZone(inst.Zone, zoneSourceCloud, true)
	logger.Info("Node topology known", "nodeID", t.nodeID, "zone", inst.Zone, "source", zoneSourceCloud)
	if path != "" {
		if err := t.dir.SaveIdentity(nodestate.Identity{Version: 1, NodeID: t.nodeID, Zone: inst.Zone, SavedAt: time.Now().UTC()}); err != nil {
			logger.Error(err, "Cannot persist the node identity; a restart will need the cloud to answer NodeGetInfo", "nodeID", t.nodeID, "path", path)
		}
	}
	t.ready()
	return inst.Zone, nil
}

func (t *Topology) setZone(zone, source string, checked bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.zone, t.known, t.source, t.checked = zone, true, source, checked
	t.topo = &csi.Topology{Segments: map[string]string{TopologyZoneKey: zone}}
}

// accessible returns the known zone as NodeGetInfo's accessible_topology, without I/O or
// waiting; ok is false until the zone is known. Every caller gets the same message (the zone
// never changes): read it, never modify it.
func (t *Topology) accessible() (*csi.Topology, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.topo, t.known
}

func (t *Topology) knownZone() (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.zone, t.known
}

// check compares a zone taken from the state dir with the cloud's, once the cloud answers;
// a zone from the cloud needs no check. A different zone is logged as an error and NOT
// adopted (see Zone). Errors: the cloud's, as status errors, when it could not be asked.
func (t *Topology) check(ctx context.Context) error {
	t.mu.Lock()
	zone, checked := t.zone, t.checked
	t.mu.Unlock()
	if checked {
		return nil
	}
	inst, err := t.cloud.GetInstance(ctx, t.nodeID)
	if err != nil {
		return cloudStatus(opDefault, err, "check zone of instance %s", t.nodeID)
	}
	t.mu.Lock()
	t.checked = true
	t.mu.Unlock()
	logger := klog.FromContext(ctx)
	if inst.Zone != zone {
		logger.Error(fmt.Errorf("the cloud says instance %s is in zone %q, the state dir says %q", t.nodeID, inst.Zone, zone),
			"Keeping the persisted zone: the CSINode topology cannot change; remove the node identity file and re-register the node to take the cloud's",
			"nodeID", t.nodeID, "zone", zone, "cloudZone", inst.Zone, "path", t.dir.IdentityFile())
		return nil
	}
	logger.V(1).Info("Persisted node topology confirmed by the cloud", "nodeID", t.nodeID, "zone", zone)
	return nil
}

// Fetch calls Zone until it succeeds and, when the zone came from the state dir, checks it
// against the cloud until the cloud has answered, or until ctx ends; it backs off from 1s to
// 30s between tries. Driver.Run starts it so Probe turns ready without waiting for the first
// NodeGetInfo.
func (t *Topology) Fetch(ctx context.Context) {
	retryUntil(ctx, func(ctx context.Context, retryIn time.Duration) bool {
		_, err := t.Zone(ctx)
		if err == nil {
			err = t.check(ctx)
		}
		if err == nil || ctx.Err() != nil {
			return true
		}
		klog.FromContext(ctx).Error(err, nodeCloudWaitMessage(err, t.tokenFile), "nodeID", t.nodeID, "retryIn", retryIn,
			"tokenFile", t.tokenFile)
		return false
	})
}

// nodeCloudWaitMessage is the node plugin's cloudWaitMessage: why Fetch's lookup of the
// node's zone failed, for its log line. err is Zone's status error, UNAUTHENTICATED for the
// cloud's 401 (cloud.ClassAuth): a cloud that refuses the plugin is reachable, and "cannot
// learn the zone yet" alone would send the reader to the network instead of to
// --cloud-token-file.
func nodeCloudWaitMessage(err error, tokenFile string) string {
	switch {
	case status.Code(err) != codes.Unauthenticated:
		return "Cannot learn the node's zone from the cloud yet"
	case tokenFile == "":
		return "Cloud refused the node plugin: no --cloud-token-file was given; the node's zone cannot be learnt until it is"
	default:
		return "Cloud refused the token in --cloud-token-file; the node's zone cannot be learnt until it is accepted"
	}
}
