// Package podnet is a minimal CNI setup for the offline kind node image, in place of kindnetd
// (which cannot be built here): run inside every node (hack/kind/cmd/podnet, as the systemd
// unit hack/kind/offline/node/podnet.service), it waits for the kubelet's kubeconfig, then
// watches Nodes and
//
//   - writes /etc/cni/net.d/10-podnet.conflist for its own node's pod CIDR (ptp, host-local
//     and portmap, see RenderConflist) once the controller manager has allocated one;
//   - keeps, for every other node, `ip route replace <podCIDR> via <InternalIP>` in the main
//     table, stamped with RouteProtocol, and deletes the routes it made for nodes that are
//     gone. The kind nodes share one docker network, so a plain route to the peer's address
//     is all the pod network needs: no tunnel, no daemon on the data path.
//
// A node may read only its own Node (Node authorizer), so on the control plane podnet also
// creates, with admin.conf, the RBAC that lets group system:nodes read all Nodes
// (NodeReaderRBAC); podnet on the workers waits (retrying the list) until it exists.
//
// The pure parts (RenderConflist, PlanRoutes) are separate from the I/O (Controller, Netlink)
// so that tests can check them without a cluster. IPv4 only: IPv6 pod CIDRs are logged and
// ignored.
package podnet

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/vishvananda/netlink"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// netlinkRoute is NETLINK_ROUTE (0 in the Linux ABI), spelled out so that this file builds off
// Linux too: podnet opens only the rtnetlink socket, not every family netlink supports.
const netlinkRoute = 0

// Options configure Run; cmd/podnet fills them from flags.
type Options struct {
	// Kubeconfig is the kubeconfig to use, waited for until it exists
	// (/etc/kubernetes/kubelet.conf, the node's own credentials, which can list all Nodes
	// only with the RBAC of NodeReaderRBAC).
	Kubeconfig string
	// AdminKubeconfig, when set and present (/etc/kubernetes/admin.conf on a kind control
	// plane; absent on workers), is used once to create NodeReaderRBAC. Empty disables that.
	AdminKubeconfig string
	// NodeName is this node's Node name (the lowercased hostname in a kind node).
	NodeName string
	// CNIConfDir is the CNI configuration directory (/etc/cni/net.d).
	CNIConfDir string
	// Resync is how often everything is checked again without a Node event (30s).
	Resync time.Duration
	// WaitInterval is how often Run checks for Kubeconfig while it waits (1s).
	WaitInterval time.Duration
}

// Validate says what is wrong with o, all problems at once, or nil.
func (o Options) Validate() error {
	var errs []error
	if o.Kubeconfig == "" {
		errs = append(errs, errors.New("--kubeconfig is empty"))
	}
	if o.NodeName == "" {
		errs = append(errs, errors.New("--node-name is empty (and the hostname gave none)"))
	} else if msgs := validation.IsDNS1123Subdomain(o.NodeName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--node-name %q is not a valid node name: %v", o.NodeName, msgs))
	}
	if !filepath.IsAbs(o.CNIConfDir) {
		errs = append(errs, fmt.Errorf("--cni-conf-dir %q is not an absolute path", o.CNIConfDir))
	}
	if o.Resync < time.Second {
		errs = append(errs, fmt.Errorf("--resync %s: must be at least 1s", o.Resync))
	}
	if o.WaitInterval <= 0 {
		errs = append(errs, fmt.Errorf("wait interval %s: must be positive", o.WaitInterval))
	}
	return errors.Join(errs...)
}

// Run is podnet in a node: it validates o, waits for o.Kubeconfig, then runs a Controller on
// the host's network namespace until ctx is done (then it returns nil). Every error is fatal
// and says what failed; systemd restarts podnet after one.
func Run(ctx context.Context, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if err := WaitForFile(ctx, o.Kubeconfig, o.WaitInterval); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if o.AdminKubeconfig != "" {
		go bootstrapNodeReader(ctx, o.AdminKubeconfig, 2*time.Second)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", o.Kubeconfig, err)
	}
	cfg.UserAgent = "podnet"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client from %s: %w", o.Kubeconfig, err)
	}
	h, err := netlink.NewHandle(netlinkRoute)
	if err != nil {
		return fmt.Errorf("open rtnetlink: %w", err)
	}
	defer h.Close()
	c := &Controller{
		Client:        client,
		NodeName:      o.NodeName,
		CNIConfDir:    o.CNIConfDir,
		Resync:        o.Resync,
		Net:           NewNetlink(h),
		IPForwardPath: "/proc/sys/net/ipv4/ip_forward",
	}
	return c.Run(ctx)
}
