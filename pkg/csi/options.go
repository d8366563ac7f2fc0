package csi

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/backoff"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/capacity"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/clustercheck"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/nodestate"
)

// Driver modes (--mode): which CSI services one process serves.
const (
	ModeController = "controller"
	ModeNode       = "node"
	ModeAll        = "all"
)

// Options is the driver's command line (brief, "Command lines"). Zero values are not
// meaningful; start from DefaultOptions or AddFlags.
type Options struct {
	// Mode is ModeController, ModeNode or ModeAll (--mode).
	Mode string
	// Endpoint is the CSI endpoint, unix:///path/csi.sock or tcp://host:port (--endpoint).
	Endpoint string
	// NodeID is the cloud instance ID of this node, required in node and all modes (--node-id).
	NodeID string
	// CloudURL is the fake cloud's base URL, http:// or https:// (--cloud-url).
	CloudURL string
	// CloudTokenFile holds the bearer token for the cloud; empty sends none (--cloud-token-file).
	CloudTokenFile string
	// StateDir holds the node's state: staged markers, the capacity state (capacity.json) and
	// the node identity (node.json: node ID and zone, see Topology.Zone), and the volumes'
	// data unless VolumeDataDir is set (--state-dir); package nodestate has the layout. One
	// node plugin at a time: Driver.Run locks <StateDir>/.lock.
	StateDir string
	// VolumeDataDir holds the volumes' data (NodeConfig.DataDir), the fake cloud's disk
	// storage: a folder every node of the cluster shares makes a volume's data follow it to
	// the node it is attached to next (--volume-data-dir). Empty: <StateDir>/volumes. In
	// controller mode it is the same shared folder, where CreateSnapshot keeps each snapshot's
	// data for the volumes restored from it (.snapshots/<snapshotID>); empty: none is kept.
	VolumeDataDir string
	// KubeletRoot is the kubelet's root directory (its --root-dir) as the node plugin sees
	// it: every staging_target_path and target_path must be a clean absolute path strictly
	// inside it, else INVALID_ARGUMENT (--kubelet-root, default DefaultKubeletRoot). A clean
	// absolute path, not "/".
	KubeletRoot string
	// HTTPAddr is host:port of the /healthz, /metrics, /debug/capacity server; empty: off
	// (--http-addr).
	HTTPAddr string
	// CapacityStaleAfter (a duration such as 5m), CapacityMaxStep (slots per refresh),
	// CapacityMinInterval (a duration such as 5s) and QuotaShare (none|even) configure the
	// capacity policy (pkg/csi/capacity.Config; flags --capacity-stale-after,
	// --capacity-max-step, --capacity-min-interval, --quota-share).
	CapacityStaleAfter  time.Duration
	CapacityMaxStep     int64
	CapacityMinInterval time.Duration
	QuotaShare          string
	// CapacityStabilityWindow is how long a higher capacity must hold before the reported
	// value starts to rise, a duration such as 30s (--capacity-stability-window; 0: no
	// hold). CapacityMaxStabilityWindow is how far flap damping may stretch that window, at
	// least CapacityStabilityWindow (--capacity-max-stability-window; equal: no damping).
	// e2e runs set both short (e.g. 2s and 8s) to see increases within a few periods.
	CapacityStabilityWindow    time.Duration
	CapacityMaxStabilityWindow time.Duration
	// CapacityIncreaseSpread staggers increases across a fleet: each node adds its own
	// fixed share of it (from its node ID) to the stability window, so that a change every
	// node sees at once is written to CSINode over the spread instead of within one kubelet
	// period (--capacity-increase-spread, a duration such as 1m; 0, the default: off).
	// Decreases are never delayed. docs/fleet-scale.md.
	CapacityIncreaseSpread time.Duration
	// PublishBackoffInitial and PublishBackoffMax bound the window in which the controller
	// answers publishes to a node the cloud just called full with RESOURCE_EXHAUSTED without
	// asking it again: the first window, doubled per further refusal up to the max
	// (--publish-backoff-initial, default 5s; --publish-backoff-max, default 1m; package
	// backoff). Keep the max below the kubelet's ~2 min attach wait.
	PublishBackoffInitial time.Duration
	PublishBackoffMax     time.Duration
	// DynamicCapacity makes the node plugin report the capacity policy's value (default
	// true). False reports a static count instead: the instance's slots (attach limit −
	// out-of-band slots, at least 1) read from the cloud once and never changed, the count a
	// cluster without mutable CSINode allocatable (KEP-4876) needs (--dynamic-capacity).
	// The Node label DynamicCapacityNodeLabel ("true"/"false"), read at start with NodeName
	// and API access, overrides it per node: the canary switch of docs/upgrade.md.
	DynamicCapacity bool
	// Kubeconfig is the kubeconfig the node plugin reads the cluster with at start; empty: the
	// pod's service account when running in a pod, else no cluster check (--kubeconfig).
	// NodeName is this node's Kubernetes name, for the kubelet version check; empty: not
	// checked (--node-name). ClusterCheckTimeout bounds the start-up check, a duration such
	// as 30s (--cluster-check-timeout). See package clustercheck and docs/upgrade.md.
	Kubeconfig          string
	NodeName            string
	ClusterCheckTimeout time.Duration
	// ShowVersion prints the version and exits (--version).
	ShowVersion bool
	// Version is the driver version reported by GetPluginInfo; set by the binary, not a flag.
	Version string
}

// DynamicCapacityNodeLabel is the Node label that switches one node between the capacity
// policy ("true") and the static count ("false"), overriding --dynamic-capacity; read once at
// node plugin start, with --node-name and API access (clustercheck.Decide). It is the canary
// switch of docs/upgrade.md: one DaemonSet, some nodes labelled.
const DynamicCapacityNodeLabel = "fakecloud.dev/dynamic-capacity"

// DefaultOptions returns the flag defaults.
func DefaultOptions() Options {
	c := capacity.DefaultConfig()
	b := backoff.DefaultConfig()
	return Options{
		Mode:                ModeAll,
		Endpoint:            "unix:///csi/csi.sock",
		CloudURL:            "http://127.0.0.1:8080",
		StateDir:            "/var/lib/fakecloud-csi",
		KubeletRoot:         DefaultKubeletRoot,
		CapacityStaleAfter:  c.StaleAfter,
		CapacityMaxStep:     c.MaxStep,
		CapacityMinInterval: c.MinInterval,
		QuotaShare:          string(c.QuotaShare),

		CapacityStabilityWindow:    c.StabilityWindow,
		CapacityMaxStabilityWindow: c.MaxStabilityWindow,
		CapacityIncreaseSpread:     c.IncreaseSpread,
		PublishBackoffInitial:      b.CapacityInitial,
		PublishBackoffMax:          b.CapacityMax,
		DynamicCapacity:            true,
		ClusterCheckTimeout:        30 * time.Second,
	}
}

// AddFlags registers every option on fs with DefaultOptions' values as defaults.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	d := DefaultOptions()
	fs.StringVar(&o.Mode, "mode", d.Mode, "CSI services to serve: controller, node or all")
	fs.StringVar(&o.Endpoint, "endpoint", d.Endpoint, "CSI endpoint: unix:///path/csi.sock or tcp://host:port")
	fs.StringVar(&o.NodeID, "node-id", d.NodeID, "cloud instance ID of this node (required in node and all modes)")
	fs.StringVar(&o.CloudURL, "cloud-url", d.CloudURL, "base URL of the fake cloud")
	fs.StringVar(&o.CloudTokenFile, "cloud-token-file", d.CloudTokenFile, "file holding the cloud bearer token (empty: no token)")
	fs.StringVar(&o.StateDir, "state-dir", d.StateDir, "directory for the node's state (staged volumes, capacity state, node identity) and, without --volume-data-dir, the volumes' data; one node plugin per directory (locked)")
	fs.StringVar(&o.VolumeDataDir, "volume-data-dir", d.VolumeDataDir, "directory for the volumes' data (the fake cloud's disks), shared by every node of the cluster so that data follows a volume to its next node; empty: <state-dir>/volumes. In controller mode the same folder, where each snapshot's data is kept for restores; empty: restored volumes start empty")
	fs.StringVar(&o.KubeletRoot, "kubelet-root", d.KubeletRoot, "the kubelet's root directory (its --root-dir): staging and target paths outside it, or not clean (\"..\"), or over 4095 bytes are refused with INVALID_ARGUMENT")
	fs.StringVar(&o.HTTPAddr, "http-addr", d.HTTPAddr, "host:port for /healthz, /readyz, /metrics and /debug/capacity (empty: off)")
	fs.DurationVar(&o.CapacityStaleAfter, "capacity-stale-after", d.CapacityStaleAfter, "how long the last known good capacity is reported while the cloud does not answer")
	fs.Int64Var(&o.CapacityMaxStep, "capacity-max-step", d.CapacityMaxStep, "largest capacity increase per refresh, in slots (0: no limit)")
	fs.DurationVar(&o.CapacityMinInterval, "capacity-min-interval", d.CapacityMinInterval, "minimum time between two capacity lookups in the cloud")
	fs.StringVar(&o.QuotaShare, "quota-share", d.QuotaShare, "share of the account attachment-quota headroom a node counts on: none or even")
	fs.DurationVar(&o.CapacityStabilityWindow, "capacity-stability-window", d.CapacityStabilityWindow, "how long a higher capacity must hold before the reported value rises (0: no hold)")
	fs.DurationVar(&o.CapacityMaxStabilityWindow, "capacity-max-stability-window", d.CapacityMaxStabilityWindow, "longest stability window flap damping may stretch to; >= --capacity-stability-window (equal: no damping)")
	fs.DurationVar(&o.CapacityIncreaseSpread, "capacity-increase-spread", d.CapacityIncreaseSpread, "each node adds its own fixed share of this to the stability window, spreading a fleet-wide increase over it (0: off); decreases are never delayed")
	fs.DurationVar(&o.PublishBackoffInitial, "publish-backoff-initial", d.PublishBackoffInitial, "first window in which publishes to a node the cloud called full get RESOURCE_EXHAUSTED without asking the cloud")
	fs.DurationVar(&o.PublishBackoffMax, "publish-backoff-max", d.PublishBackoffMax, "longest such window (repeated refusals double it)")
	fs.BoolVar(&o.DynamicCapacity, "dynamic-capacity", d.DynamicCapacity, "report the capacity policy's value as max_volumes_per_node; false: a static count (attach limit - out-of-band slots) read once at start. The node label "+DynamicCapacityNodeLabel+"=true|false overrides it (needs --node-name)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", d.Kubeconfig, "kubeconfig for the start-up cluster check (empty: the pod's service account in a pod, else no check)")
	fs.StringVar(&o.NodeName, "node-name", d.NodeName, "Kubernetes node name, for the cluster check of the kubelet version (empty: not checked)")
	fs.DurationVar(&o.ClusterCheckTimeout, "cluster-check-timeout", d.ClusterCheckTimeout, "how long the node plugin retries the start-up cluster check before it keeps --dynamic-capacity as given")
	fs.BoolVar(&o.ShowVersion, "version", false, "print the version and exit")
}

// Validate reports every problem of o at once (errors.Join), each naming the flags as the
// user typed them (e.g. "--capacity-max-step must be >= 0"); nil when o is usable. The
// capacity flags are checked with capacity.Config's own rules (Problems) named as flags; the
// settings that have no flag keep their valid defaults. --cloud-token-file is read, as the
// cloud client will.
func (o *Options) Validate() error {
	var errs []error
	node, controller := false, false
	switch o.Mode {
	case ModeController:
		controller = true
	case ModeNode:
		node = true
	case ModeAll:
		node, controller = true, true
	default:
		errs = append(errs, fmt.Errorf("--mode must be controller, node or all, got %q", o.Mode))
	}
	if _, _, err := ParseEndpoint(o.Endpoint); err != nil {
		errs = append(errs, fmt.Errorf("--endpoint: %w", err))
	}
	if node && o.NodeID == "" {
		errs = append(errs, fmt.Errorf("--node-id is required in mode %s", o.Mode))
	}
	if err := cloud.CheckBaseURL(o.CloudURL); err != nil {
		errs = append(errs, fmt.Errorf("--cloud-url: %w", err))
	}
	if o.CloudTokenFile != "" {
		if b, err := os.ReadFile(o.CloudTokenFile); err != nil {
			errs = append(errs, fmt.Errorf("--cloud-token-file: %w", err))
		} else if strings.TrimSpace(string(b)) == "" {
			errs = append(errs, fmt.Errorf("--cloud-token-file %s is empty", o.CloudTokenFile))
		}
	}
	if node && (o.StateDir == "" || !filepath.IsAbs(o.StateDir)) {
		errs = append(errs, fmt.Errorf("--state-dir must be an absolute path in mode %s, got %q", o.Mode, o.StateDir))
	}
	if o.VolumeDataDir != "" && (!filepath.IsAbs(o.VolumeDataDir) || filepath.Clean(o.VolumeDataDir) != o.VolumeDataDir) {
		errs = append(errs, fmt.Errorf("--volume-data-dir must be a clean absolute path, got %q", o.VolumeDataDir))
	}
	if node && (!filepath.IsAbs(o.KubeletRoot) || filepath.Clean(o.KubeletRoot) != o.KubeletRoot || o.KubeletRoot == "/" || len(o.KubeletRoot) > maxPathBytes) {
		errs = append(errs, fmt.Errorf("--kubelet-root must be a clean absolute path other than / in mode %s, got %q", o.Mode, o.KubeletRoot))
	}
	if o.HTTPAddr != "" {
		if _, _, err := net.SplitHostPort(o.HTTPAddr); err != nil {
			errs = append(errs, fmt.Errorf("--http-addr must be host:port: %w", err))
		}
	}
	if node {
		errs = append(errs, o.validateCapacity()...)
		if o.ClusterCheckTimeout <= 0 {
			errs = append(errs, fmt.Errorf("--cluster-check-timeout must be > 0, got %s", o.ClusterCheckTimeout))
		}
		if o.Kubeconfig != "" {
			if _, err := os.Stat(o.Kubeconfig); err != nil {
				errs = append(errs, fmt.Errorf("--kubeconfig: %w", err))
			}
		}
	}
	if controller {
		errs = append(errs, o.validatePublishBackoff()...)
	}
	return errors.Join(errs...)
}

// validateCapacity checks the capacity flags with the rules of capacity.Config, in flag terms.
func (o *Options) validateCapacity() []error {
	return o.CapacityConfig().Problems(func(setting string) string {
		if setting == "quota-share" {
			return "--quota-share"
		}
		return "--capacity-" + setting
	})
}

// validatePublishBackoff checks the publish backoff flags, the capacity rule of
// backoff.Config.Validate in flag terms.
func (o *Options) validatePublishBackoff() []error {
	var errs []error
	if o.PublishBackoffInitial <= 0 {
		errs = append(errs, fmt.Errorf("--publish-backoff-initial must be > 0, got %s", o.PublishBackoffInitial))
	}
	if o.PublishBackoffMax < o.PublishBackoffInitial {
		errs = append(errs, fmt.Errorf("--publish-backoff-max (%s) must be >= --publish-backoff-initial (%s)", o.PublishBackoffMax, o.PublishBackoffInitial))
	}
	return errs
}

// PublishBackoffConfig turns the publish backoff flags into the controller's backoff
// configuration; the windows for transient errors keep their defaults.
func (o *Options) PublishBackoffConfig() backoff.Config {
	b := backoff.DefaultConfig()
	b.CapacityInitial, b.CapacityMax = o.PublishBackoffInitial, o.PublishBackoffMax
	return b
}

// ClusterCheckConfig is the input of the node plugin's start-up step clustercheck.Decide:
// this driver's name, the node's IDs, --dynamic-capacity and --cluster-check-timeout.
func (o *Options) ClusterCheckConfig() clustercheck.Config {
	return clustercheck.Config{
		DriverName: DriverName, NodeID: o.NodeID, NodeName: o.NodeName, ModeLabel: DynamicCapacityNodeLabel,
		DynamicCapacity: o.DynamicCapacity, Timeout: o.ClusterCheckTimeout,
	}
}

// CapacityConfig turns the capacity flags into the capacity policy's configuration, with the
// state kept in <StateDir>/capacity.json.
func (o *Options) CapacityConfig() capacity.Config {
	c := capacity.DefaultConfig()
	c.StaleAfter = o.CapacityStaleAfter
	c.MaxStep = o.CapacityMaxStep
	c.MinInterval = o.CapacityMinInterval
	c.QuotaShare = capacity.QuotaShare(o.QuotaShare)
	c.StabilityWindow = o.CapacityStabilityWindow
	c.MaxStabilityWindow = o.CapacityMaxStabilityWindow
	c.IncreaseSpread = o.CapacityIncreaseSpread
	if o.StateDir != "" {
		c.StatePath = nodestate.NewDir(o.StateDir).CapacityStateFile()
	}
	return c
}

// MaxUnixSocketPath is the longest unix socket path Linux binds, in bytes: sun_path holds 108
// bytes including the terminating NUL.
const MaxUnixSocketPath = 107

// ParseEndpoint splits a CSI endpoint into a network ("unix" or "tcp") and an address:
// unix:///abs/path.sock → ("unix", "/abs/path.sock"), tcp://host:port → ("tcp", "host:port").
// A unix path must be absolute and at most MaxUnixSocketPath bytes (a longer one fails to bind
// with a bare "invalid argument").
func ParseEndpoint(ep string) (network, addr string, err error) {
	switch {
	case strings.HasPrefix(ep, "unix://"):
		addr = strings.TrimPrefix(ep, "unix://")
		if addr == "" || !filepath.IsAbs(addr) {
			return "", "", fmt.Errorf("unix endpoint needs an absolute path, got %q", ep)
		}
		if len(addr) > MaxUnixSocketPath {
			return "", "", fmt.Errorf("unix endpoint path is %d bytes, over the %d a unix socket can bind: use a shorter path (%q)",
				len(addr), MaxUnixSocketPath, ep)
		}
		return "unix", addr, nil
	case strings.HasPrefix(ep, "tcp://"):
		addr = strings.TrimPrefix(ep, "tcp://")
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return "", "", fmt.Errorf("tcp endpoint needs host:port, got %q: %w", ep, err)
		}
		return "tcp", addr, nil
	default:
		return "", "", fmt.Errorf("endpoint must start with unix:// or tcp://, got %q", ep)
	}
}
