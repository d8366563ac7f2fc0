package csi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/backoff"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/nodestate"
	"github.com/fakecloud/fakecloud-csi/pkg/version"
)

// gracePeriod bounds GracefulStop: calls still running after it are cut off.
const gracePeriod = 10 * time.Second

// Deps are the driver's dependencies; which are required depends on the mode.
type Deps struct {
	// ControllerCloud is required in controller and all modes.
	ControllerCloud ControllerCloud
	// NodeCloud, Mounter and Capacity are required in node and all modes; Driver.Run runs
	// Capacity.Run beside the servers.
	NodeCloud NodeCloud
	Mounter   mount.Mounter
	Capacity  CapacityReporter
	// Staged is the node's staged-volume tracker: the node service writes it, and the
	// capacity reporter, built with the same tracker, reads its count as the live floor.
	// nil: the node service keeps one of its own, which no reporter reads.
	Staged *nodestate.Staged
	// Registry receives the driver's metrics and is served on /metrics. Required.
	Registry *prometheus.Registry
	// Clock times the controller's publish backoff windows; nil means the real clock.
	Clock clock.PassiveClock
	// Background functions run beside the servers from Run until its context ends (the
	// node plugin's cluster re-check).
	Background []func(context.Context)
	// ClusterCheck, when set, gives the newest cluster check answer for /debug/cluster.
	ClusterCheck DebugStater
	// CapacityDecision, when set, is the node plugin's capacity decision at start with its
	// evidence (clustercheck.Decision); /debug/capacity shows it under "decision".
	CapacityDecision any
}

// DebugStater gives a JSON-encodable snapshot of a component's state for a /debug endpoint.
type DebugStater interface {
	DebugState() any
}

// Driver is one driver process: the gRPC server with the services of its mode, and the
// optional HTTP server.
type Driver struct {
	opts       Options
	deps       Deps
	ready      *Readiness
	identity   *IdentityServer
	controller *ControllerServer
	group      *GroupControllerServer
	node       *NodeServer
	metrics    *rpcMetrics
}

// New checks deps and builds the services; it starts nothing and does no I/O. opts must
// have passed Options.Validate: options are validated once, by the binary, before anything
// is built. Errors: missing dependencies (all at once), metrics registration.
func New(opts Options, deps Deps) (*Driver, error) {
	var errs []error
	runController := opts.Mode == ModeController || opts.Mode == ModeAll
	runNode := opts.Mode == ModeNode || opts.Mode == ModeAll
	if runController && deps.ControllerCloud == nil {
		errs = append(errs, errors.New("controller cloud client is required"))
	}
	if runNode && (deps.NodeCloud == nil || deps.Mounter == nil || deps.Capacity == nil) {
		errs = append(errs, errors.New("node cloud client, mounter and capacity reporter are required"))
	}
	if deps.Registry == nil {
		errs = append(errs, errors.New("metrics registry is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("new driver: %w", err)
	}
	m, err := newRPCMetrics(deps.Registry)
	if err != nil {
		return nil, fmt.Errorf("new driver: %w", err)
	}
	if err := registerBuildInfo(deps.Registry, opts.Version); err != nil {
		return nil, fmt.Errorf("new driver: %w", err)
	}
	d := &Driver{opts: opts, deps: deps, ready: NewReadiness(runController, runNode), metrics: m}
	d.identity = NewIdentityServer(opts.Version, runController, d.ready)
	if runController {
		bo, err := backoff.New(opts.PublishBackoffConfig(), deps.Clock)
		if err != nil {
			return nil, fmt.Errorf("new driver: %w", err)
		}
		d.controller = NewControllerServer(deps.ControllerCloud, bo, d.ready.ControllerReady)
		d.controller.snapData = snapshotData{dir: opts.VolumeDataDir}
		if d.controller.metrics, err = newControllerMetrics(deps.Registry, bo, d.controller.inflight); err != nil {
			return nil, fmt.Errorf("new driver: %w", err)
		}
		d.group = NewGroupControllerServer(deps.ControllerCloud, d.controller.inflight, d.ready.ControllerReady)
		d.group.snapData = d.controller.snapData
	}
	if runNode {
		dir := nodestate.NewDir(opts.StateDir)
		topo := NewTopology(opts.NodeID, dir, deps.NodeCloud, d.ready.NodeReady)
		topo.tokenFile = opts.CloudTokenFile
		d.node = NewNodeServer(NodeConfig{
			NodeID: opts.NodeID, State: dir, DataDir: opts.VolumeDataDir, KubeletRoot: opts.KubeletRoot,
			Cloud: deps.NodeCloud, Mounter: deps.Mounter, Capacity: deps.Capacity, Staged: deps.Staged,
			Topology: topo,
		})
	}
	return d, nil
}

// registerBuildInfo exports fakecloud_csi_build_info{version,commit} = 1, so that a rollout can
// be followed per node plugin (docs/upgrade.md).
func registerBuildInfo(reg prometheus.Registerer, v string) error {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "fakecloud_csi", Name: "build_info",
		Help: "Always 1; the labels are the driver's version (GetPluginInfo vendor_version) and git commit.",
	}, []string{"version", "commit"})
	_, commit := version.Get()
	g.WithLabelValues(v, commit).Set(1)
	return reg.Register(g)
}

// endpointDialTimeout bounds the check whether an existing unix socket has a live server.
const endpointDialTimeout = time.Second

// listen opens the endpoint. An existing unix socket file is removed only when it is stale:
// nothing answers on it (connection refused). A socket a live process answers on, a socket
// that cannot be checked (dial fails otherwise, e.g. times out) and a file that is not a
// socket are errors, so a second plugin never takes over a running one's endpoint.
func listen(endpoint string) (net.Listener, error) {
	network, addr, err := ParseEndpoint(endpoint)
	if err != nil {
		return nil, err
	}
	if network == "unix" {
		if fi, err := os.Lstat(addr); err == nil {
			if fi.Mode()&os.ModeSocket == 0 {
				return nil, fmt.Errorf("%s exists and is not a socket", addr)
			}
			conn, err := net.DialTimeout("unix", addr, endpointDialTimeout)
			switch {
			case err == nil:
				_ = conn.Close()
				return nil, fmt.Errorf("endpoint %s is in use by a running process: stop it or use another --endpoint", endpoint)
			case !errors.Is(err, syscall.ECONNREFUSED):
				return nil, fmt.Errorf("endpoint %s: cannot tell whether socket %s is stale: %w", endpoint, addr, err)
			}
			if err := os.Remove(addr); err != nil {
				return nil, fmt.Errorf("remove stale socket: %w", err)
			}
		}
		if err := os.MkdirAll(filepath.Dir(addr), 0o750); err != nil {
			return nil, fmt.Errorf("socket directory: %w", err)
		}
	}
	lis, err := net.Listen(network, addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", endpoint, err)
	}
	if network == "unix" {
		// The owner's and its group's, whatever the umask: the sidecars of a pod share the
		// group (runAsGroup) but not always the user (the kind controller's driver runs as root
		// to read every volume's data for snapshots; deploy/base/controller-deployment.yaml).
		if err := os.Chmod(addr, 0o660); err != nil {
			_ = lis.Close()
			return nil, fmt.Errorf("socket %s: %w", addr, err)
		}
	}
	return lis, nil
}

// Run serves until ctx ends, then stops gracefully (calls in progress get gracePeriod) and
// returns nil; it returns an error when a server cannot start or fails. In node and all modes
// it first takes an exclusive lock on <StateDir>/.lock, held until it returns: a second
// plugin on the same state dir fails here, naming the dir and the holder's pid. Under the
// lock it restores the capacity reporter's persisted state (CapacityReporter.Restore). It refuses a
// unix endpoint a running process answers on (listen). Besides the servers
// it runs the readiness checks (the cloud for the controller, the zone for the node) and the
// capacity reporter's background loop (CapacityReporter.Run).
func (d *Driver) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if d.node != nil {
		// Before the endpoint: a second plugin on this state dir must not touch the first one's
		// socket either. Released when Run returns, i.e. with the process.
		lock, err := nodestate.NewDir(d.opts.StateDir).Lock()
		if err != nil {
			return err
		}
		defer lock.Close()
		// Under the lock (the file is this plugin's alone) and before the endpoint: the first
		// NodeGetInfo answers the last known good value of the previous run, not the floor.
		d.deps.Capacity.Restore(ctx)
	}
	lis, err := listen(d.opts.Endpoint)
	if err != nil {
		return err
	}
	srv := d.newGRPCServer()
	g, ctx := errgroup.WithContext(ctx)
	d.serveGRPC(ctx, g, srv, lis)
	if d.opts.HTTPAddr != "" {
		if err := d.serveHTTP(ctx, g); err != nil {
			srv.Stop()
			return err
		}
	}
	d.runBackground(ctx, g)
	err = g.Wait()
	logger.Info("CSI driver stopped", "endpoint", d.opts.Endpoint)
	return err
}

// newGRPCServer returns the gRPC server with the logging and metrics interceptors and the CSI
// services of this mode registered (identity always; controller and group controller in
// controller and all modes; node in node and all modes).
func (d *Driver) newGRPCServer() *grpc.Server {
	// Stream workers (as many as Ps) serve calls on goroutines whose stacks have grown
	// already: a new goroutine per call, gRPC's default, grew its stack (runtime.morestack,
	// a copy of the stack) on every NodeGetInfo, the largest part of the handler's cost after
	// the timeout it no longer sets. A call finding every worker busy still gets a goroutine
	// of its own, so concurrency is unchanged.
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(logInterceptor, d.metrics.interceptor),
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))))
	csi.RegisterIdentityServer(srv, d.identity)
	if d.controller != nil {
		csi.RegisterControllerServer(srv, d.controller)
		csi.RegisterGroupControllerServer(srv, d.group)
	}
	if d.node != nil {
		csi.RegisterNodeServer(srv, d.node)
	}
	return srv
}

// serveGRPC serves srv on lis in g until ctx ends, then stops it gracefully: calls in
// progress get gracePeriod, after which the server stops hard. A server that fails is g's
// error.
func (d *Driver) serveGRPC(ctx context.Context, g *errgroup.Group, srv *grpc.Server, lis net.Listener) {
	g.Go(func() error {
		klog.FromContext(ctx).Info("Serving CSI", "endpoint", d.opts.Endpoint, "mode", d.opts.Mode, "nodeID", d.opts.NodeID)
		if err := srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("serve %s: %w", d.opts.Endpoint, err)
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		stopped := make(chan struct{})
		go func() {
			srv.GracefulStop()
			close(stopped)
		}()
		t := time.NewTimer(gracePeriod)
		defer t.Stop()
		select {
		case <-stopped:
		case <-t.C:
			srv.Stop()
		}
		return nil
	})
}

// serveHTTP listens on HTTPAddr and serves HTTPHandler (metrics, health) in g until ctx ends,
// then shuts down within gracePeriod. It returns an error, and starts nothing, when it cannot
// listen; a server that fails later is g's error.
func (d *Driver) serveHTTP(ctx context.Context, g *errgroup.Group) error {
	hs := &http.Server{
		Addr: d.opts.HTTPAddr, Handler: d.HTTPHandler(),
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second,
	}
	hl, err := net.Listen("tcp", d.opts.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", d.opts.HTTPAddr, err)
	}
	g.Go(func() error {
		if err := hs.Serve(hl); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve http %s: %w", d.opts.HTTPAddr, err)
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), gracePeriod)
		defer cancel()
		_ = hs.Shutdown(sctx)
		return nil
	})
	return nil
}

// runBackground starts in g, until ctx ends, the loops beside the servers: the node's zone
// fetch and capacity reporter (CapacityReporter.Run, whose failure is logged, not returned),
// the controller's cloud check, and every Deps.Background function.
func (d *Driver) runBackground(ctx context.Context, g *errgroup.Group) {
	if d.node != nil {
		g.Go(func() error { d.node.topo.Fetch(ctx); return nil })
		g.Go(func() error {
			if err := d.deps.Capacity.Run(ctx); err != nil && ctx.Err() == nil {
				klog.FromContext(ctx).Error(err, "Capacity refresher stopped")
			}
			return nil
		})
	}
	if d.controller != nil {
		g.Go(func() error { d.checkCloud(ctx); return nil })
	}
	for _, f := range d.deps.Background {
		g.Go(func() error { f(ctx); return nil })
	}
}

// cloudWaitMessage says why checkCloud's call failed, for its log line: a cloud that answers
// 401 is reachable, and "not reachable" would send the reader to the network instead of to
// --cloud-token-file.
func cloudWaitMessage(err error, tokenFile string) string {
	switch {
	case cloud.CodeOf(err) != cloud.CodeUnauthenticated:
		return "Cloud not reachable yet"
	case tokenFile == "":
		return "Cloud refused the controller: no --cloud-token-file was given"
	default:
		return "Cloud refused the token in --cloud-token-file"
	}
}

// checkCloud lists one volume until the cloud answers, so that Probe turns ready without
// waiting for the first controller RPC.
func (d *Driver) checkCloud(ctx context.Context) {
	retryUntil(ctx, func(ctx context.Context, retryIn time.Duration) bool {
		_, err := d.deps.ControllerCloud.ListVolumes(ctx, 1, "")
		if err == nil {
			d.ready.ControllerReady()
			return true
		}
		if ctx.Err() != nil {
			return true
		}
		klog.FromContext(ctx).Error(err, cloudWaitMessage(err, d.opts.CloudTokenFile), "retryIn", retryIn,
			"tokenFile", d.opts.CloudTokenFile)
		return false
	})
}

// retryUntil calls try at once and again until it returns true or ctx ends, pausing 1s after
// the first failed try, doubling up to 30s (the start-up checks that wait for the cloud:
// checkCloud, Topology.Fetch). try gets the pause that follows it if it fails, for its log.
func retryUntil(ctx context.Context, try func(ctx context.Context, retryIn time.Duration) bool) {
	next := wait.Backoff{Duration: time.Second, Factor: 2, Cap: 30 * time.Second, Steps: math.MaxInt32}.DelayFunc()
	var pause time.Duration
	// Until ends only with try's true or ctx's end; neither is an error here.
	_ = wait.DelayFunc(func() time.Duration { return pause }).Until(ctx, true, true, func(ctx context.Context) (bool, error) {
		pause = next()
		return try(ctx, pause), nil
	})
}
