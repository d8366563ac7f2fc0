package console

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// DefaultDriverName is the CSI driver whose CSINode entries and VolumeAttachments the cluster
// view reads: pkg/csi's DriverName (not imported: the fake cloud does not depend on the driver).
const DefaultDriverName = "disk.fakecloud.dev"

// Bounds of the cluster view. It reads the cluster with a few LIST calls per refresh, shared
// by every page that polls it, so a console left open costs the API server at most one set of
// lists per ClusterRefresh whatever the number of browsers.
const (
	// MaxClusterObjects bounds every list (CSINodes, Pending pods, VolumeAttachments, Warning
	// events): one page of that many; the answer says when a list had more (truncated).
	MaxClusterObjects = 500
	// ClusterRefresh is how old a cluster snapshot may be before a request reads the cluster
	// again.
	ClusterRefresh = time.Second
	// ClusterTimeout bounds one refresh (all its lists).
	ClusterTimeout = 5 * time.Second
)

// ClusterView is the answer of GET /ui/cluster: what the Kubernetes cluster says about the
// driver's nodes, to show beside the cloud's truth and the plugins' reported values. Enabled is
// false (and the rest empty) when the fake cloud was given no kubeconfig.
type ClusterView struct {
	Enabled bool   `json:"enabled"`
	Driver  string `json:"driver,omitempty"`
	// Nodes are the cluster's CSINodes, by name, and any node a Pending pod or a
	// VolumeAttachment of the driver names without a CSINode.
	Nodes []ClusterNode `json:"nodes"`
	// Unscheduled are the Pending pods with no node yet, with the scheduler's reason (for
	// KEP-4876 the interesting one: "node(s) exceed max volume count").
	Unscheduled []PendingPod `json:"unscheduled"`
	// Truncated names the lists that had more than MaxClusterObjects items: the view shows the
	// first page only.
	Truncated []string `json:"truncated,omitempty"`
	// Error is why the last refresh failed (the API server unreachable, RBAC); the rest is
	// then empty.
	Error      string    `json:"error,omitempty"`
	ObservedAt time.Time `json:"observedAt,omitzero"`
}

// ClusterNode is one Kubernetes node as the view sees it.
type ClusterNode struct {
	// Name is the Kubernetes node (and CSINode) name.
	Name string `json:"name"`
	// NodeID is the driver's node ID on it (CSINode spec.drivers[].nodeID): the fake cloud's
	// instance ID. Empty when the driver is not registered on the node.
	NodeID string `json:"nodeId,omitempty"`
	// Allocatable is the driver's CSINode allocatable count (spec.drivers[].allocatable.count),
	// the value the scheduler counts attachments against; nil when the node has no CSINode
	// entry for the driver or it sets no count.
	Allocatable *int32 `json:"allocatable"`
	// Attached and Attaching count the driver's VolumeAttachments on the node whose status
	// says attached, and not yet; AttachErrors those with an attach error, LastAttachError the
	// newest such message.
	Attached        int    `json:"attached"`
	Attaching       int    `json:"attaching"`
	AttachErrors    int    `json:"attachErrors"`
	LastAttachError string `json:"lastAttachError,omitempty"`
	// Pending are the node's Pending pods (bound to it, not running yet: waiting for an
	// attach or a mount, typically).
	Pending []PendingPod `json:"pending"`
}

// PendingPod is a Pending pod and why it waits.
type PendingPod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Reason and Message say why: the PodScheduled condition's for an unscheduled pod, else
	// the pod's newest Warning event (FailedAttachVolume, FailedMount), else its first
	// waiting container's.
	// Both are cut to cloud.MaxMessageBytes (a scheduler message names every node's reason).
	Reason  string    `json:"reason,omitempty"`
	Message string    `json:"message,omitempty"`
	Since   time.Time `json:"since,omitzero"`
}

// cluster reads the cluster view and caches it for ClusterRefresh.
type cluster struct {
	client *KubeClient
	driver string
	now    func() time.Time

	group singleflight.Group
	mu    sync.Mutex
	last  *ClusterView
}

// Cluster returns the cluster view: the cached one when younger than ClusterRefresh, else a new
// reading (concurrent callers share one). A failed reading is an answer with Error set, not an
// error: the page shows it where the cluster would be.
func (c *Console) Cluster(ctx context.Context) ClusterView {
	if c.cluster == nil {
		return ClusterView{Nodes: []ClusterNode{}, Unscheduled: []PendingPod{}}
	}
	return c.cluster.view(ctx)
}

func (cl *cluster) view(ctx context.Context) ClusterView {
	cl.mu.Lock()
	last := cl.last
	cl.mu.Unlock()
	if last != nil && cl.now().Sub(last.ObservedAt) < ClusterRefresh {
		return *last
	}
	v, _, _ := cl.group.Do("view", func() (any, error) {
		// The reading is shared: it must not end with the first caller's request.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ClusterTimeout)
		defer cancel()
		view := cl.read(rctx)
		cl.mu.Lock()
		cl.last = &view
		cl.mu.Unlock()
		return view, nil
	})
	return v.(ClusterView)
}

// read lists CSINodes, VolumeAttachments, Pending pods and Warning events, one page each,
// and folds them into the view (clusterReading). A failed list is a view with only Error set.
func (cl *cluster) read(ctx context.Context) ClusterView {
	r := newClusterReading(cl.driver, cl.now())
	opts := metav1.ListOptions{Limit: MaxClusterObjects}
	csiNodes, err := cl.client.csiNodes(ctx, opts)
	if err != nil {
		return r.failed("CSINodes", err)
	}
	r.addCSINodes(csiNodes.Items, csiNodes.Continue)
	vas, err := cl.client.volumeAttachments(ctx, opts)
	if err != nil {
		return r.failed("VolumeAttachments", err)
	}
	r.addAttachments(vas.Items, vas.Continue)
	podOpts := opts
	podOpts.FieldSelector = fields.OneTermEqualSelector("status.phase", string(corev1.PodPending)).String()
	pods, err := cl.client.pods(ctx, podOpts)
	if err != nil {
		return r.failed("Pending pods", err)
	}
	evOpts := opts
	evOpts.FieldSelector = fields.AndSelectors(fields.OneTermEqualSelector("type", corev1.EventTypeWarning),
		fields.OneTermEqualSelector("involvedObject.kind", "Pod")).String()
	events, err := cl.client.events(ctx, evOpts)
	if err != nil {
		return r.failed("Warning events", err)
	}
	warnings := r.podWarnings(events.Items, events.Continue)
	r.addPending(pods.Items, pods.Continue, warnings)
	return r.done()
}

// clusterReading folds the lists of one read into a ClusterView: the driver's nodes by name,
// the unscheduled pods, and which lists were cut.
type clusterReading struct {
	driver string
	view   ClusterView
	nodes  map[string]*ClusterNode
}

// newClusterReading starts the view of driver's nodes observed at now, empty (not nil) lists.
func newClusterReading(driver string, now time.Time) *clusterReading {
	return &clusterReading{
		driver: driver,
		view:   ClusterView{Enabled: true, Driver: driver, Nodes: []ClusterNode{}, Unscheduled: []PendingPod{}, ObservedAt: now},
		nodes:  map[string]*ClusterNode{},
	}
}

// failed is the answer when listing what failed with err: nothing read so far, only the
// error (cut to cloud.TruncateMessage).
func (r *clusterReading) failed(what string, err error) ClusterView {
	return ClusterView{Enabled: true, Driver: r.driver, Nodes: []ClusterNode{}, Unscheduled: []PendingPod{}, ObservedAt: r.view.ObservedAt,
		Error: cloud.TruncateMessage(fmt.Sprintf("list %s: %v", what, err))}
}

// truncated cuts n items to MaxClusterObjects (a fake or old server may ignore Limit) and
// notes a list that had more (a continue token or too many items).
func (r *clusterReading) truncated(what string, n int, cont string) int {
	if cont != "" || n > MaxClusterObjects {
		r.view.Truncated = append(r.view.Truncated, what)
	}
	return min(n, MaxClusterObjects)
}

// node returns the entry of the node named name, added on first use.
func (r *clusterReading) node(name string) *ClusterNode {
	n, ok := r.nodes[name]
	if !ok {
		n = &ClusterNode{Name: name, Pending: []PendingPod{}}
		r.nodes[name] = n
	}
	return n
}

// addCSINodes adds every CSINode, with the driver's node ID and allocatable count when the
// driver is registered there.
func (r *clusterReading) addCSINodes(items []storagev1.CSINode, cont string) {
	for _, cn := range items[:r.truncated("CSINodes", len(items), cont)] {
		n := r.node(cn.Name)
		for _, d := range cn.Spec.Drivers {
			if d.Name != r.driver {
				continue
			}
			n.NodeID = d.NodeID
			if d.Allocatable != nil && d.Allocatable.Count != nil {
				n.Allocatable = new(*d.Allocatable.Count)
			}
		}
	}
}

// addAttachments counts the driver's VolumeAttachments per node: attached, attaching, and
// those with an attach error (keeping the last one's message).
func (r *clusterReading) addAttachments(items []storagev1.VolumeAttachment, cont string) {
	for _, va := range items[:r.truncated("VolumeAttachments", len(items), cont)] {
		if va.Spec.Attacher != r.driver || va.Spec.NodeName == "" {
			continue
		}
		n := r.node(va.Spec.NodeName)
		if va.Status.Attached {
			n.Attached++
		} else {
			n.Attaching++
		}
		if e := va.Status.AttachError; e != nil {
			n.AttachErrors++
			n.LastAttachError = cloud.TruncateMessage(e.Message)
		}
	}
}

// podWarnings returns the newest Warning event of each pod, by namespace/name.
func (r *clusterReading) podWarnings(items []corev1.Event, cont string) map[string]corev1.Event {
	warnings := map[string]corev1.Event{}
	for _, ev := range items[:r.truncated("Warning events", len(items), cont)] {
		if ev.Type != corev1.EventTypeWarning || ev.InvolvedObject.Kind != "Pod" {
			continue // a server that ignored the field selector (client-go's fake does)
		}
		key := ev.InvolvedObject.Namespace + "/" + ev.InvolvedObject.Name
		if old, ok := warnings[key]; !ok || eventTime(ev).After(eventTime(old)) {
			warnings[key] = ev
		}
	}
	return warnings
}

// addPending adds every Pending pod, with its newest warning, to its node, or to the
// unscheduled ones when it has none.
func (r *clusterReading) addPending(items []corev1.Pod, cont string, warnings map[string]corev1.Event) {
	for _, p := range items[:r.truncated("Pending pods", len(items), cont)] {
		if p.Status.Phase != corev1.PodPending {
			continue // a server that ignored the field selector (client-go's fake does)
		}
		pp := pendingPod(&p, warnings[p.Namespace+"/"+p.Name])
		if p.Spec.NodeName == "" {
			r.view.Unscheduled = append(r.view.Unscheduled, pp)
		} else {
			r.node(p.Spec.NodeName).Pending = append(r.node(p.Spec.NodeName).Pending, pp)
		}
	}
}

// done returns the view, nodes sorted by name and pods by namespace and name.
func (r *clusterReading) done() ClusterView {
	for _, n := range r.nodes {
		slices.SortFunc(n.Pending, comparePods)
		r.view.Nodes = append(r.view.Nodes, *n)
	}
	slices.SortFunc(r.view.Nodes, func(a, b ClusterNode) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(r.view.Unscheduled, comparePods)
	return r.view
}

func comparePods(a, b PendingPod) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// eventTime is when an event last happened, whichever time field its reporter set.
func eventTime(ev corev1.Event) time.Time {
	switch {
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	case ev.Series != nil && !ev.Series.LastObservedTime.IsZero():
		return ev.Series.LastObservedTime.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	}
	return ev.CreationTimestamp.Time
}

// pendingPod says why p waits: an unscheduled pod by its PodScheduled condition, a bound one
// by its newest Warning event (warning, zero when it has none) or its first waiting container.
func pendingPod(p *corev1.Pod, warning corev1.Event) PendingPod {
	out := PendingPod{Namespace: p.Namespace, Name: p.Name, Since: p.CreationTimestamp.Time}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && p.Spec.NodeName == "" {
			out.Reason, out.Message, out.Since = c.Reason, c.Message, c.LastTransitionTime.Time
		}
	}
	if out.Reason == "" && warning.Reason != "" {
		out.Reason, out.Message, out.Since = warning.Reason, warning.Message, eventTime(warning)
	}
	if out.Reason == "" {
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil {
				out.Reason, out.Message = w.Reason, w.Message
				break
			}
		}
	}
	out.Reason = cloud.TruncateMessage(out.Reason)
	out.Message = cloud.TruncateMessage(out.Message)
	return out
}
