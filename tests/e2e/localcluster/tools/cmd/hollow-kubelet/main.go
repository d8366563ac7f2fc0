// Command hollow-kubelet runs one kubemark hollow kubelet for the local e2e
// cluster: a real kubelet (volume manager, CSI plugin, plugin watcher, the
// periodic CSINode allocatable updater of KEP-4876, pod admission) on top of a
// fake container runtime.
//
// The stock kubemark binary does not fit because it disables controller
// attach/detach, which v1.37 kubelets no longer support the other way round,
// and it puts its root directory in a random temporary folder where the
// harness cannot serve the plugin registration socket.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/version"
	fakeremote "k8s.io/cri-client/pkg/fake"
	"k8s.io/klog/v2"
	kubeletoptions "k8s.io/kubernetes/cmd/kubelet/app/options"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	cadvisortest "k8s.io/kubernetes/pkg/kubelet/cadvisor/testing"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	"k8s.io/kubernetes/pkg/kubemark"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "hollow-kubelet:", err)
		os.Exit(1)
	}
}

// options are the command-line settings of one hollow kubelet.
type options struct {
	// Kubeconfig is the path of the kubeconfig the kubelet uses (user
	// system:node:<NodeName>, group system:nodes).
	Kubeconfig string
	// NodeName is the Node object's name; the harness makes it the fake
	// cloud's instance ID.
	NodeName string
	// RootDir is the kubelet root directory; plugins_registry/ and plugins/
	// live under it.
	RootDir string
	// Port is the kubelet API port on 127.0.0.1 (unique per node).
	Port int
	// HealthzPort is the kubelet healthz port on 127.0.0.1 (unique per node).
	HealthzPort int
	// Labels are extra node labels, "k=v,k2=v2".
	Labels string
	// MaxPods is the node's pod capacity.
	MaxPods int
	// FeatureGates are the kubelet's feature gates, "Name=true,Other=false", set on the
	// process's feature gate before the kubelet starts (what the real kubelet does with
	// --feature-gates); the compatibility matrix turns MutableCSINodeAllocatableCount on
	// or off with it on kubelets where the gate is not locked.
	FeatureGates string
	// Version prints the version and exits.
	Version bool
}

func (o *options) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of this node's kubelet")
	fs.StringVar(&o.NodeName, "name", "", "node name")
	fs.StringVar(&o.RootDir, "root-dir", "", "kubelet root directory")
	fs.IntVar(&o.Port, "port", 0, "kubelet API port on 127.0.0.1")
	fs.IntVar(&o.HealthzPort, "healthz-port", 0, "kubelet healthz port on 127.0.0.1 (0: off)")
	fs.StringVar(&o.Labels, "node-labels", "", "node labels, k=v,k2=v2")
	fs.IntVar(&o.MaxPods, "max-pods", 110, "pods per node")
	fs.StringVar(&o.FeatureGates, "feature-gates", "", "kubelet feature gates, Name=true,Other=false")
	fs.BoolVar(&o.Version, "version", false, "print the version and exit")
}

func (o *options) validate() error {
	var errs []error
	if o.Kubeconfig == "" {
		errs = append(errs, errors.New("--kubeconfig is required"))
	}
	if o.NodeName == "" {
		errs = append(errs, errors.New("--name is required"))
	}
	if o.RootDir == "" || !filepath.IsAbs(o.RootDir) {
		errs = append(errs, fmt.Errorf("--root-dir must be an absolute path, got %q", o.RootDir))
	}
	if o.Port <= 0 || o.Port > 65535 {
		errs = append(errs, fmt.Errorf("--port must be in 1..65535, got %d", o.Port))
	}
	if o.HealthzPort < 0 || o.HealthzPort > 65535 {
		errs = append(errs, fmt.Errorf("--healthz-port must be in 0..65535, got %d", o.HealthzPort))
	}
	if _, err := parseLabels(o.Labels); err != nil {
		errs = append(errs, err)
	}
	if _, err := parseGates(o.FeatureGates); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func parseLabels(s string) (map[string]string, error) {
	labels := map[string]string{}
	if s == "" {
		return labels, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--node-labels: %q is not k=v", kv)
		}
		labels[k] = v
	}
	return labels, nil
}

// parseGates reads "Name=true,Other=false" (at most 64 gates).
func parseGates(s string) (map[string]bool, error) {
	gates := map[string]bool{}
	if s == "" {
		return gates, nil
	}
	kvs := strings.Split(s, ",")
	if len(kvs) > 64 {
		return nil, fmt.Errorf("--feature-gates: %d gates, at most 64", len(kvs))
	}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		b, err := strconv.ParseBool(v)
		if !ok || k == "" || err != nil {
			return nil, fmt.Errorf("--feature-gates: %q is not Name=true or Name=false", kv)
		}
		gates[k] = b
	}
	return gates, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, done, err := parseArgs(args, stdout, stderr)
	if err != nil || done {
		return err
	}
	labels, _ := parseLabels(o.Labels)
	gates, _ := parseGates(o.FeatureGates)
	// The kubelet's code asks the process-wide gate; an unknown or locked gate is refused
	// here, before anything starts.
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(gates); err != nil {
		return fmt.Errorf("--feature-gates: %w", err)
	}
	klog.InfoS("Starting hollow kubelet", "version", version.Get().GitVersion, "node", o.NodeName, "rootDir", o.RootDir, "featureGates", gates)

	f, c := kubemark.GetHollowKubeletConfig(&kubemark.HollowKubeletOptions{
		NodeName:    o.NodeName,
		KubeletPort: o.Port,
		MaxPods:     o.MaxPods,
		NodeLabels:  labels,
	})
	// GetHollowKubeletConfig made a temporary root; the harness needs a known one
	// (plugins_registry/ lives in it) and removes it with the run folder.
	defer os.RemoveAll(f.RootDirectory)
	if err := placeKubelet(f, c, o); err != nil {
		return err
	}
	client, heartbeatClient, err := newClients(o, c)
	if err != nil {
		return err
	}

	endpoint := "unix://" + filepath.Join(o.RootDir, "fake-cri.sock")
	_ = os.Remove(strings.TrimPrefix(endpoint, "unix://"))
	runtime := fakeremote.NewFakeRemoteRuntime()
	if err := runtime.Start(endpoint); err != nil {
		return fmt.Errorf("start fake runtime at %s: %w", endpoint, err)
	}
	defer runtime.Stop()
	runtimeService, err := newRuntimeService(ctx, endpoint)
	if err != nil {
		return fmt.Errorf("runtime service %s: %w", endpoint, err)
	}

	hk := kubemark.NewHollowKubelet(f, c, client, heartbeatClient,
		&cadvisortest.Fake{NodeName: o.NodeName},
		runtime.ImageService, runtimeService, cm.NewStubContainerManager())
	go hk.Run(ctx)
	<-ctx.Done()
	klog.InfoS("Stopping hollow kubelet", "node", o.NodeName)
	return nil
}

// parseArgs reads the flags (klog's among them) into options and validates them. done is
// true when the run is over already: --version printed the version to stdout.
func parseArgs(args []string, stdout, stderr io.Writer) (o options, done bool, err error) {
	fs := flag.NewFlagSet("hollow-kubelet", flag.ContinueOnError)
	fs.SetOutput(stderr)
	klog.InitFlags(fs)
	o.addFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, false, err
	}
	if o.Version {
		fmt.Fprintln(stdout, version.Get().GitVersion)
		return o, true, nil
	}
	return o, false, o.validate()
}

// placeKubelet moves the kubemark configuration f and c onto the node's known root
// directory (creating its folders) and sets what a node of the local cluster needs that
// kubemark's defaults do not give.
func placeKubelet(f *kubeletoptions.KubeletFlags, c *kubeletconfig.KubeletConfiguration, o options) error {
	f.RootDirectory = o.RootDir
	f.CertDirectory = filepath.Join(o.RootDir, "pki")
	c.StaticPodPath = filepath.Join(o.RootDir, "static-pods")
	c.PodLogsDir = filepath.Join(o.RootDir, "pod-logs")
	for _, d := range []string{o.RootDir, c.StaticPodPath, c.PodLogsDir, f.CertDirectory} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	// v1.37 kubelets refuse kubelet-side attach; the attach/detach controller
	// and csi-attacher must do it, as on a real node.
	c.EnableControllerAttachDetach = true
	c.Address = "127.0.0.1"
	c.ReadOnlyPort = 0
	c.HealthzBindAddress = "127.0.0.1"
	c.HealthzPort = int32(o.HealthzPort)
	c.ImageServiceEndpoint = ""
	// The kubelet's iptables utility chains (KUBE-IPTABLES-HINT, KUBE-FIREWALL and the
	// KUBE-KUBELET-CANARY it re-creates every minute) are for kube-proxy and the host's
	// pods; a hollow kubelet has neither, and the chains would outlive the cluster in the
	// host's ip and ip6 filter, nat and mangle tables.
	c.MakeIPTablesUtilChains = false
	return nil
}

// newClients builds the kubelet's two API clients from o's kubeconfig: the main one (20
// QPS, burst 40) and the heartbeat one, unthrottled and with a timeout no longer than a
// node status update period or the node lease, as the real kubelet's.
func newClients(o options, c *kubeletconfig.KubeletConfiguration) (client, heartbeatClient *clientset.Clientset, err error) {
	restConfig, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("load kubeconfig %s: %w", o.Kubeconfig, err)
	}
	restConfig.UserAgent = "hollow-kubelet/" + o.NodeName
	restConfig.QPS, restConfig.Burst = 20, 40
	if client, err = clientset.NewForConfig(restConfig); err != nil {
		return nil, nil, fmt.Errorf("client: %w", err)
	}
	heartbeat := *restConfig
	heartbeat.Timeout = c.NodeStatusUpdateFrequency.Duration
	if lease := time.Duration(c.NodeLeaseDurationSeconds) * time.Second; heartbeat.Timeout > lease {
		heartbeat.Timeout = lease
	}
	heartbeat.QPS = -1
	if heartbeatClient, err = clientset.NewForConfig(&heartbeat); err != nil {
		return nil, nil, fmt.Errorf("heartbeat client: %w", err)
	}
	return client, heartbeatClient, nil
}
