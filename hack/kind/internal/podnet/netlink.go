package podnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/vishvananda/netlink"
)

// RouteProtocol is the rtnetlink protocol number podnet stamps on the routes it makes
// (`ip route show proto 201`). It is how podnet finds its own routes again after a restart
// and why it never touches a route it did not make. 201 is unassigned in the kernel's
// rtnetlink.h and in iproute2's rt_protos (which use 0-18, 42, 99, 186-192).
const RouteProtocol = 201

// mainTable is RT_TABLE_MAIN, spelled out so that this file builds off Linux too.
const mainTable = 254

// Network is the node's IPv4 routing as podnet needs it. Netlink implements it for the host
// (or a test's network namespace).
type Network interface {
	// Routes lists the IPv4 routes of the main table, marking those with RouteProtocol.
	Routes() ([]KernelRoute, error)
	// ReplaceRoute adds or changes the main-table route to r.Dst to go via r.Via, with
	// RouteProtocol (`ip route replace r.Dst via r.Via proto 201`).
	ReplaceRoute(r Route) error
	// DeleteRoute deletes the main-table route to r.Dst that has RouteProtocol.
	DeleteRoute(r Route) error
	// MTU returns the MTU of the interface holding nodeIP, else of the interface of the IPv4
	// default route; an error when neither exists.
	MTU(nodeIP netip.Addr) (int, error)
}

// Netlink is a Network over one rtnetlink handle.
type Netlink struct {
	h *netlink.Handle
}

// NewNetlink returns a Netlink over h, which the caller keeps and closes (netlink.NewHandle()
// for the current network namespace, netlink.NewHandleAt for another).
func NewNetlink(h *netlink.Handle) *Netlink { return &Netlink{h: h} }

// Routes implements Network. A dump interrupted by a concurrent change is retried a few times
// before it is an error.
func (n *Netlink) Routes() ([]KernelRoute, error) {
	var list []netlink.Route
	var err error
	for range 3 {
		list, err = n.h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: mainTable}, netlink.RT_FILTER_TABLE)
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("list IPv4 routes: %w", err)
	}
	out := make([]KernelRoute, 0, len(list))
	for _, r := range list {
		kr := KernelRoute{Ours: r.Protocol == RouteProtocol}
		if r.Dst == nil {
			kr.Dst = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		} else if p, ok := prefixOf(r.Dst); ok {
			kr.Dst = p
		} else {
			continue
		}
		if gw, ok := netip.AddrFromSlice(r.Gw); ok {
			kr.Via = gw.Unmap()
		}
		out = append(out, kr)
	}
	return out, nil
}

// ReplaceRoute implements Network.
func (n *Netlink) ReplaceRoute(r Route) error {
	if err := n.h.RouteReplace(n.route(r)); err != nil {
		return fmt.Errorf("ip route replace %s via %s proto %d: %w", r.Dst, r.Via, RouteProtocol, err)
	}
	return nil
}

// DeleteRoute implements Network. A route that is already gone is not an error.
func (n *Netlink) DeleteRoute(r Route) error {
	nr := n.route(r)
	nr.Gw = nil // match on table, destination and protocol only
	if err := n.h.RouteDel(nr); err != nil && !isNoSuchRoute(err) {
		return fmt.Errorf("ip route del %s proto %d: %w", r.Dst, RouteProtocol, err)
	}
	return nil
}

// MTU implements Network.
func (n *Netlink) MTU(nodeIP netip.Addr) (int, error) {
	if nodeIP.IsValid() {
		addrs, err := n.h.AddrList(nil, netlink.FAMILY_V4)
		if err != nil {
			return 0, fmt.Errorf("list IPv4 addresses: %w", err)
		}
		for _, a := range addrs {
			if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap() == nodeIP {
				return n.linkMTU(a.LinkIndex)
			}
		}
	}
	routes, err := n.h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: mainTable}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return 0, fmt.Errorf("list IPv4 routes: %w", err)
	}
	for _, r := range routes {
		if (r.Dst == nil || isDefault(r.Dst)) && r.LinkIndex > 0 {
			return n.linkMTU(r.LinkIndex)
		}
	}
	return 0, fmt.Errorf("no interface holds %s and there is no IPv4 default route", nodeIP)
}

func (n *Netlink) linkMTU(index int) (int, error) {
	l, err := n.h.LinkByIndex(index)
	if err != nil {
		return 0, fmt.Errorf("link %d: %w", index, err)
	}
	return l.Attrs().MTU, nil
}

func (n *Netlink) route(r Route) *netlink.Route {
	return &netlink.Route{
		Dst:      &net.IPNet{IP: r.Dst.Addr().AsSlice(), Mask: net.CIDRMask(r.Dst.Bits(), 32)},
		Gw:       r.Via.AsSlice(),
		Protocol: RouteProtocol,
		Table:    mainTable,
	}
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	ip, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, bits := n.Mask.Size()
	ip = ip.Unmap()
	if bits == 0 || (ip.Is4() && bits != 32) {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(ip, ones), true
}

func isDefault(n *net.IPNet) bool {
	ones, _ := n.Mask.Size()
	return ones == 0
}

// isNoSuchRoute reports the kernel's ESRCH, its answer to a route delete that matched nothing.
func isNoSuchRoute(err error) bool { return errors.Is(err, syscall.ESRCH) }
