package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/yaml"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

// DriverName is the CSI driver name the harness registers with every kubelet.
const DriverName = "disk.fakecloud.dev"

// ZoneLabel is the topology key the driver reports and the nodes carry.
const ZoneLabel = "topology.disk.fakecloud.dev/zone"

// Node describes one hollow node and its fake-cloud instance: the node name
// is the instance ID.
type Node struct {
	Name           string `json:"name"`
	Zone           string `json:"zone"`
	InstanceType   string `json:"instanceType"`
	MaxAttachments int    `json:"maxAttachments"`
	OutOfBandSlots int    `json:"outOfBandSlots"`
}

// Options configure a local cluster. The zero value is not usable; start
// from DefaultOptions.
type Options struct {
	// RepoRoot is the clone (cmd/fakecloud, cmd/driver, deploy/base).
	RepoRoot string
	// BinDir holds the component binaries (Build).
	BinDir string
	// RunDir is the per-run folder: logs/, pids/, pki, kubeconfigs, node
	// roots. Keep it short: unix socket paths must stay under 108 bytes.
	RunDir string
	// Nodes are the hollow nodes and their instances.
	Nodes []Node
	// AttachmentQuota is the account's attachment quota.
	AttachmentQuota int64
	// VolumeQuota is the account's volume quota; 0 means 500.
	VolumeQuota int64
	// StartBatch starts the nodes this many at a time, each batch once the Nodes of the
	// one before are registered; 0 starts them all at once.
	StartBatch int
	// StartNodes is how many of Nodes (the first ones) Start starts; Cluster.Grow starts
	// more. 0 starts them all. Every node's fake cloud instance exists from the start.
	StartNodes int
	// DriverArgs are extra flags for every driver process (capacity policy).
	DriverArgs []string
	// Verbosity is the -v of every component.
	Verbosity int
	// Versions runs some roles at other versions than the pinned set (the compatibility
	// matrix, docs/compatibility.md); the zero value runs BinDir's binaries.
	Versions Versions
	// Out receives progress lines.
	Out io.Writer
}

// Versions choose a binary folder and feature gates per component role. Folders come from
// BuildVersion (VersionCacheDir); "" is Options.BinDir, the pinned set.
type Versions struct {
	// ControlPlaneBinDir holds kube-apiserver, kube-controller-manager and kube-scheduler.
	ControlPlaneBinDir string `json:"controlPlaneBinDir,omitempty"`
	// KubeletBinDir holds hollow-kubelet.
	KubeletBinDir string `json:"kubeletBinDir,omitempty"`
	// AttacherBinDir holds csi-attacher.
	AttacherBinDir string `json:"attacherBinDir,omitempty"`
	// APIServerFeatureGates is kube-apiserver's --feature-gates ("Name=true,..."; "": none).
	APIServerFeatureGates string `json:"apiServerFeatureGates,omitempty"`
	// KubeletFeatureGates is every hollow kubelet's --feature-gates ("": none), e.g.
	// MutableCSINodeAllocatableCount=true on a v1.34 kubelet.
	KubeletFeatureGates string `json:"kubeletFeatureGates,omitempty"`
	// AttacherFeatureGates is csi-attacher's --feature-gates ("": none).
	AttacherFeatureGates string `json:"attacherFeatureGates,omitempty"`
	// NodeLabels are extra labels of every Node, "k=v,k2=v2" (the kubelet registers them),
	// e.g. fakecloud.dev/dynamic-capacity=true for a v1.34 kubelet whose gate is on.
	NodeLabels string `json:"nodeLabels,omitempty"`
	// CSIDriverPeriodSeconds replaces deploy/base's CSIDriver
	// nodeAllocatableUpdatePeriodSeconds before any node plugin starts: nil keeps it (10 s),
	// 0 removes the field (the kubelet never refreshes), otherwise 10..86400 seconds.
	CSIDriverPeriodSeconds *int64 `json:"csiDriverPeriodSeconds,omitempty"`
}

// maxPeriodSeconds bounds Versions.CSIDriverPeriodSeconds (a day).
const maxPeriodSeconds = 86400

// nodeLabels is ",k=v,..." of Versions.NodeLabels, "" when none.
func (o Options) nodeLabels() string {
	if o.Versions.NodeLabels == "" {
		return ""
	}
	return "," + o.Versions.NodeLabels
}

// binIn is the path of component name in dir, or in def when dir is "".
func binIn(dir, def, name string) string {
	if dir == "" {
		dir = def
	}
	return filepath.Join(dir, name)
}

// DefaultOptions are three nodes with 8, 4 and 8 slots, one of them taken
// out of band (a boot disk), so the reported counts are 7, 3, 7. node-2 and
// node-3 share zone-b: a pod whose volume lives there and is rejected by
// node-2 has somewhere to go (S4).
func DefaultOptions(repoRoot, binDir, runDir string) Options {
	return Options{
		RepoRoot: repoRoot,
		BinDir:   binDir,
		RunDir:   runDir,
		Nodes: []Node{
			{Name: "node-1", Zone: "zone-a", InstanceType: "e2e-medium", MaxAttachments: 8, OutOfBandSlots: 1},
			{Name: "node-2", Zone: "zone-b", InstanceType: "e2e-small", MaxAttachments: 4, OutOfBandSlots: 1},
			{Name: "node-3", Zone: "zone-b", InstanceType: "e2e-medium", MaxAttachments: 8, OutOfBandSlots: 1},
		},
		AttachmentQuota: 40,
		DriverArgs:      DefaultDriverArgs(),
		Verbosity:       4,
		Out:             os.Stdout,
	}
}

// StaleAfter is the driver's --capacity-stale-after on the local cluster:
// short, so that the outage scenario (S6) reaches the floor in a minute.
const StaleAfter = 40 * time.Second

// DefaultDriverArgs are the driver's capacity flags on the local cluster:
// increases apply at the next refresh (no stability window, no step limit) so
// that scenario deadlines stay one CSIDriver period plus slack, lookups may
// repeat every second, and the last known good value expires after
// StaleAfter.
func DefaultDriverArgs() []string {
	return []string{
		"--capacity-stability-window=0", "--capacity-max-stability-window=0",
		"--capacity-max-step=0", "--capacity-min-interval=1s",
		"--capacity-stale-after=" + StaleAfter.String(),
		"--publish-backoff-initial=2s", "--publish-backoff-max=10s",
	}
}

// NewRunDir makes a short, unique per-run folder under the system temp dir.
func NewRunDir() (string, error) {
	return os.MkdirTemp("", "fcsi-"+time.Now().Format("0102-150405")+"-")
}

// Validate reports every problem of o at once.
func (o Options) Validate() error {
	var errs []error
	if o.RepoRoot == "" {
		errs = append(errs, errors.New("RepoRoot is required"))
	}
	if m := missingBinaries(o.BinDir); len(m) > 0 {
		errs = append(errs, fmt.Errorf("binaries %v missing in %s: run `go run ./localcluster/cmd/localcluster build` in tests/e2e (make e2e-local-build)", m, o.BinDir))
	}
	for _, r := range []struct{ dir, name string }{
		{o.Versions.ControlPlaneBinDir, "kube-apiserver"}, {o.Versions.ControlPlaneBinDir, "kube-controller-manager"},
		{o.Versions.ControlPlaneBinDir, "kube-scheduler"}, {o.Versions.KubeletBinDir, "hollow-kubelet"}, {o.Versions.AttacherBinDir, "csi-attacher"},
	} {
		if _, err := os.Stat(binIn(r.dir, o.BinDir, r.name)); r.dir != "" && err != nil {
			errs = append(errs, fmt.Errorf("%s missing in %s: run `localcluster build --version=...`", r.name, r.dir))
		}
	}
	for _, g := range []string{o.Versions.APIServerFeatureGates, o.Versions.KubeletFeatureGates, o.Versions.AttacherFeatureGates, o.Versions.NodeLabels} {
		if len(g) > 4096 || strings.ContainsAny(g, " \t\n") {
			errs = append(errs, fmt.Errorf("feature gates or node labels %.80q: at most 4096 bytes, no spaces", g))
		}
	}
	if p := o.Versions.CSIDriverPeriodSeconds; p != nil && *p != 0 && (*p < 10 || *p > maxPeriodSeconds) {
		errs = append(errs, fmt.Errorf("CSIDriver period %d s: want 0 (unset) or 10..%d", *p, maxPeriodSeconds))
	}
	if !filepath.IsAbs(o.RunDir) {
		errs = append(errs, fmt.Errorf("RunDir must be absolute, got %q", o.RunDir))
	}
	if len(o.RunDir) > 60 {
		errs = append(errs, fmt.Errorf("RunDir %q is too long for unix sockets below it (max 60 bytes)", o.RunDir))
	}
	if len(o.Nodes) == 0 {
		errs = append(errs, errors.New("at least one node is required"))
	}
	if o.StartNodes < 0 || o.StartNodes > len(o.Nodes) {
		errs = append(errs, fmt.Errorf("StartNodes %d outside 0..%d (the nodes)", o.StartNodes, len(o.Nodes)))
	}
	if o.VolumeQuota < 0 {
		errs = append(errs, fmt.Errorf("VolumeQuota must be ≥ 0 (0: 500), got %d", o.VolumeQuota))
	}
	seen := map[string]bool{}
	for _, n := range o.Nodes {
		if n.Name == "" || seen[n.Name] {
			errs = append(errs, fmt.Errorf("node name %q empty or duplicate", n.Name))
		}
		seen[n.Name] = true
		if n.MaxAttachments < 1 || n.OutOfBandSlots < 0 {
			errs = append(errs, fmt.Errorf("node %s: maxAttachments %d must be ≥ 1 and outOfBandSlots %d ≥ 0", n.Name, n.MaxAttachments, n.OutOfBandSlots))
		}
	}
	return errors.Join(errs...)
}

// Info is what a test suite needs to reach a running cluster; `up` writes it
// to <run>/cluster.json.
type Info struct {
	RunDir     string `json:"runDir"`
	LogDir     string `json:"logDir"`
	Kubeconfig string `json:"kubeconfig"`
	CloudURL   string `json:"cloudURL"`
	// AdminTokenFile holds the fake cloud's admin token.
	AdminTokenFile string `json:"adminTokenFile"`
	AdminToken     string `json:"adminToken"`
	// PidDir has one <component>.pid per process; S9 kills driver-controller
	// through it and the supervisor restarts it.
	PidDir string `json:"pidDir"`
	// Nodes are the nodes running, in start order (Grow adds to them).
	Nodes []Node `json:"nodes"`
	// ControllerURL is the controller plugin's HTTP base URL (its
	// --http-addr): /healthz, /readyz, /metrics (publish results, backoff).
	ControllerURL string `json:"controllerURL,omitempty"`
	// DriverArgs are the capacity and backoff flags every driver process
	// got (Options.DriverArgs, DefaultDriverArgs unless the caller chose).
	DriverArgs []string `json:"driverArgs,omitempty"`
	// PluginURLs maps node name to its node plugin's HTTP base URL
	// (http://127.0.0.1:PORT, the driver's --http-addr): /healthz, /readyz,
	// /metrics, /debug/capacity.
	PluginURLs map[string]string `json:"pluginURLs,omitempty"`
	// PluginSockets maps node name to the absolute path of its node plugin's
	// CSI unix socket (the endpoint the kubelet calls).
	PluginSockets map[string]string `json:"pluginSockets,omitempty"`
}

// Cluster is a running local cluster.
type Cluster struct {
	Info
	opts Options
	sup  *supervisor
	// runCtx ends with Stop; components restarted by RestartNodePlugin are
	// supervised under it, like those Start launched.
	runCtx context.Context
	cancel context.CancelFunc
	// driverBinary is the driver built from the clone for this run.
	driverBinary string

	// What Grow needs to start more nodes as Start did: the ports of every node of
	// Options.Nodes (by index), the CA that issues their kubeconfigs, the API server's URL,
	// an admin client.
	ports  ports
	pki    *pki
	server string
	admin  *kubernetes.Clientset
	// binDir holds the fake cloud and driver built for this run; driverToken and
	// driverTokenFile are the fake cloud's driver token and the file every plugin reads it
	// from.
	binDir                       string
	driverToken, driverTokenFile string
	// say prints one progress line of Start.
	say func(format string, args ...any)

	mu      sync.Mutex
	plugins map[string]*nodePlugin
}

type ports struct {
	etcdClient, etcdPeer, apiserver, cloud, controllerHTTP int
	kubelet, healthz, pluginHTTP                           []int
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	out := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// kubeconfig is the path of the kubeconfig of name (a component or a node).
func (c *Cluster) kubeconfig(name string) string {
	return filepath.Join(c.opts.RunDir, "kubeconfig-"+name)
}

// Stop stops every component, the last started first, and the registration
// servers, then removes the mounts left under the run folder (volumes of pods
// that were still running). It is safe to call more than once.
func (c *Cluster) Stop() {
	c.sup.stopAll()
	c.cancel()
	left, err := unmountUnder(c.RunDir, "", mount.NewLinux())
	switch {
	case err != nil:
		fmt.Fprintf(c.opts.Out, "cannot list the mounts under %s: %v\n", c.RunDir, err)
	case len(left) > 0:
		fmt.Fprintf(c.opts.Out, "could not unmount %d mounts under %s (see findmnt): %v\n", len(left), c.RunDir, left)
	}
}

// Running reports whether the named component (e.g. "driver-controller") is
// alive; it errors for an unknown name.
func (c *Cluster) Running(name string) (bool, error) {
	p, err := c.sup.find(name)
	if err != nil {
		return false, err
	}
	return p.running(), nil
}

func (c *Cluster) writeInfo() error {
	data, err := yaml.Marshal(c.Info)
	if err != nil {
		return err
	}
	data, err = yaml.YAMLToJSON(data)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.RunDir, "cluster.json"), data, 0o600)
}

// ReadInfo reads <runDir>/cluster.json of a cluster started by `up`.
func ReadInfo(runDir string) (Info, error) {
	var info Info
	data, err := os.ReadFile(filepath.Join(runDir, "cluster.json"))
	if err != nil {
		return info, fmt.Errorf("read cluster info: %w", err)
	}
	if err := yaml.Unmarshal(data, &info); err != nil {
		return info, fmt.Errorf("parse %s/cluster.json: %w", runDir, err)
	}
	return info, nil
}

// seedFile is the fake cloud's seed (pkg/cloud/server.Seed in YAML).
type seedFile struct {
	InstanceTypes []seedType     `json:"instanceTypes"`
	Instances     []seedInstance `json:"instances"`
	Quotas        seedQuotas     `json:"quotas"`
}

type seedType struct {
	Name           string `json:"name"`
	MaxAttachments int    `json:"maxAttachments"`
}

type seedInstance struct {
	ID             string `json:"id"`
	Zone           string `json:"zone"`
	InstanceType   string `json:"instanceType"`
	OutOfBandSlots int    `json:"outOfBandSlots"`
}

type seedQuotas struct {
	Attachments   int64 `json:"attachments"`
	Volumes       int64 `json:"volumes"`
	CapacityBytes int64 `json:"capacityBytes"`
}

func writeCloudFiles(o Options, adminToken, driverToken, adminTokenFile, driverTokenFile string) error {
	volumes := o.VolumeQuota
	if volumes == 0 {
		volumes = 500
	}
	seed := seedFile{Quotas: seedQuotas{Attachments: o.AttachmentQuota, Volumes: volumes, CapacityBytes: 1 << 44}}
	types := map[string]bool{}
	for _, n := range o.Nodes {
		if !types[n.InstanceType] {
			types[n.InstanceType] = true
			seed.InstanceTypes = append(seed.InstanceTypes, seedType{Name: n.InstanceType, MaxAttachments: n.MaxAttachments})
		}
		seed.Instances = append(seed.Instances, seedInstance{ID: n.Name, Zone: n.Zone, InstanceType: n.InstanceType, OutOfBandSlots: n.OutOfBandSlots})
	}
	data, err := yaml.Marshal(seed)
	if err != nil {
		return err
	}
	files := map[string]string{
		filepath.Join(o.RunDir, "cloud-seed.yaml"): string(data),
		filepath.Join(o.RunDir, "cloud-tokens.yaml"): fmt.Sprintf("tokens:\n  - token: %s\n    role: admin\n  - token: %s\n    role: driver\n",
			adminToken, driverToken),
		adminTokenFile:  adminToken + "\n",
		driverTokenFile: driverToken + "\n",
	}
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return nil
}

// dynamicFor is a dynamic client (CRDs and their objects) for kubeconfig.
func dynamicFor(kubeconfig string) (dynamic.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", kubeconfig, err)
	}
	return dynamic.NewForConfig(cfg)
}

func clientFor(kubeconfig string) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	return kubernetes.NewForConfig(cfg)
}

func waitHTTP(ctx context.Context, url string, hc *http.Client, timeout time.Duration) error {
	if hc == nil {
		hc = &http.Client{Timeout: 2 * time.Second}
	}
	return poll(ctx, timeout, func() (bool, error) {
		resp, err := hc.Get(url)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return true, nil
	})
}

func waitFile(ctx context.Context, path string, timeout time.Duration) error {
	return poll(ctx, timeout, func() (bool, error) {
		_, err := os.Stat(path)
		return err == nil, err
	})
}

func waitAPIServer(ctx context.Context, cs *kubernetes.Clientset, timeout time.Duration) error {
	return poll(ctx, timeout, func() (bool, error) {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return false, err
		}
		return strings.TrimSpace(string(body)) == "ok", nil
	})
}

// poll calls f every 500 ms until it reports done, ctx ends or timeout
// passes; the error names f's last error.
func poll(ctx context.Context, timeout time.Duration, f func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		done, err := f()
		if done {
			return nil
		}
		last = err
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s: last error: %v", timeout, last) //nolint:errorlint // the timeout is the cause; last is context, maybe nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: last error: %v", ctx.Err(), last) //nolint:errorlint // the deadline is the cause; last is context, maybe nil
		case <-time.After(500 * time.Millisecond):
		}
	}
}
