package podnet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
)

// cniPluginDir returns the directory holding the containernetworking plugins podnet's
// conflist names (/opt/cni/bin in a kind node, /usr/lib/cni from Debian's package), or skips.
func cniPluginDir(t *testing.T) string {
	t.Helper()
	for _, d := range []string{"/opt/cni/bin", "/usr/lib/cni"} {
		ok := true
		for _, p := range []string{"ptp", "host-local", "portmap"} {
			if _, err := os.Stat(filepath.Join(d, p)); err != nil {
				ok = false
			}
		}
		if ok {
			return d
		}
	}
	t.Skip("needs the ptp, host-local and portmap CNI plugins (apt-get install containernetworking-plugins)")
	return ""
}

// cniNode is a "node" of the data path test: a network namespace with eth0, podnet's
// conflist and podnet's routes, and one pod namespace wired by the real plugins.
type cniNode struct {
	name, nsName string
	h            *netlink.Handle
	confDir      string
	pod          netns.NsHandle
	podNsName    string
	podIP        netip.Addr
}

// runPlugin runs one CNI plugin the way containerd's libcni does (config on stdin, the
// CNI_* environment) inside the node's namespace, and returns its stdout.
func runPlugin(t *testing.T, dir string, n *cniNode, command string, conf map[string]any) []byte {
	t.Helper()
	in, err := json.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", n.nsName, filepath.Join(dir, conf["type"].(string)))
	cmd.Env = []string{
		"CNI_COMMAND=" + command,
		"CNI_CONTAINERID=pod-on-" + n.name,
		"CNI_NETNS=/var/run/netns/" + n.podNsName,
		"CNI_IFNAME=eth0",
		"CNI_PATH=" + dir,
		"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
	}
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s on %s: %v\nstdout: %s\nstderr: %s\nconfig: %s", command, conf["type"], n.name, err, out, stderr.String(), in)
	}
	return out
}

// addPod runs the conflist podnet wrote for n (ADD through every plugin, each getting the
// previous result, as libcni chains them) for n's pod, with a hostPort 8080 -> 80 mapping.
func addPod(t *testing.T, dir string, n *cniNode, ipamDir string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(n.confDir, ConflistName))
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		CNIVersion string           `json:"cniVersion"`
		Name       string           `json:"name"`
		Plugins    []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatalf("conflist does not parse: %v", err)
	}
	var prev json.RawMessage
	for _, p := range list.Plugins {
		p["cniVersion"], p["name"] = list.CNIVersion, list.Name
		if ipam, ok := p["ipam"].(map[string]any); ok {
			ipam["dataDir"] = ipamDir // not the host's /run/cni-ipam-state
		}
		if prev != nil {
			p["prevResult"] = prev
		}
		if caps, ok := p["capabilities"].(map[string]any); ok && caps["portMappings"] == true {
			p["runtimeConfig"] = map[string]any{"portMappings": []map[string]any{{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}}}
		}
		prev = runPlugin(t, dir, n, "ADD", p)
	}
	var res struct {
		IPs []struct {
			Address string `json:"address"`
			Gateway string `json:"gateway"`
		} `json:"ips"`
	}
	if err := json.Unmarshal(prev, &res); err != nil || len(res.IPs) != 1 {
		t.Fatalf("CNI result %s: %v", prev, err)
	}
	p := netip.MustParsePrefix(res.IPs[0].Address)
	n.podIP = p.Addr()
	t.Logf("%s: pod got %s, gateway %s", n.name, p, res.IPs[0].Gateway)
}

// inNetns runs f on a fresh OS thread switched into ns. The thread is never switched back:
// it stays locked and dies with the goroutine, so no other goroutine ever runs in ns.
func inNetns(ns netns.NsHandle, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := netns.Set(ns); err != nil {
			errc <- fmt.Errorf("enter netns: %w", err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// serveRemoteAddr listens on :port inside ns and answers every connection with the address
// the connection came from, as the server sees it.
func serveRemoteAddr(t *testing.T, ns netns.NsHandle, port int) {
	t.Helper()
	var ln net.Listener
	must(t, inNetns(ns, func() (err error) { ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", port)); return err }))
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			_, _ = io.WriteString(c, host) // the client's read checks what arrived
			c.Close()
		}
	}()
}

// dialFrom connects from inside ns to addr and returns what the server said.
func dialFrom(ns netns.NsHandle, addr string) (string, error) {
	var got []byte
	err := inNetns(ns, func() error {
		c, err := net.DialTimeout("tcp4", addr, 3*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := c.SetDeadline(time.Now().Add(3 * time.Second)); err != nil {
			return err
		}
		got, err = io.ReadAll(c)
		return err
	})
	return string(got), err
}

// TestDataPathInNetns wires two "nodes" (network namespaces joined by a veth, like two kind
// node containers on the docker network) with podnet's own conflist run through the real
// ptp, host-local and portmap plugins, and podnet's routes; then checks that a pod reaches
// the other node's pod with its source IP intact (ipMasq false) and that a hostPort works.
func TestDataPathInNetns(t *testing.T) {
	dir := cniPluginDir(t)
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("needs iptables for the portmap plugin")
	}
	a := &cniNode{name: "a"}
	b := &cniNode{name: "b"}
	var nsB netns.NsHandle
	a.nsName, _, a.h = newNetns(t, "a")
	b.nsName, nsB, b.h = newNetns(t, "b")
	must(t, a.h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(nsB))}))
	linkUpWithAddr(t, a.h, "eth0", "172.30.0.1/24")
	linkUpWithAddr(t, b.h, "eth0", "172.30.0.2/24")
	nodes := []*corev1.Node{node("a", "172.30.0.1", "10.244.1.0/24"), node("b", "172.30.0.2", "10.244.2.0/24")}
	for _, n := range []*cniNode{a, b} {
		// Forwarding is per namespace; what Run does through IPForwardPath in a real node.
		if out, err := exec.Command("ip", "netns", "exec", n.nsName, "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward").CombinedOutput(); err != nil {
			t.Fatalf("enable forwarding in %s: %v: %s", n.nsName, err, out)
		}
		n.confDir = t.TempDir()
		c := &Controller{NodeName: n.name, CNIConfDir: n.confDir, Net: NewNetlink(n.h)}
		must(t, c.Reconcile(nodes))
		var pod netns.NsHandle
		n.podNsName, pod, _ = newNetns(t, "pod-"+n.name)
		n.pod = pod
		addPod(t, dir, n, t.TempDir())
	}
	if !netip.MustParsePrefix("10.244.1.0/24").Contains(a.podIP) || !netip.MustParsePrefix("10.244.2.0/24").Contains(b.podIP) {
		t.Fatalf("pod IPs %s, %s are not in their nodes' pod CIDRs", a.podIP, b.podIP)
	}

	// Pod to pod across nodes: the server sees the client pod's own IP.
	serveRemoteAddr(t, b.pod, 80)
	got, err := dialFrom(a.pod, netip.AddrPortFrom(b.podIP, 80).String())
	if err != nil {
		t.Fatalf("pod a -> pod b: %v", err)
	}
	if got != a.podIP.String() {
		t.Errorf("pod b saw pod a as %s, want %s (no NAT between pods)", got, a.podIP)
	}

	// hostPort: node b -> node a's address:8080 reaches pod a's :80 through portmap's DNAT.
	serveRemoteAddr(t, a.pod, 80)
	got, err = dialFrom(nsB, "172.30.0.1:8080")
	if err != nil {
		t.Fatalf("node b -> node a hostPort 8080: %v", err)
	}
	if got != "172.30.0.2" {
		t.Errorf("pod a saw the hostPort client as %s, want node b's 172.30.0.2", got)
	}

	// The pod side looks as kindnetd's did: one address in the pod CIDR, default via .1.
	out, err := exec.Command("ip", "-n", a.podNsName, "-4", "route", "show").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "default via 10.244.1.1 dev eth0") {
		t.Errorf("pod a routes: %v\n%s", err, out)
	}
}
