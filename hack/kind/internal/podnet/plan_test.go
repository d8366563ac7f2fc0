package podnet

import (
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// node builds a Node named name with the given pod CIDRs and InternalIP ("" for none).
func node(name, ip string, cidrs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	n.Spec.PodCIDRs = cidrs
	if len(cidrs) > 0 {
		n.Spec.PodCIDR = cidrs[0]
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}}
	if ip != "" {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	return n
}

func route(dst, via, node string) Route {
	return Route{Dst: netip.MustParsePrefix(dst), Via: netip.MustParseAddr(via), Node: node}
}

func ours(dst, via string) KernelRoute {
	return KernelRoute{Dst: netip.MustParsePrefix(dst), Via: netip.MustParseAddr(via), Ours: true}
}

func foreign(dst string) KernelRoute {
	return KernelRoute{Dst: netip.MustParsePrefix(dst)}
}

func TestPlanRoutes(t *testing.T) {
	cp := node("kind-control-plane", "172.18.0.2", "10.244.0.0/24")
	w1 := node("kind-worker", "172.18.0.3", "10.244.1.0/24")
	w2 := node("kind-worker2", "172.18.0.4", "10.244.2.0/24")
	tests := []struct {
		name   string
		self   string
		nodes  []*corev1.Node
		kernel []KernelRoute
		want   RoutePlan
	}{
		{
			name:  "fresh node: a route to every other node, none to itself",
			self:  "kind-worker",
			nodes: []*corev1.Node{w2, cp, w1},
			kernel: []KernelRoute{
				{Dst: netip.MustParsePrefix("0.0.0.0/0"), Via: netip.MustParseAddr("172.18.0.1")},
				foreign("172.18.0.0/16"),
			},
			want: RoutePlan{Replace: []Route{
				route("10.244.0.0/24", "172.18.0.2", "kind-control-plane"),
				route("10.244.2.0/24", "172.18.0.4", "kind-worker2"),
			}},
		},
		{
			name:   "steady state: nothing to do",
			self:   "kind-worker",
			nodes:  []*corev1.Node{cp, w1, w2},
			kernel: []KernelRoute{ours("10.244.0.0/24", "172.18.0.2"), ours("10.244.2.0/24", "172.18.0.4")},
			want:   RoutePlan{},
		},
		{
			name:   "node gone: its route deleted, the other kept",
			self:   "kind-worker",
			nodes:  []*corev1.Node{cp, w1},
			kernel: []KernelRoute{ours("10.244.0.0/24", "172.18.0.2"), ours("10.244.2.0/24", "172.18.0.4")},
			want:   RoutePlan{Delete: []Route{{Dst: netip.MustParsePrefix("10.244.2.0/24"), Via: netip.MustParseAddr("172.18.0.4")}}},
		},
		{
			name:   "node moved to a new address: route replaced",
			self:   "kind-worker",
			nodes:  []*corev1.Node{cp, w1, node("kind-worker2", "172.18.0.9", "10.244.2.0/24")},
			kernel: []KernelRoute{ours("10.244.0.0/24", "172.18.0.2"), ours("10.244.2.0/24", "172.18.0.4")},
			want:   RoutePlan{Replace: []Route{route("10.244.2.0/24", "172.18.0.9", "kind-worker2")}},
		},
		{
			name:   "node's pod CIDR changed: new route set, old one deleted",
			self:   "kind-worker",
			nodes:  []*corev1.Node{cp, w1, node("kind-worker2", "172.18.0.4", "10.244.7.0/24")},
			kernel: []KernelRoute{ours("10.244.0.0/24", "172.18.0.2"), ours("10.244.2.0/24", "172.18.0.4")},
			want: RoutePlan{
				Replace: []Route{route("10.244.7.0/24", "172.18.0.4", "kind-worker2")},
				Delete:  []Route{{Dst: netip.MustParsePrefix("10.244.2.0/24"), Via: netip.MustParseAddr("172.18.0.4")}},
			},
		},
		{
			name:  "node without pod CIDR yet: skipped silently",
			self:  "kind-worker",
			nodes: []*corev1.Node{cp, w1, node("kind-worker2", "172.18.0.4")},
			want:  RoutePlan{Replace: []Route{route("10.244.0.0/24", "172.18.0.2", "kind-control-plane")}},
		},
		{
			name:  "node without InternalIP: noted, no route",
			self:  "kind-worker",
			nodes: []*corev1.Node{cp, w1, node("kind-worker2", "", "10.244.2.0/24")},
			want: RoutePlan{
				Replace: []Route{route("10.244.0.0/24", "172.18.0.2", "kind-control-plane")},
				Notes:   []Note{{"kind-worker2", "no IPv4 InternalIP: no route to its pods"}},
			},
		},
		{
			name: "dual stack: IPv4 routed, IPv6 CIDR noted and ignored, IPv6 InternalIP skipped",
			self: "kind-worker",
			nodes: []*corev1.Node{w1, func() *corev1.Node {
				n := node("kind-worker2", "", "10.244.2.0/24", "fd00:10:244:2::/64")
				n.Status.Addresses = append(n.Status.Addresses,
					corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "fc00:f853:ccd:e793::4"},
					corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "172.18.0.4"})
				return n
			}()},
			want: RoutePlan{
				Replace: []Route{route("10.244.2.0/24", "172.18.0.4", "kind-worker2")},
				Notes:   []Note{{"kind-worker2", "podCIDR fd00:10:244:2::/64 is not IPv4: ignored (podnet routes IPv4 only)"}},
			},
		},
		{
			name:  "legacy spec.podCIDR only",
			self:  "kind-worker",
			nodes: []*corev1.Node{w1, {ObjectMeta: metav1.ObjectMeta{Name: "old"}, Spec: corev1.NodeSpec{PodCIDR: "10.244.5.0/24"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.18.0.5"}}}}},
			want:  RoutePlan{Replace: []Route{route("10.244.5.0/24", "172.18.0.5", "old")}},
		},
		{
			name:   "a route podnet did not make is never replaced or deleted",
			self:   "kind-worker",
			nodes:  []*corev1.Node{cp, w1},
			kernel: []KernelRoute{foreign("10.244.0.0/24"), foreign("10.244.9.0/24")},
			want: RoutePlan{Notes: []Note{
				{"kind-control-plane", "a route to 10.244.0.0/24 exists that podnet did not make: left alone"},
			}},
		},
		{
			name:   "another node claiming our own CIDR gets no route (and the stale one goes)",
			self:   "kind-worker",
			nodes:  []*corev1.Node{cp, w1, node("rogue", "172.18.0.8", "10.244.1.0/25")},
			kernel: []KernelRoute{ours("10.244.0.0/24", "172.18.0.2"), ours("10.244.1.0/25", "172.18.0.8")},
			want: RoutePlan{
				Delete: []Route{{Dst: netip.MustParsePrefix("10.244.1.0/25"), Via: netip.MustParseAddr("172.18.0.8")}},
				Notes:  []Note{{"rogue", "podCIDR 10.244.1.0/25 overlaps this node's own pod CIDR: no route"}},
			},
		},
		{
			name:  "two nodes with the same CIDR: first by name wins",
			self:  "kind-control-plane",
			nodes: []*corev1.Node{cp, node("b", "172.18.0.6", "10.244.3.0/24"), node("a", "172.18.0.5", "10.244.3.0/24")},
			want: RoutePlan{
				Replace: []Route{route("10.244.3.0/24", "172.18.0.5", "a")},
				Notes:   []Note{{"b", "podCIDR 10.244.3.0/24 is also node a's: no route"}},
			},
		},
		{
			name:  "unparsable and non-canonical CIDRs noted",
			self:  "kind-control-plane",
			nodes: []*corev1.Node{cp, node("x", "172.18.0.5", "10.244.3.1/24"), node("y", "172.18.0.6", "bogus")},
			want: RoutePlan{Notes: []Note{
				{"x", "podCIDR 10.244.3.1/24 has host bits set: ignored"},
				{"y", `podCIDR "bogus" does not parse: ignored`},
			}},
		},
		{
			name:   "own node unknown: still routes to the others",
			self:   "not-registered",
			nodes:  []*corev1.Node{cp},
			kernel: nil,
			want:   RoutePlan{Replace: []Route{route("10.244.0.0/24", "172.18.0.2", "kind-control-plane")}},
		},
		{
			name:   "no nodes at all: every route podnet made goes",
			self:   "kind-worker",
			kernel: []KernelRoute{ours("10.244.2.0/24", "172.18.0.4"), ours("10.244.0.0/24", "172.18.0.2"), foreign("10.244.9.0/24")},
			want: RoutePlan{Delete: []Route{
				{Dst: netip.MustParsePrefix("10.244.0.0/24"), Via: netip.MustParseAddr("172.18.0.2")},
				{Dst: netip.MustParsePrefix("10.244.2.0/24"), Via: netip.MustParseAddr("172.18.0.4")},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PlanRoutes(tt.self, tt.nodes, tt.kernel)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("PlanRoutes:\n got  %+v\n want %+v", got, tt.want)
			}
		})
	}
}
