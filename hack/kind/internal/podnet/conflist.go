package podnet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
)

// ConflistName is the file podnet writes in the CNI configuration directory. containerd uses
// the lexicographically first conflist there, so "10-" puts it before anything a later
// package might drop in with a higher number.
const ConflistName = "10-podnet.conflist"

// IPAMDataDir is where host-local keeps its allocations. It is on /run (a tmpfs in a kind
// node) so that a restarted node container starts with no leaked pod IPs, as kindnetd does.
const IPAMDataDir = "/run/cni-ipam-state"

// DefaultMTU is the pod interface MTU when the node's main interface cannot be found.
const DefaultMTU = 1500

type conflist struct {
	CNIVersion string   `json:"cniVersion"`
	Name       string   `json:"name"`
	Plugins    []plugin `json:"plugins"`
}

type plugin struct {
	Type         string          `json:"type"`
	IPMasq       *bool           `json:"ipMasq,omitempty"`
	MTU          int             `json:"mtu,omitempty"`
	IPAM         *ipam           `json:"ipam,omitempty"`
	Capabilities map[string]bool `json:"capabilities,omitempty"`
}

type ipam struct {
	Type    string          `json:"type"`
	DataDir string          `json:"dataDir"`
	Ranges  [][]ipamRange   `json:"ranges"`
	Routes  []ipamRouteSpec `json:"routes"`
}

type ipamRange struct {
	Subnet  string `json:"subnet"`
	Gateway string `json:"gateway"`
}

type ipamRouteSpec struct {
	Dst string `json:"dst"`
	GW  string `json:"gw"`
}

// RenderConflist returns the CNI 1.0.0 network configuration list for a node whose pod CIDR
// is podCIDR (IPv4, at most /30 so that a gateway and at least one pod fit), with pod
// interfaces of the given MTU (68..65535 bytes). The list is:
//
//   - ptp: a veth pair per pod, the host side holding the gateway (the first address of
//     podCIDR) as a /32 and a /32 route to the pod. ipMasq is false: pod-to-pod traffic
//     between nodes must keep the pod's source IP (the Kubernetes network model), and ptp's
//     masquerade exempts only this node's own pod CIDR, so it would NAT every cross-node
//     pod connection to the node's IP. Nodes reach every pod CIDR through podnet's routes,
//     so nothing in the cluster needs the NAT; only traffic to outside the kind network
//     would, and this offline cluster has nothing outside to reach.
//   - host-local IPAM over podCIDR with the default route via the gateway, state in
//     IPAMDataDir.
//   - portmap with the portMappings capability, which hostPort needs.
//
// loopback is not listed: containerd sets up lo itself. The output is indented JSON ending in
// a newline, byte-for-byte stable for the same inputs (so the caller can compare files).
func RenderConflist(podCIDR netip.Prefix, mtu int) ([]byte, error) {
	if !podCIDR.IsValid() || !podCIDR.Addr().Is4() {
		return nil, fmt.Errorf("pod CIDR %s: not an IPv4 prefix", podCIDR)
	}
	if podCIDR.Masked() != podCIDR {
		return nil, fmt.Errorf("pod CIDR %s: host bits set", podCIDR)
	}
	if podCIDR.Bits() > 30 {
		return nil, fmt.Errorf("pod CIDR %s: too small, need at least a /30 for a gateway and a pod", podCIDR)
	}
	if mtu < 68 || mtu > 65535 {
		return nil, fmt.Errorf("mtu %d: outside 68..65535", mtu)
	}
	gw := podCIDR.Addr().Next().String()
	noMasq := false
	c := conflist{
		CNIVersion: "1.0.0",
		Name:       "podnet",
		Plugins: []plugin{
			{
				Type:   "ptp",
				IPMasq: &noMasq,
				MTU:    mtu,
				IPAM: &ipam{
					Type:    "host-local",
					DataDir: IPAMDataDir,
					Ranges:  [][]ipamRange{{{Subnet: podCIDR.String(), Gateway: gw}}},
					Routes:  []ipamRouteSpec{{Dst: "0.0.0.0/0", GW: gw}},
				},
			},
			{Type: "portmap", Capabilities: map[string]bool{"portMappings": true}},
		},
	}
	out, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode conflist: %w", err)
	}
	return append(out, '\n'), nil
}

// WriteFileIfChanged makes dir/name hold data: when the file already holds exactly data it
// does nothing and returns false; otherwise it writes a temporary file in dir, syncs it and
// renames it over dir/name (so containerd, which watches dir, never reads a partial file),
// creating dir (0755) if needed, and returns true. The file is 0644.
func WriteFileIfChanged(dir, name string, data []byte) (bool, error) {
	path := filepath.Join(dir, name)
	old, err := os.ReadFile(path)
	if err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("create %s: %w", dir, err)
	}
	// The temporary name starts with a dot and does not end in .conflist, so that a reader
	// scanning dir for *.conf/*.conflist/*.json never picks it up.
	tmp, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return false, fmt.Errorf("create temporary file in %s: %w", dir, err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return false, fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return false, fmt.Errorf("chmod %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return false, fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return false, fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return false, fmt.Errorf("rename to %s: %w", path, err)
	}
	return true, nil
}
