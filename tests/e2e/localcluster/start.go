package localcluster

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"time"

	"github.com/fakecloud/fakecloud-csi/internal/stack"
	csidriver "github.com/fakecloud/fakecloud-csi/pkg/csi"
)

// Start brings a cluster up and returns once every node it starts (the first
// Options.StartNodes, or all) is Ready and its CSINode lists the driver with a
// count. On error everything already started is stopped. ctx bounds the start
// only; Stop ends the cluster.
//
// The start is a list of steps (startSteps): a Kubernetes control plane, then the
// stack's own steps of internal/stack (the fake cloud, the controller plugin), the
// sidecars, and the nodes.
func Start(ctx context.Context, o Options) (_ *Cluster, err error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	// Every node it may grow to: a cluster that would run short at its last growth says so
	// now, not after measuring the smaller sizes.
	if err := inotifyRoom(o.Out, len(o.Nodes)); err != nil {
		return nil, err
	}
	c, err := newCluster(o)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Stop()
			err = fmt.Errorf("%w (logs in %s)", err, c.LogDir)
		}
	}()
	startN := len(o.Nodes)
	if o.StartNodes > 0 {
		startN = o.StartNodes
	}
	start := time.Now()
	c.say = func(format string, args ...any) {
		fmt.Fprintf(o.Out, "[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	if err := stack.Run(ctx, c.startSteps(startN), nil); err != nil {
		return nil, err
	}
	return c, nil
}

// inotifyRoom errors when n more hollow kubelets would not fit in the inotify instances
// left; a limit it cannot read is said on out and let pass.
func inotifyRoom(out io.Writer, n int) error {
	limit, used, err := inotifyUsage()
	if err != nil {
		fmt.Fprintf(out, "cannot check the inotify limit (%v); a kubelet short of one registers no plugin\n", err)
		return nil
	}
	return checkInotify(limit, used, n)
}

// newCluster makes the run's supervisor and picks every port, path and token of the
// cluster; it starts nothing.
func newCluster(o Options) (*Cluster, error) {
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
	c.binDir = filepath.Join(o.RunDir, "bin")
	c.driverBinary = filepath.Join(c.binDir, "driver")
	nn := len(o.Nodes)
	pp, err := freePorts(5 + 3*nn)
	if err != nil {
		cancel()
		return nil, err
	}
	c.ports = ports{etcdClient: pp[0], etcdPeer: pp[1], apiserver: pp[2], cloud: pp[3], controllerHTTP: pp[4]}
	c.ports.kubelet, c.ports.healthz, c.ports.pluginHTTP = pp[5:5+nn], pp[5+nn:5+2*nn], pp[5+2*nn:]
	c.server = fmt.Sprintf("https://127.0.0.1:%d", c.ports.apiserver)
	c.Kubeconfig = c.kubeconfig("admin")
	c.CloudURL = fmt.Sprintf("http://127.0.0.1:%d", c.ports.cloud)
	c.ControllerURL = fmt.Sprintf("http://127.0.0.1:%d", c.ports.controllerHTTP)
	c.DriverArgs = o.DriverArgs
	c.AdminToken = "e2e-admin-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	c.driverToken = "e2e-driver-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	c.AdminTokenFile = filepath.Join(o.RunDir, "cloud-admin.token")
	c.driverTokenFile = filepath.Join(o.RunDir, "cloud-driver.token")
	return c, nil
}

// startSteps are the cluster's start-up steps in order; the fake cloud's and the controller
// plugin's are internal/stack's.
func (c *Cluster) startSteps(startN int) []stack.Step {
	steps := []stack.Step{
		{Name: "repository binaries", Start: c.buildBinaries},
		{Name: "certificates", Start: c.writeCertificates},
		{Name: "etcd", Start: c.startEtcd, Ready: c.etcdReady},
		{Name: "kube-apiserver", Start: c.startAPIServer, Ready: c.apiServerReady},
		{Name: "kube-controller-manager and kube-scheduler", Start: c.startControllerManagers},
		{Name: "deploy/base", Start: c.applyDeployBase},
		{Name: "snapshot support", Start: c.applySnapshotSupport},
		{Name: "fake cloud files", Start: c.writeCloudFiles},
	}
	shared := c.stack().Steps(supervised{c})
	ready := shared[0].Ready
	shared[0].Ready = func(ctx context.Context) error {
		if err := ready(ctx); err != nil {
			return err
		}
		c.say("fakecloud ready on %s", c.CloudURL)
		return nil
	}
	return append(append(steps, shared...),
		stack.Step{Name: "sidecars", Start: c.startSidecars},
		stack.Step{Name: "nodes", Start: func(ctx context.Context) error { return c.startNodes(ctx, c.opts.Nodes[:startN], c.say) }},
		stack.Step{Name: "cluster info", Start: func(context.Context) error { return c.writeInfo() }},
	)
}

// stack is the fake cloud and the controller plugin of the cluster, as internal/stack
// starts them: the cloud's console plots every node plugin's /debug/capacity (their
// ports are chosen already) and, from the cluster, the CSINode counts, VolumeAttachments
// and Pending pods (it only lists; with the admin kubeconfig: the components' own ones are
// scoped to their needs).
func (c *Cluster) stack() stack.Stack {
	o := c.opts
	cloud := stack.Cloud{
		Listen: "127.0.0.1:" + strconv.Itoa(c.ports.cloud),
		Seed:   filepath.Join(o.RunDir, "cloud-seed.yaml"), TokensFile: filepath.Join(o.RunDir, "cloud-tokens.yaml"),
		ConsoleKubeconfig: c.Kubeconfig, Verbosity: o.Verbosity,
	}
	for i, n := range o.Nodes {
		cloud.ConsoleNodes = append(cloud.ConsoleNodes, stack.ConsoleNode{Name: n.Name, URL: fmt.Sprintf("http://127.0.0.1:%d", c.ports.pluginHTTP[i])})
	}
	ctrl := c.plugin("controller plugin", "driver-controller")
	ctrlDir := filepath.Join(o.RunDir, "ctrl")
	ctrl.Mode, ctrl.Socket, ctrl.StateDir = csidriver.ModeController, filepath.Join(ctrlDir, "csi.sock"), filepath.Join(ctrlDir, "state")
	ctrl.HTTPAddr = "127.0.0.1:" + strconv.Itoa(c.ports.controllerHTTP)
	return stack.Stack{Cloud: cloud, Plugins: []stack.Plugin{ctrl}, Timeout: 30 * time.Second}
}

// plugin is what every driver process of the cluster gets: the cloud, its token, the
// shared volume data folder (a volume's data follows it to the next node it is attached
// to; the controller keeps each snapshot's data there), the verbosity and DriverArgs.
func (c *Cluster) plugin(name, id string) stack.Plugin {
	return stack.Plugin{
		Name: name, ID: id, CloudURL: c.CloudURL, CloudTokenFile: c.driverTokenFile,
		VolumeDataDir: filepath.Join(c.opts.RunDir, "volumes"), Verbosity: c.opts.Verbosity, Extra: c.opts.DriverArgs,
	}
}

// supervised is the stack's Launcher of the local cluster: every component a process of
// the supervisor, restarted when it exits, as a kubelet restarts a container.
type supervised struct{ c *Cluster }

// Launch starts the component's process: the fake cloud built for this run, the driver
// binary of the run.
func (s supervised) Launch(_ context.Context, comp stack.Component) error {
	path := filepath.Join(s.c.binDir, comp.Program)
	if comp.Program == stack.ProgramDriver {
		path = s.c.driverBinary
	}
	_, err := s.c.sup.start(s.c.runCtx, procSpec{Name: comp.ID, Path: path, Args: comp.Args, Restart: true})
	return err
}
