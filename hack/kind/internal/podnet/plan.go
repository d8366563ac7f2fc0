package podnet

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Route is one IPv4 route podnet wants in the node's main table: the pod CIDR Dst of another
// node, reached via that node's InternalIP Via (on the same L2 network: the kind docker
// network). Node names the node it is for; it is empty for a route read back from the kernel.
type Route struct {
	Dst  netip.Prefix
	Via  netip.Addr
	Node string
}

// KernelRoute is one IPv4 route of the node's main table as the kernel reports it. Ours says
// that podnet made it (it carries RouteProtocol); podnet never changes or deletes a route that
// is not Ours. Via is invalid for a route without a gateway.
type KernelRoute struct {
	Dst  netip.Prefix
	Via  netip.Addr
	Ours bool
}

// Note is something podnet noticed about a node and did not act on (an IPv6 pod CIDR, a
// missing InternalIP, a conflict). Reason is a short human sentence; the controller logs a
// Note once when it first appears, not on every resync.
type Note struct {
	Node   string
	Reason string
}

// RoutePlan is what to do to the main table: Replace lists the routes to add or change (with
// `ip route replace` semantics), Delete the routes podnet made that are no longer wanted, both
// sorted by Dst. Notes lists what was ignored, sorted by node then reason.
type RoutePlan struct {
	Replace []Route
	Delete  []Route
	Notes   []Note
}

// NodeNet is the part of a Node that podnet uses: its IPv4 pod CIDRs (spec.podCIDRs, else
// spec.podCIDR) and its first IPv4 InternalIP (invalid when it has none). Notes says what was
// skipped (IPv6 or unparsable CIDRs, no IPv4 InternalIP).
type NodeNet struct {
	Name       string
	PodCIDRs   []netip.Prefix
	InternalIP netip.Addr
	Notes      []Note
}

// NodeNetOf extracts the NodeNet of n. IPv6 pod CIDRs are skipped with a Note: the kind
// clusters podnet serves are IPv4 only.
func NodeNetOf(n *corev1.Node) NodeNet {
	nn := NodeNet{Name: n.Name}
	cidrs := n.Spec.PodCIDRs
	if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
		cidrs = []string{n.Spec.PodCIDR}
	}
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		switch {
		case err != nil:
			nn.Notes = append(nn.Notes, Note{n.Name, fmt.Sprintf("podCIDR %q does not parse: ignored", c)})
		case !p.Addr().Is4():
			nn.Notes = append(nn.Notes, Note{n.Name, fmt.Sprintf("podCIDR %s is not IPv4: ignored (podnet routes IPv4 only)", c)})
		case p.Masked() != p:
			nn.Notes = append(nn.Notes, Note{n.Name, fmt.Sprintf("podCIDR %s has host bits set: ignored", c)})
		default:
			nn.PodCIDRs = append(nn.PodCIDRs, p)
		}
	}
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		ip, err := netip.ParseAddr(a.Address)
		if err != nil {
			continue
		}
		if ip = ip.Unmap(); ip.Is4() {
			nn.InternalIP = ip
			break
		}
	}
	return nn
}

// PlanRoutes computes the route changes that make the main table hold, for every node other
// than self with an IPv4 pod CIDR and an IPv4 InternalIP, "podCIDR via InternalIP", given the
// routes the kernel has now. It is pure: no I/O.
//
// Rules: a route already present with the same Dst and Via is left alone (no change, no log
// line); a wanted Dst that overlaps one of self's own pod CIDRs, or that exactly matches a
// route podnet did not make, is skipped with a Note (podnet never overrides what others
// made); when two nodes claim the same Dst the first by name wins and the other gets a Note;
// every Ours route whose Dst is no longer wanted (node gone, CIDR changed) is deleted. Nodes
// without a pod CIDR yet are skipped silently: that is the normal state before the
// controller manager allocates one.
func PlanRoutes(self string, nodes []*corev1.Node, kernel []KernelRoute) RoutePlan {
	var plan RoutePlan
	nets := make([]NodeNet, 0, len(nodes))
	var own []netip.Prefix
	for _, n := range nodes {
		nn := NodeNetOf(n)
		plan.Notes = append(plan.Notes, nn.Notes...)
		if n.Name == self {
			own = nn.PodCIDRs
			continue
		}
		nets = append(nets, nn)
	}
	slices.SortFunc(nets, func(a, b NodeNet) int { return cmp.Compare(a.Name, b.Name) })

	ours := map[netip.Prefix]KernelRoute{}
	foreign := map[netip.Prefix]bool{}
	for _, r := range kernel {
		if r.Ours {
			ours[r.Dst] = r
		} else {
			foreign[r.Dst] = true
		}
	}

	want := map[netip.Prefix]Route{}
	for _, nn := range nets {
		if len(nn.PodCIDRs) == 0 {
			continue
		}
		if !nn.InternalIP.IsValid() {
			plan.Notes = append(plan.Notes, Note{nn.Name, "no IPv4 InternalIP: no route to its pods"})
			continue
		}
		for _, dst := range nn.PodCIDRs {
			switch {
			case slices.ContainsFunc(own, dst.Overlaps):
				plan.Notes = append(plan.Notes, Note{nn.Name, fmt.Sprintf("podCIDR %s overlaps this node's own pod CIDR: no route", dst)})
			case foreign[dst]:
				plan.Notes = append(plan.Notes, Note{nn.Name, fmt.Sprintf("a route to %s exists that podnet did not make: left alone", dst)})
			default:
				if prev, dup := want[dst]; dup {
					plan.Notes = append(plan.Notes, Note{nn.Name, fmt.Sprintf("podCIDR %s is also node %s's: no route", dst, prev.Node)})
					continue
				}
				want[dst] = Route{Dst: dst, Via: nn.InternalIP, Node: nn.Name}
			}
		}
	}

	for dst, r := range want {
		if cur, ok := ours[dst]; ok && cur.Via == r.Via {
			continue
		}
		plan.Replace = append(plan.Replace, r)
	}
	for dst, cur := range ours {
		if _, ok := want[dst]; !ok {
			plan.Delete = append(plan.Delete, Route{Dst: dst, Via: cur.Via})
		}
	}
	byDst := func(a, b Route) int { return comparePrefix(a.Dst, b.Dst) }
	slices.SortFunc(plan.Replace, byDst)
	slices.SortFunc(plan.Delete, byDst)
	slices.SortFunc(plan.Notes, func(a, b Note) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Reason, b.Reason))
	})
	return plan
}

func comparePrefix(a, b netip.Prefix) int {
	return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
}
