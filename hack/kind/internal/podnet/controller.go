package podnet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Controller keeps one node's pod network configured: the conflist for its own pod CIDR and a
// route to every other node's pod CIDR. Build it with its fields set and call Run.
type Controller struct {
	// Client reads Nodes (list/watch all of them). With a kubelet's own credentials that
	// needs NodeReaderRBAC: the Node authorizer alone lets a node read only its own Node.
	Client kubernetes.Interface
	// NodeName is this node's name.
	NodeName string
	// CNIConfDir is where the conflist goes (/etc/cni/net.d in a kind node).
	CNIConfDir string
	// Resync is how often the routes and the conflist are checked again without a Node
	// event, to repair what someone else changed. At least one second.
	Resync time.Duration
	// Net is the routing of the node (NewNetlink over netlink.NewHandle() in a node).
	Net Network
	// IPForwardPath, when set, is a sysctl file (/proc/sys/net/ipv4/ip_forward) that Run
	// sets to 1 first: routing pod traffic between nodes needs forwarding on.
	IPForwardPath string

	notes map[Note]bool // the notes of the previous reconcile, to log each only once
}

// Run syncs the Node informer, then reconciles on every Node event and every Resync until ctx
// is done, when it returns nil. It returns an error only on a fatal problem: forwarding
// cannot be enabled, or the conflist cannot be written. A route that cannot be set is logged
// and retried on the next reconcile.
func (c *Controller) Run(ctx context.Context) error {
	if c.Resync < time.Second {
		return fmt.Errorf("resync %s: must be at least 1s", c.Resync)
	}
	if c.IPForwardPath != "" {
		if err := enableForwarding(c.IPForwardPath); err != nil {
			return err
		}
	}
	factory := informers.NewSharedInformerFactory(c.Client, 0)
	nodes := factory.Core().V1().Nodes()
	kick := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case kick <- struct{}{}:
		default: // a reconcile is already pending; it will see this change too
		}
	}
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    poke,
		UpdateFunc: func(_, n any) { poke(n) },
		DeleteFunc: poke,
	}); err != nil {
		return fmt.Errorf("watch nodes: %w", err)
	}
	// Since the Node authorizer lets a node read only its own Node, listing all of them needs
	// NodeReaderRBAC; say so instead of only "forbidden".
	if err := nodes.Informer().SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		if apierrors.IsForbidden(err) {
			klog.ErrorS(err, "Cannot list Nodes with this node's credentials yet: podnet on the control plane creates ClusterRoleBinding "+NodeReaderName+" for group system:nodes with admin.conf; retrying")
			return
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		return fmt.Errorf("watch nodes: %w", err)
	}
	lister := nodes.Lister()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	klog.InfoS("Waiting for the node list", "node", c.NodeName)
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("sync informer for %v", typ)
		}
	}
	klog.InfoS("Watching nodes", "node", c.NodeName, "cniConfDir", c.CNIConfDir, "resync", c.Resync, "routeProtocol", RouteProtocol)
	tick := time.NewTicker(c.Resync)
	defer tick.Stop()
	for {
		list, err := lister.List(labels.Everything())
		if err != nil {
			return fmt.Errorf("list nodes from cache: %w", err)
		}
		if err := c.Reconcile(list); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
		case <-tick.C:
		}
	}
}

// Reconcile makes the conflist and the routes match nodes (this node's own and all others),
// logging one line per change and one per new Note. It returns an error only when the
// conflist cannot be rendered or written; route failures are logged and left for the next
// call.
func (c *Controller) Reconcile(nodes []*corev1.Node) error {
	if c.notes == nil {
		c.notes = map[Note]bool{}
	}
	var notes []Note
	var self *corev1.Node
	for _, n := range nodes {
		if n.Name == c.NodeName {
			self = n
		}
	}
	switch {
	case self == nil:
		notes = append(notes, Note{c.NodeName, "this node is not registered yet: no conflist"})
	default:
		nn := NodeNetOf(self)
		if len(nn.PodCIDRs) == 0 {
			notes = append(notes, Note{c.NodeName, "this node has no IPv4 podCIDR yet: no conflist"})
		} else if err := c.writeConflist(nn); err != nil {
			return err
		}
	}

	kernel, err := c.Net.Routes()
	if err != nil {
		klog.ErrorS(err, "Cannot read routes; retrying on the next resync")
		c.logNotes(notes)
		return nil
	}
	plan := PlanRoutes(c.NodeName, nodes, kernel)
	notes = append(notes, plan.Notes...)
	c.logNotes(notes)
	for _, r := range plan.Delete {
		if err := c.Net.DeleteRoute(r); err != nil {
			klog.ErrorS(err, "Cannot delete route", "dst", r.Dst, "via", r.Via)
			continue
		}
		klog.InfoS("Route deleted", "dst", r.Dst, "via", r.Via)
	}
	for _, r := range plan.Replace {
		if err := c.Net.ReplaceRoute(r); err != nil {
			klog.ErrorS(err, "Cannot set route", "node", r.Node, "dst", r.Dst, "via", r.Via)
			continue
		}
		klog.InfoS("Route set", "node", r.Node, "dst", r.Dst, "via", r.Via)
	}
	return nil
}

func (c *Controller) writeConflist(self NodeNet) error {
	mtu, err := c.Net.MTU(self.InternalIP)
	if err != nil {
		// Not fatal: 1500 is the docker network's default, and the next change retries.
		c.logNotes([]Note{{c.NodeName, fmt.Sprintf("MTU unknown, using %d: %v", DefaultMTU, err)}})
		mtu = DefaultMTU
	}
	cidr := self.PodCIDRs[0]
	data, err := RenderConflist(cidr, mtu)
	if err != nil {
		return fmt.Errorf("conflist for node %s: %w", c.NodeName, err)
	}
	changed, err := WriteFileIfChanged(c.CNIConfDir, ConflistName, data)
	if err != nil {
		return fmt.Errorf("write conflist: %w", err)
	}
	if changed {
		klog.InfoS("Conflist written", "path", filepath.Join(c.CNIConfDir, ConflistName), "podCIDR", cidr, "gateway", cidr.Addr().Next(), "mtu", mtu)
	}
	return nil
}

// logNotes logs each note of the current reconcile that the previous one did not have, and
// forgets notes that went away (so they are logged again if they come back).
func (c *Controller) logNotes(current []Note) {
	now := make(map[Note]bool, len(current))
	for _, n := range current {
		now[n] = true
		if !c.notes[n] {
			klog.InfoS("Ignored", "node", n.Node, "reason", n.Reason)
		}
	}
	c.notes = now
}

// enableForwarding writes 1 to the ip_forward sysctl file at path unless it already holds 1.
func enableForwarding(path string) error {
	cur, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if string(bytes.TrimSpace(cur)) == "1" {
		return nil
	}
	if err := os.WriteFile(path, []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("enable IPv4 forwarding (%s): %w", path, err)
	}
	klog.InfoS("IPv4 forwarding enabled", "sysctl", path)
	return nil
}

// WaitForFile returns nil once path exists, polling every interval and logging once while it
// waits; ctx's error if ctx ends first; an error if path cannot be checked for another reason
// than not existing.
func WaitForFile(ctx context.Context, path string, interval time.Duration) error {
	logged := false
	for {
		_, err := os.Stat(path)
		if err == nil {
			return nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("check %s: %w", path, err)
		}
		if !logged {
			klog.InfoS("Waiting for the kubelet's kubeconfig (kubeadm writes it at init/join)", "path", path)
			logged = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}
