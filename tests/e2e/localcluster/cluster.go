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
	"strconv"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/yaml"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/registration"
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
	// an admin client and the flags every driver process gets.
	ports        ports
	pki          *pki
	server       string
	admin        *kubernetes.Clientset
	driverCommon []string

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

// Start brings a cluster up and returns once every node it starts (the first
// Options.StartNodes, or all) is Ready and its CSINode lists the driver with a
// count. On error everything already started is stopped. ctx bounds the start
// only; Stop ends the cluster.
func Start(ctx context.Context, o Options) (_ *Cluster, err error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	startN := len(o.Nodes)
	if o.StartNodes > 0 {
		startN = o.StartNodes
	}
	if limit, used, err := inotifyUsage(); err != nil {
		fmt.Fprintf(o.Out, "cannot check the inotify limit (%v); a kubelet short of one registers no plugin\n", err)
	} else if err := checkInotify(limit, used, len(o.Nodes)); err != nil {
		// Every node it may grow to: a cluster that would run short at its last growth
		// says so now, not after measuring the smaller sizes.
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	logDir := filepath.Join(o.RunDir, "logs")
	sup, err := newSupervisor(logDir, filepath.Join(o.RunDir, "pids"))
	if err != nil {
		cancel()
		return nil, err
	}
	c := &Cluster{opts: o, sup: sup, runCtx: runCtx, cancel: cancel, plugins: map[string]*nodePlugin{}}
	c.RunDir, c.LogDir, c.PidDir = o.RunDir, logDir, sup.pidDir
	c.PluginURLs, c.PluginSockets = map[string]string{}, map[string]string{}
	defer func() {
		if err != nil {
			c.Stop()
			err = fmt.Errorf("%w (logs in %s)", err, logDir)
		}
	}()
	start := time.Now()
	step := func(format string, args ...any) {
		fmt.Fprintf(o.Out, "[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}

	binDir := filepath.Join(o.RunDir, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return nil, err
	}
	if err := buildRepoBinaries(ctx, o.RepoRoot, binDir, o.Out); err != nil {
		return nil, err
	}
	c.driverBinary = filepath.Join(binDir, "driver")
	nn := len(o.Nodes)
	pp, err := freePorts(5 + 3*nn)
	if err != nil {
		return nil, err
	}
	p := ports{etcdClient: pp[0], etcdPeer: pp[1], apiserver: pp[2], cloud: pp[3], controllerHTTP: pp[4]}
	p.kubelet, p.healthz, p.pluginHTTP = pp[5:5+nn], pp[5+nn:5+2*nn], pp[5+2*nn:]

	pk, err := newPKI(filepath.Join(o.RunDir, "pki"))
	if err != nil {
		return nil, err
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", p.apiserver)
	kc := c.kubeconfig
	c.Kubeconfig = kc("admin")
	for _, k := range []struct{ name, cn, org string }{
		{"admin", "e2e-admin", "system:masters"},
		{"controller-manager", "system:kube-controller-manager", ""},
		{"scheduler", "system:kube-scheduler", ""},
		// A client certificate for the ServiceAccount's user name: RBAC matches
		// ServiceAccount subjects by user name, so the sidecars run with exactly
		// the permissions of deploy/base/rbac-*.yaml, as in a cluster.
		{"sidecars", "system:serviceaccount:fakecloud-csi:fakecloud-csi-controller", "system:serviceaccounts"},
		// The node plugins' cluster check (API server and kubelet versions,
		// the CSIDriver's update period, a Warning Event) under the node
		// ServiceAccount's RBAC (deploy/base/rbac-node-*.yaml).
		{"node-plugin", "system:serviceaccount:fakecloud-csi:fakecloud-csi-node", "system:serviceaccounts"},
		// snapshot-controller under the RBAC of the external-snapshotter
		// release (rbac-snapshot-controller.yaml), as deploy/base/snapshot
		// runs it.
		{"snapshot-controller", "system:serviceaccount:" + SnapshotControllerNamespace + ":snapshot-controller", "system:serviceaccounts"},
	} {
		var orgs []string
		if k.org != "" {
			orgs = []string{k.org}
		}
		if err := pk.kubeconfig(kc(k.name), k.name, server, k.cn, orgs...); err != nil {
			return nil, err
		}
	}
	bin := func(name string) string { return filepath.Join(o.BinDir, name) }
	v := "--v=" + strconv.Itoa(o.Verbosity)

	// etcd
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", p.etcdClient)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", p.etcdPeer)
	if _, err := sup.start(runCtx, procSpec{Name: "etcd", Path: bin("etcd"), Args: []string{
		"--name=e2e", "--data-dir=" + filepath.Join(o.RunDir, "etcd"),
		"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=e2e=" + peerURL,
		// A throwaway cluster: durability costs seconds on a shared disk.
		"--unsafe-no-fsync=true", "--log-level=warn",
	}}); err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, etcdURL+"/health", nil, time.Minute); err != nil {
		return nil, fmt.Errorf("etcd not healthy: %w", err)
	}
	step("etcd healthy on %s", etcdURL)

	// kube-apiserver
	apiserverArgs := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(p.apiserver),
		// It refuses a loopback advertise address with the lease reconciler.
		"--endpoint-reconciler-type=none",
		"--tls-cert-file=" + pk.ServingCert, "--tls-private-key-file=" + pk.ServingKey,
		"--client-ca-file=" + pk.CAFile,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + pk.SAPubFile,
		"--service-account-signing-key-file=" + pk.SAKeyFile,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--profiling=false",
		v,
	}
	if g := o.Versions.APIServerFeatureGates; g != "" {
		apiserverArgs = append(apiserverArgs, "--feature-gates="+g)
	}
	cp := func(name string) string { return binIn(o.Versions.ControlPlaneBinDir, o.BinDir, name) }
	if _, err := sup.start(runCtx, procSpec{Name: "kube-apiserver", Path: cp("kube-apiserver"), Args: apiserverArgs}); err != nil {
		return nil, err
	}
	admin, err := clientFor(c.Kubeconfig)
	if err != nil {
		return nil, err
	}
	if err := waitAPIServer(ctx, admin, 2*time.Minute); err != nil {
		return nil, fmt.Errorf("kube-apiserver not ready: %w", err)
	}
	step("kube-apiserver ready on %s", server)

	if _, err := sup.start(runCtx, procSpec{Name: "kube-controller-manager", Path: cp("kube-controller-manager"), Args: []string{
		"--kubeconfig=" + kc("controller-manager"),
		"--controllers=*", "--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + pk.SAKeyFile,
		"--root-ca-file=" + pk.CAFile,
		"--secure-port=0",
		v,
	}, Restart: true}); err != nil {
		return nil, err
	}
	if _, err := sup.start(runCtx, procSpec{Name: "kube-scheduler", Path: cp("kube-scheduler"), Args: []string{
		"--kubeconfig=" + kc("scheduler"), "--leader-elect=false", "--secure-port=0", v,
	}, Restart: true}); err != nil {
		return nil, err
	}
	step("kube-controller-manager and kube-scheduler started")

	if err := applyDeploy(ctx, admin, filepath.Join(o.RepoRoot, "deploy", "base"), o.Versions.CSIDriverPeriodSeconds); err != nil {
		return nil, err
	}
	step("applied deploy/base (namespace, RBAC, CSIDriver, StorageClass)")
	release, err := findSnapshotRelease(ctx, filepath.Join(o.RepoRoot, "tests", "e2e", "localcluster", "tools"))
	if err != nil {
		return nil, err
	}
	dyn, err := dynamicFor(c.Kubeconfig)
	if err != nil {
		return nil, err
	}
	if err := applySnapshotSupport(ctx, admin, dyn, release, filepath.Join(o.RepoRoot, "deploy", "base")); err != nil {
		return nil, err
	}
	step("applied the snapshot CRDs, snapshot-controller RBAC and VolumeSnapshotClass")

	// fake cloud
	c.CloudURL = fmt.Sprintf("http://127.0.0.1:%d", p.cloud)
	c.ControllerURL = fmt.Sprintf("http://127.0.0.1:%d", p.controllerHTTP)
	c.DriverArgs = o.DriverArgs
	c.AdminToken = "e2e-admin-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	driverToken := "e2e-driver-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	c.AdminTokenFile = filepath.Join(o.RunDir, "cloud-admin.token")
	driverTokenFile := filepath.Join(o.RunDir, "cloud-driver.token")
	if err := writeCloudFiles(o, c.AdminToken, driverToken, c.AdminTokenFile, driverTokenFile); err != nil {
		return nil, err
	}
	cloudArgs := []string{
		"--listen=127.0.0.1:" + strconv.Itoa(p.cloud),
		"--seed=" + filepath.Join(o.RunDir, "cloud-seed.yaml"),
		"--auth=tokens", "--tokens-file=" + filepath.Join(o.RunDir, "cloud-tokens.yaml"),
		v,
	}
	// The console on /ui plots each node plugin's /debug/capacity; the plugins'
	// ports are chosen already.
	for i, n := range o.Nodes {
		cloudArgs = append(cloudArgs, fmt.Sprintf("--console-node=%s=http://127.0.0.1:%d", n.Name, p.pluginHTTP[i]))
	}
	// ... and, from the cluster, the CSINode counts, VolumeAttachments and Pending pods (it
	// only lists; with the admin kubeconfig: the components' own ones are scoped to their needs).
	cloudArgs = append(cloudArgs, "--console-kubeconfig="+c.Kubeconfig)
	if _, err := sup.start(runCtx, procSpec{Name: "fakecloud", Path: filepath.Join(binDir, "fakecloud"), Args: cloudArgs, Restart: true}); err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, c.CloudURL+"/readyz", nil, 30*time.Second); err != nil {
		return nil, fmt.Errorf("fakecloud not ready: %w", err)
	}
	step("fakecloud ready on %s", c.CloudURL)

	// controller plugin and its sidecars
	driverCommon := append([]string{"--cloud-url=" + c.CloudURL, "--cloud-token-file=" + driverTokenFile, v}, o.DriverArgs...)
	ctrlDir := filepath.Join(o.RunDir, "ctrl")
	ctrlSock := filepath.Join(ctrlDir, "csi.sock")
	if err := os.MkdirAll(filepath.Join(ctrlDir, "state"), 0o755); err != nil {
		return nil, err
	}
	if _, err := sup.start(runCtx, procSpec{Name: "driver-controller", Path: c.driverBinary, Args: append([]string{
		"--mode=controller", "--endpoint=unix://" + ctrlSock,
		"--state-dir=" + filepath.Join(ctrlDir, "state"),
		// The node plugins' shared data folder: the controller keeps each snapshot's data there.
		"--volume-data-dir=" + filepath.Join(o.RunDir, "volumes"),
		"--http-addr=127.0.0.1:" + strconv.Itoa(p.controllerHTTP),
	}, driverCommon...), Restart: true}); err != nil {
		return nil, err
	}
	if err := waitFile(ctx, ctrlSock, 30*time.Second); err != nil {
		return nil, fmt.Errorf("controller plugin socket: %w", err)
	}
	sidecar := []string{"--csi-address=" + ctrlSock, "--kubeconfig=" + kc("sidecars"), "--leader-election=false",
		"--timeout=30s", "--retry-interval-max=10s", v}
	if _, err := sup.start(runCtx, procSpec{Name: "csi-provisioner", Path: bin("csi-provisioner"),
		Args: append([]string{"--extra-create-metadata=true"}, sidecar...), Restart: true}); err != nil {
		return nil, err
	}
	attacherArgs := sidecar
	if g := o.Versions.AttacherFeatureGates; g != "" {
		attacherArgs = append(append([]string{}, sidecar...), "--feature-gates="+g)
	}
	if _, err := sup.start(runCtx, procSpec{Name: "csi-attacher", Path: binIn(o.Versions.AttacherBinDir, o.BinDir, "csi-attacher"),
		Args: attacherArgs, Restart: true}); err != nil {
		return nil, err
	}
	if _, err := sup.start(runCtx, procSpec{Name: "csi-resizer", Path: bin("csi-resizer"),
		Args: sidecar, Restart: true}); err != nil {
		return nil, err
	}
	if _, err := sup.start(runCtx, procSpec{Name: "csi-snapshotter", Path: bin("csi-snapshotter"),
		Args: sidecar, Restart: true}); err != nil {
		return nil, err
	}
	if _, err := sup.start(runCtx, procSpec{Name: "snapshot-controller", Path: bin("snapshot-controller"), Args: []string{
		"--kubeconfig=" + kc("snapshot-controller"), "--leader-election=false", "--retry-interval-max=10s", v,
	}, Restart: true}); err != nil {
		return nil, err
	}
	step("controller plugin, csi-provisioner, csi-attacher, csi-resizer, csi-snapshotter and snapshot-controller started")

	c.ports, c.pki, c.server, c.admin, c.driverCommon = p, pk, server, admin, driverCommon
	if err := c.startNodes(ctx, o.Nodes[:startN], step); err != nil {
		return nil, err
	}
	if err := c.writeInfo(); err != nil {
		return nil, err
	}
	return c, nil
}

// Grow starts the next nodes of Options.Nodes until n run (the first Options.StartNodes
// started with the cluster), StartBatch at a time as Start does, and returns once every new
// node is Ready and its CSINode lists the driver with a count. Their fake cloud instances
// exist since Start: a cloud's instances boot before their kubelets join. It errors when n
// is not above the nodes running now or beyond Options.Nodes, and when the inotify
// instances left would not hold the new kubelets. Not safe to call concurrently with
// itself or with readers of Info; the cluster keeps its nodes when a node fails to start,
// as Start does not (Stop ends it all).
func (c *Cluster) Grow(ctx context.Context, n int) error {
	have := len(c.Nodes)
	if n <= have || n > len(c.opts.Nodes) {
		return fmt.Errorf("grow to %d nodes: want more than the %d running and at most the %d of Options.Nodes", n, have, len(c.opts.Nodes))
	}
	if limit, used, err := inotifyUsage(); err != nil {
		fmt.Fprintf(c.opts.Out, "cannot check the inotify limit (%v); a kubelet short of one registers no plugin\n", err)
	} else if err := checkInotify(limit, used, n-have); err != nil {
		return err
	}
	start := time.Now()
	step := func(format string, args ...any) {
		fmt.Fprintf(c.opts.Out, "[%6.1fs] grow %d→%d: %s\n", time.Since(start).Seconds(), have, n, fmt.Sprintf(format, args...))
	}
	if err := c.startNodes(ctx, c.opts.Nodes[have:n], step); err != nil {
		return fmt.Errorf("grow to %d nodes: %w (logs in %s)", n, err, c.LogDir)
	}
	return c.writeInfo()
}

// startNodes starts nodes (the next ones of Options.Nodes: their ports are by their index
// there), each a hollow kubelet, its node plugin and its registration socket, and waits
// until every one is Ready with a CSINode count. Each started node joins c.Nodes.
//
// The kubelets of a batch go first, as a DaemonSet's pods start on registered nodes; the
// node plugins' cluster check reads the Node objects. With StartBatch, StartBatch nodes at a
// time, each batch once the previous one's Nodes are registered: a hundred kubelets starting
// at once on two cores starve the API server (TLS handshakes time out) and register a few
// nodes in minutes. A batch's registration sockets are served while the next batch starts,
// so that the kubelets write their CSINodes batch by batch instead of all at the end.
func (c *Cluster) startNodes(ctx context.Context, nodes []Node, step func(string, ...any)) error {
	o := c.opts
	first := len(c.Nodes)
	nn := len(nodes)
	batch := o.StartBatch
	if batch <= 0 {
		batch = nn
	}
	v := "--v=" + strconv.Itoa(o.Verbosity)
	for _, n := range nodes {
		if err := c.pki.kubeconfig(c.kubeconfig(n.Name), "node-"+n.Name, c.server, "system:node:"+n.Name, "system:nodes"); err != nil {
			return err
		}
	}
	// Many nodes take longer together than one does alone, so the waits grow with the
	// node count (2 s per node plugin and hollow kubelet pair, 3 s per node to be Ready,
	// from runs on 2 cores).
	pluginsDeadline := time.Now().Add(max(pluginReadyTimeout, time.Duration(nn)*2*time.Second))
	nps := make([]*nodePlugin, nn)
	regCtx, cancelReg := context.WithCancel(ctx)
	reg := newRegistrar(func(i int) error { return c.registerPlugin(regCtx, nodes[i].Name, nps[i], pluginsDeadline) })
	defer func() { reg.abort(); cancelReg() }()
	for lo := 0; lo < nn; lo += batch {
		hi := min(lo+batch, nn)
		for i := lo; i < hi; i++ {
			n, k := nodes[i], first+i
			nodeDir := filepath.Join(o.RunDir, "n", n.Name)
			root := filepath.Join(nodeDir, "kubelet")
			sock := filepath.Join(nodeDir, "csi", "csi.sock")
			for _, d := range []string{filepath.Join(root, "plugins_registry"), filepath.Dir(sock), filepath.Join(nodeDir, "state")} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					return err
				}
			}
			nps[i] = &nodePlugin{
				component: "driver-node-" + n.Name,
				socket:    sock,
				url:       fmt.Sprintf("http://127.0.0.1:%d", c.ports.pluginHTTP[k]),
				regSocket: registration.SocketPath(filepath.Join(root, "plugins_registry"), DriverName),
				reg:       registration.NewServer(DriverName, sock, klog.Background().WithValues("node", n.Name)),
			}
			kubeletArgs := []string{
				"--kubeconfig=" + c.kubeconfig(n.Name), "--name=" + n.Name, "--root-dir=" + root,
				"--port=" + strconv.Itoa(c.ports.kubelet[k]), "--healthz-port=" + strconv.Itoa(c.ports.healthz[k]),
				"--node-labels=" + ZoneLabel + "=" + n.Zone + ",fakecloud.dev/e2e=true" + o.nodeLabels(),
				v,
			}
			if g := o.Versions.KubeletFeatureGates; g != "" {
				kubeletArgs = append(kubeletArgs, "--feature-gates="+g)
			}
			if _, err := c.sup.start(c.runCtx, procSpec{Name: "kubelet-" + n.Name, Path: binIn(o.Versions.KubeletBinDir, o.BinDir, "hollow-kubelet"),
				Args: kubeletArgs, Restart: true, Node: true}); err != nil {
				return err
			}
		}
		for i := lo; i < hi; i++ {
			n, k := nodes[i], first+i
			nodeDir := filepath.Join(o.RunDir, "n", n.Name)
			if _, err := c.sup.start(c.runCtx, procSpec{Name: nps[i].component, Path: c.driverBinary, Args: append([]string{
				"--mode=node", "--node-id=" + n.Name, "--endpoint=unix://" + nps[i].socket,
				"--state-dir=" + filepath.Join(nodeDir, "state"),
				// The hollow kubelet's --root-dir: its staging and target paths lie there.
				"--kubelet-root=" + filepath.Join(nodeDir, "kubelet"),
				// One folder of volume data for every node, as a cloud's disks are:
				// a volume's data follows it to the next node it is attached to.
				"--volume-data-dir=" + filepath.Join(o.RunDir, "volumes"),
				"--http-addr=127.0.0.1:" + strconv.Itoa(c.ports.pluginHTTP[k]),
				"--kubeconfig=" + c.kubeconfig("node-plugin"), "--node-name=" + n.Name,
			}, c.driverCommon...), Restart: true, Node: true}); err != nil {
				return err
			}
		}
		if hi < nn {
			if err := waitRegistered(ctx, c.admin, nodes[lo:hi], max(2*time.Minute, time.Duration(batch)*5*time.Second)); err != nil {
				return err
			}
			step("nodes %d-%d of %d registered", first+lo+1, first+hi, first+nn)
		}
		if err := reg.add(lo, hi); err != nil {
			return err
		}
	}
	if err := reg.wait(); err != nil {
		return err
	}
	c.mu.Lock()
	for i, n := range nodes {
		c.plugins[n.Name] = nps[i]
		c.PluginURLs[n.Name], c.PluginSockets[n.Name] = nps[i].url, nps[i].socket
	}
	c.mu.Unlock()
	step("%d hollow kubelets and node plugins started", nn)

	if err := waitNodes(ctx, c.admin, nodes, max(3*time.Minute, time.Duration(nn)*3*time.Second)); err != nil {
		return err
	}
	c.Nodes = append(c.Nodes, nodes...)
	step("all %d nodes Ready, CSINode lists %s on every node", len(c.Nodes), DriverName)
	return nil
}

// registerPlugin waits until node's plugin serves its CSI socket and /healthz, then serves
// its registration socket: the plugin serves its socket after the cluster check, which
// waits for the kubelet to register the Node (up to the driver's --cluster-check-timeout,
// 30 s).
func (c *Cluster) registerPlugin(ctx context.Context, node string, np *nodePlugin, deadline time.Time) error {
	if err := waitFile(ctx, np.socket, max(time.Until(deadline), time.Second)); err != nil {
		return fmt.Errorf("node plugin socket of %s: %w", node, err)
	}
	if err := waitHTTP(ctx, np.url+"/healthz", nil, 30*time.Second); err != nil {
		return fmt.Errorf("node plugin HTTP of %s: %w", node, err)
	}
	stop, err := registration.Serve(c.runCtx, np.regSocket, np.reg)
	if err != nil {
		return fmt.Errorf("registration socket of %s: %w", node, err)
	}
	c.mu.Lock()
	np.stopReg = stop
	c.mu.Unlock()
	return nil
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
			return fmt.Errorf("timed out after %s: last error: %v", timeout, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: last error: %v", ctx.Err(), last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
