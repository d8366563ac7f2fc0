package podnet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// newNetns creates a named network namespace for the test (`ip netns add h2-test-podnet-PID-
// suffix`, deleted at the end) with lo up, and returns its name, a handle on it and a netlink
// handle inside it. It skips the test unless it runs as root with iproute2's ip. Nothing is
// done in the host's own namespace.
func newNetns(t *testing.T, suffix string) (string, netns.NsHandle, *netlink.Handle) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	ipBin, err := exec.LookPath("ip")
	if err != nil {
		t.Skip("needs iproute2's ip to create a named network namespace")
	}
	name := fmt.Sprintf("h2-test-podnet-%d-%s", os.Getpid(), suffix)
	if out, err := exec.Command(ipBin, "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("cannot create a network namespace here: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(ipBin, "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	ns, err := netns.GetFromName(name)
	if err != nil {
		t.Fatalf("open netns %s: %v", name, err)
	}
	t.Cleanup(func() { ns.Close() })
	h, err := netlink.NewHandleAt(ns, netlinkRoute)
	if err != nil {
		t.Fatalf("netlink handle in %s: %v", name, err)
	}
	t.Cleanup(h.Close)
	lo, err := h.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	must(t, h.LinkSetUp(lo))
	return name, ns, h
}

// testNetns is newNetns plus an "eth0" holding 172.30.0.1/24 at MTU 1400: a veth whose peer
// stays in the namespace, not a dummy, because this VM's kernel has no dummy driver (the
// peer only has to be up for eth0 to have a carrier).
func testNetns(t *testing.T) *netlink.Handle {
	t.Helper()
	_, _, h := newNetns(t, "node")
	must(t, h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0", MTU: 1400}, PeerName: "peer0"}))
	linkUpWithAddr(t, h, "eth0", "172.30.0.1/24")
	peer, err := h.LinkByName("peer0")
	if err != nil {
		t.Fatal(err)
	}
	must(t, h.LinkSetUp(peer))
	return h
}

// linkUpWithAddr gives the link named name in h's namespace the address cidr and sets it up.
func linkUpWithAddr(t *testing.T, h *netlink.Handle, name, cidr string) {
	t.Helper()
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := netlink.ParseAddr(cidr)
	if err != nil {
		t.Fatal(err)
	}
	must(t, h.AddrAdd(l, addr))
	must(t, h.LinkSetUp(l))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// kernelRoutes returns the main table's IPv4 routes with a gateway as "dst via gw proto N",
// sorted.
func kernelRoutes(t *testing.T, h *netlink.Handle) []string {
	t.Helper()
	list, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: mainTable}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range list {
		if r.Gw != nil && r.Dst != nil {
			out = append(out, fmt.Sprintf("%s via %s proto %d", r.Dst, r.Gw, r.Protocol))
		}
	}
	slices.Sort(out)
	return out
}

// eventually polls cond every 50ms for up to 10s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestControllerInNetns runs the whole controller (informer, reconcile, netlink) against a
// fake clientset and a real routing table in a throwaway network namespace.
func TestControllerInNetns(t *testing.T) {
	h := testNetns(t)
	eth0, _ := h.LinkByName("eth0")
	// A route to a pod CIDR that someone else made: podnet must leave it exactly as it is.
	_, foreignDst, _ := net.ParseCIDR("10.244.9.0/24")
	must(t, h.RouteAdd(&netlink.Route{Dst: foreignDst, Gw: net.ParseIP("172.30.0.254"), LinkIndex: eth0.Attrs().Index, Protocol: 4 /* static */}))

	client := fake.NewClientset(
		node("n1", "172.30.0.1", "10.244.1.0/24"), // this node
		node("n2", "172.30.0.2", "10.244.2.0/24"),
		node("n3", "172.30.0.3", "10.244.3.0/24"),
		node("n4", "172.30.0.4", "10.244.9.0/24"),      // collides with the foreign route
		node("n5", "172.30.0.5", "fd00:10:244:5::/64"), // IPv6 only: ignored
	)
	confDir := filepath.Join(t.TempDir(), "net.d")
	c := &Controller{Client: client, NodeName: "n1", CNIConfDir: confDir, Resync: time.Second, Net: NewNetlink(h)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after cancel")
		}
	}()

	const foreignRoute = "10.244.9.0/24 via 172.30.0.254 proto 4"
	expect := func(what string, want ...string) {
		t.Helper()
		want = append(want, foreignRoute)
		slices.Sort(want)
		var got []string
		eventually(t, what, func() bool { got = kernelRoutes(t, h); return slices.Equal(got, want) })
	}
	expect("routes to n2 and n3",
		"10.244.2.0/24 via 172.30.0.2 proto 201",
		"10.244.3.0/24 via 172.30.0.3 proto 201")

	conf, err := os.ReadFile(filepath.Join(confDir, ConflistName))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"subnet": "10.244.1.0/24"`, `"gateway": "10.244.1.1"`, `"mtu": 1400`} {
		if !strings.Contains(string(conf), s) {
			t.Errorf("conflist lacks %s (the MTU must come from eth0, which holds n1's InternalIP):\n%s", s, conf)
		}
	}

	// A node goes away: its route goes, nothing else changes.
	must(t, client.CoreV1().Nodes().Delete(ctx, "n3", metav1.DeleteOptions{}))
	expect("n3's route deleted", "10.244.2.0/24 via 172.30.0.2 proto 201")

	// A node changes address: its route follows.
	n2 := node("n2", "172.30.0.12", "10.244.2.0/24")
	_, err = client.CoreV1().Nodes().Update(ctx, n2, metav1.UpdateOptions{})
	must(t, err)
	expect("n2's route replaced", "10.244.2.0/24 via 172.30.0.12 proto 201")

	// Someone deletes podnet's route behind its back: the resync puts it back.
	_, dst, _ := net.ParseCIDR("10.244.2.0/24")
	must(t, h.RouteDel(&netlink.Route{Dst: dst, Table: mainTable, Protocol: RouteProtocol}))
	expect("the resync to restore n2's route", "10.244.2.0/24 via 172.30.0.12 proto 201")

	// A new node joins.
	_, err = client.CoreV1().Nodes().Create(ctx, node("n6", "172.30.0.6", "10.244.6.0/24"), metav1.CreateOptions{})
	must(t, err)
	expect("n6's route added",
		"10.244.2.0/24 via 172.30.0.12 proto 201",
		"10.244.6.0/24 via 172.30.0.6 proto 201")
}

// TestNetlinkRoutes checks the Network methods alone in a throwaway namespace: replace is
// idempotent, delete of a missing route is not an error, Routes marks only RouteProtocol as
// ours, and a gateway that is not on a connected network fails with the kernel's reason.
func TestNetlinkRoutes(t *testing.T) {
	h := testNetns(t)
	nl := NewNetlink(h)
	r := Route{Dst: netip.MustParsePrefix("10.244.2.0/24"), Via: netip.MustParseAddr("172.30.0.2"), Node: "n2"}
	for range 2 {
		must(t, nl.ReplaceRoute(r))
	}
	got, err := nl.Routes()
	must(t, err)
	var ours []KernelRoute
	for _, k := range got {
		if k.Ours {
			ours = append(ours, k)
		}
	}
	if want := []KernelRoute{{Dst: r.Dst, Via: r.Via, Ours: true}}; !slices.Equal(ours, want) {
		t.Errorf("ours = %v, want %v (all: %v)", ours, want, got)
	}
	if !slices.ContainsFunc(got, func(k KernelRoute) bool { return k.Dst == netip.MustParsePrefix("172.30.0.0/24") && !k.Ours }) {
		t.Errorf("the connected route of eth0 is missing or marked ours: %v", got)
	}
	must(t, nl.DeleteRoute(r))
	must(t, nl.DeleteRoute(r)) // already gone: fine
	err = nl.ReplaceRoute(Route{Dst: netip.MustParsePrefix("10.244.3.0/24"), Via: netip.MustParseAddr("192.0.2.1")})
	if err == nil || !strings.Contains(err.Error(), "ip route replace 10.244.3.0/24 via 192.0.2.1 proto 201") {
		t.Errorf("unreachable gateway: err = %v", err)
	}

	mtu, err := nl.MTU(netip.MustParseAddr("172.30.0.1"))
	if err != nil || mtu != 1400 {
		t.Errorf("MTU(own address) = %d, %v; want 1400", mtu, err)
	}
	if _, err := nl.MTU(netip.MustParseAddr("172.30.0.99")); err == nil {
		t.Error("MTU of an address nobody holds, without a default route: no error")
	}
	eth0, _ := h.LinkByName("eth0")
	must(t, h.RouteAdd(&netlink.Route{Gw: net.ParseIP("172.30.0.254"), LinkIndex: eth0.Attrs().Index}))
	if mtu, err := nl.MTU(netip.Addr{}); err != nil || mtu != 1400 {
		t.Errorf("MTU via the default route = %d, %v; want 1400", mtu, err)
	}
}
