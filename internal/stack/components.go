package stack

import (
	"strconv"
	"time"
)

// Cloud is the fake cloud's start-up configuration: what cmd/fakecloud's flags say.
type Cloud struct {
	// ID names its process and log; empty means "fakecloud".
	ID string
	// Listen is host:port of its HTTP server (--listen).
	Listen string
	// DataDir is the durable store's folder (--data-dir); empty: nothing persists.
	DataDir string
	// Seed is the seed YAML file (--seed); empty: the built-in seed.
	Seed string
	// TokensFile is the tokens YAML (--auth=tokens --tokens-file); empty: the fake cloud's
	// default auth.
	TokensFile string
	// ConsoleNodes are the node plugins whose /debug/capacity the console (GET /ui) plots.
	ConsoleNodes []ConsoleNode
	// ConsoleKubeconfig turns on the console's cluster view (--console-kubeconfig).
	ConsoleKubeconfig string
	// Verbosity is klog's -v; 0 leaves the flag out (its default).
	Verbosity int
	// Extra are more flags, last (a user's FAKECLOUD_ARGS).
	Extra []string
}

// ConsoleNode is one --console-node=NAME=URL: a node plugin's HTTP base URL.
type ConsoleNode struct{ Name, URL string }

func (c Cloud) id() string {
	if c.ID == "" {
		return ProgramFakeCloud
	}
	return c.ID
}

// URL is the fake cloud's base URL, http://<Listen>.
func (c Cloud) URL() string { return "http://" + c.Listen }

// Args are the fake cloud's flags.
func (c Cloud) Args() []string {
	args := []string{"--listen=" + c.Listen}
	args = appendIf(args, "--data-dir=", c.DataDir)
	args = appendIf(args, "--seed=", c.Seed)
	if c.TokensFile != "" {
		args = append(args, "--auth=tokens", "--tokens-file="+c.TokensFile)
	}
	for _, n := range c.ConsoleNodes {
		args = append(args, "--console-node="+n.Name+"="+n.URL)
	}
	args = appendIf(args, "--console-kubeconfig=", c.ConsoleKubeconfig)
	args = appendVerbosity(args, c.Verbosity)
	return append(args, c.Extra...)
}

// Plugin is one driver process's start-up configuration: what cmd/driver's flags
// (csi.Options) say. Empty fields leave their flag out (the driver's default).
type Plugin struct {
	// Name says what it is in progress lines and errors ("controller plugin").
	Name string
	// ID names its process and log ("driver-controller").
	ID string
	// Mode is controller, node or all (--mode).
	Mode string
	// NodeID is the cloud instance it serves (--node-id), for node and all.
	NodeID string
	// Socket is the path of its CSI unix socket (--endpoint=unix://<Socket>).
	Socket string
	// CloudURL and CloudTokenFile say where the cloud is and the file of its bearer token.
	CloudURL, CloudTokenFile string
	// StateDir, VolumeDataDir and KubeletRoot are its folders (--state-dir,
	// --volume-data-dir, --kubelet-root).
	StateDir, VolumeDataDir, KubeletRoot string
	// HTTPAddr is host:port of /healthz, /readyz, /metrics and /debug/capacity.
	HTTPAddr string
	// Kubeconfig and NodeName turn on a node plugin's start-up cluster check.
	Kubeconfig, NodeName string
	// CapacityMinInterval is --capacity-min-interval; 0 leaves it out.
	CapacityMinInterval time.Duration
	// Verbosity is klog's --v; 0 leaves the flag out (its default).
	Verbosity int
	// Extra are more flags, last (capacity policy, a user's DRIVER_ARGS).
	Extra []string
}

// Endpoint is the plugin's CSI endpoint, unix://<Socket>.
func (p Plugin) Endpoint() string { return "unix://" + p.Socket }

// Args are the driver's flags.
func (p Plugin) Args() []string {
	args := []string{"--mode=" + p.Mode}
	args = appendIf(args, "--node-id=", p.NodeID)
	args = append(args, "--endpoint="+p.Endpoint())
	for _, f := range []struct{ flag, value string }{
		{"--cloud-url=", p.CloudURL}, {"--cloud-token-file=", p.CloudTokenFile},
		{"--state-dir=", p.StateDir}, {"--kubelet-root=", p.KubeletRoot}, {"--volume-data-dir=", p.VolumeDataDir},
		{"--http-addr=", p.HTTPAddr}, {"--kubeconfig=", p.Kubeconfig}, {"--node-name=", p.NodeName},
	} {
		args = appendIf(args, f.flag, f.value)
	}
	if p.CapacityMinInterval > 0 {
		args = append(args, "--capacity-min-interval="+p.CapacityMinInterval.String())
	}
	args = appendVerbosity(args, p.Verbosity)
	return append(args, p.Extra...)
}

func appendIf(args []string, flag, value string) []string {
	if value == "" {
		return args
	}
	return append(args, flag+value)
}

func appendVerbosity(args []string, v int) []string {
	if v == 0 {
		return args
	}
	return append(args, "--v="+strconv.Itoa(v))
}
