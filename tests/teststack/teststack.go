// Package teststack starts the real pair in process for integration tests and benchmarks: a
// fake cloud (pkg/cloud/server) serving HTTP on a loopback port and one driver process's
// services (pkg/csi) on a unix socket, talking to each other over the network as in
// production. Everything stops in tb.Cleanup.
package teststack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/fakecloud/fakecloud-csi/internal/stack"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
	csidriver "github.com/fakecloud/fakecloud-csi/pkg/csi"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/clustercheck"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

// Tokens of the stack's fake cloud, one per role.
const (
	DriverToken = "driver-token"
	AdminToken  = "admin-token"
)

// Config shapes the stack. Instances are seeded with one instance type whose limit is
// AttachLimit; the driver serves NodeID (which must be one of Instances) in mode all.
type Config struct {
	// AttachLimit is the instance type's maxAttachments, in slots.
	AttachLimit int
	// Instances are seeded in zone-a, each with one out-of-band slot (a boot disk).
	Instances []string
	// NodeID is the instance the driver's node service reports; default Instances[0].
	NodeID string
	// DataDir is the fake cloud's bbolt directory; empty means nothing persists.
	DataDir string
	// AttachmentQuota is the account's attachment quota; default 1000.
	AttachmentQuota int64
	// CapacityMinInterval is the node plugin's minimum time between two capacity lookups in
	// the cloud (--capacity-min-interval). Zero means 1 ms, so that tests see capacity
	// changes at once; benchmarks that measure something else pass the production default
	// (capacity.DefaultMinInterval, 5 s) so that the reporter's lookups and state-file
	// fsyncs do not compete with what they measure.
	CapacityMinInterval time.Duration
	// AttachDuration and DetachDuration are the fake cloud's transition durations
	// (server.Config); zero means the fakecloud command's defaults (server.DefaultAttachDuration,
	// DefaultDetachDuration), so every stack exercises the asynchronous attach; a negative
	// value means 0, a synchronous cloud.
	AttachDuration time.Duration
	DetachDuration time.Duration
	// KubeletRoot is the node plugin's --kubelet-root: the staging and target paths of node
	// calls must lie inside it. Empty: the driver's default, /var/lib/kubelet.
	KubeletRoot string
}

// Stack is a running fake cloud and driver.
type Stack struct {
	// Endpoint is the driver's unix:// CSI endpoint.
	Endpoint string
	// CloudURL is the fake cloud's base URL (http://127.0.0.1:port).
	CloudURL string
	// Admin is a fake cloud client with the admin role, to change the cloud behind the
	// driver's back.
	Admin *admin.Client
	// Conn is a gRPC connection to the driver.
	Conn *grpc.ClientConn
	// NodeID is the instance the driver's node service reports.
	NodeID string
}

// Start starts a stack, the steps of internal/stack run in process, and waits until the
// driver's Probe says ready (up to 20 s).
func Start(tb testing.TB, cfg Config) *Stack {
	tb.Helper()
	cfg = cfg.withDefaults()
	// Unix socket paths are limited to 108 bytes; tb.TempDir() under a long test name is not.
	dir, err := os.MkdirTemp("", "stack")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	st := stack.Stack{
		Cloud: stack.Cloud{Listen: ln.Addr().String()},
		Plugins: []stack.Plugin{{
			Name: "driver", ID: "driver", Mode: csidriver.ModeAll, NodeID: cfg.NodeID,
			Socket: filepath.Join(dir, "csi.sock"), CloudURL: "http://" + ln.Addr().String(),
			StateDir: filepath.Join(dir, "state"), KubeletRoot: cfg.KubeletRoot,
			CapacityMinInterval: cfg.CapacityMinInterval,
		}},
		Timeout: 20 * time.Second,
	}
	l := &inProcess{tb: tb, cfg: cfg, ln: ln}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	tb.Cleanup(l.stop)
	if err := stack.Run(l.ctx, st.Steps(l), nil); err != nil {
		tb.Fatal(err)
	}
	adminClient, err := admin.NewClient(st.Cloud.URL(), cloud.WithToken(AdminToken))
	if err != nil {
		tb.Fatal(err)
	}
	conn, err := grpc.NewClient(st.Plugins[0].Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return &Stack{Endpoint: st.Plugins[0].Endpoint(), CloudURL: st.Cloud.URL(), Admin: adminClient, Conn: conn, NodeID: cfg.NodeID}
}

// withDefaults fills what Config leaves to its defaults.
func (cfg Config) withDefaults() Config {
	if cfg.NodeID == "" {
		cfg.NodeID = cfg.Instances[0]
	}
	if cfg.AttachmentQuota == 0 {
		cfg.AttachmentQuota = 1000
	}
	if cfg.CapacityMinInterval <= 0 {
		cfg.CapacityMinInterval = time.Millisecond
	}
	return cfg
}

// inProcess is the stack's Launcher in this process: the fake cloud serves on ln from
// cfg's server.Config (the in-process form of its flags), the driver's services from its
// flags parsed as cmd/driver parses them. stop ends both.
type inProcess struct {
	tb     testing.TB
	cfg    Config
	ln     net.Listener
	ctx    context.Context
	cancel context.CancelFunc

	srv                   *server.Server
	cloudDone, driverDone chan error
}

// Launch starts c in a goroutine under l.ctx.
func (l *inProcess) Launch(_ context.Context, c stack.Component) error {
	switch c.Program {
	case stack.ProgramFakeCloud:
		return l.startCloud()
	case stack.ProgramDriver:
		return l.startDriver(c.Args)
	}
	return fmt.Errorf("no in-process form of program %q", c.Program)
}

func (l *inProcess) startCloud() error {
	srv, err := server.New(l.cfg.serverConfig())
	if err != nil {
		return err
	}
	l.srv, l.cloudDone = srv, make(chan error, 1)
	go func() { l.cloudDone <- srv.Serve(l.ctx, l.ln) }()
	return nil
}

func (l *inProcess) startDriver(args []string) error {
	opts := csidriver.DefaultOptions()
	fs := pflag.NewFlagSet("driver", pflag.ContinueOnError)
	opts.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("driver flags %q: %w", args, err)
	}
	opts.Version = "v0.0.0-test"
	if err := opts.Validate(); err != nil {
		return err
	}
	driverClient, err := cloud.NewClient(opts.CloudURL, cloud.WithToken(DriverToken))
	if err != nil {
		return err
	}
	var m mount.Mounter = mount.NewFake()
	if os.Geteuid() == 0 {
		m = mount.NewLinux() // real bind mounts; as another user the fake stands in
	}
	d, err := csidriver.NewForCloud(opts, driverClient, clustercheck.Decide(l.ctx, opts.ClusterCheckConfig(), nil, nil), m, prometheus.NewRegistry())
	if err != nil {
		return err
	}
	l.driverDone = make(chan error, 1)
	go func() { l.driverDone <- d.Run(l.ctx) }()
	return nil
}

// stop ends what Launch started and reports how it ended.
func (l *inProcess) stop() {
	l.cancel()
	if l.driverDone != nil {
		if err := <-l.driverDone; err != nil {
			l.tb.Errorf("driver Run: %v", err)
		}
	}
	if l.cloudDone != nil {
		if err := <-l.cloudDone; err != nil && !errors.Is(err, http.ErrServerClosed) {
			l.tb.Errorf("fake cloud Serve: %v", err)
		}
	}
	if l.srv != nil {
		_ = l.srv.Close()
	} else {
		_ = l.ln.Close()
	}
}

// serverConfig is the fake cloud of cfg: one instance type whose limit is AttachLimit, the
// Instances in zone-a with one out-of-band slot each, a driver and an admin token.
func (cfg Config) serverConfig() server.Config {
	seed := server.Seed{
		InstanceTypes: []cloud.InstanceType{{Name: "test", MaxAttachments: cfg.AttachLimit}},
		Quotas:        &store.Limits{Attachments: cfg.AttachmentQuota, Volumes: 100000, CapacityBytes: 1 << 50},
	}
	for _, id := range cfg.Instances {
		seed.Instances = append(seed.Instances, store.SeedInstance{CreateInstanceRequest: cloud.CreateInstanceRequest{
			ID: id, Zone: "zone-a", InstanceType: "test", OutOfBandSlots: 1,
		}})
	}
	durations := func(d, def time.Duration) time.Duration {
		switch {
		case d < 0:
			return 0
		case d == 0:
			return def
		}
		return d
	}
	return server.Config{
		Seed:           seed,
		DataDir:        cfg.DataDir,
		AttachDuration: durations(cfg.AttachDuration, server.DefaultAttachDuration),
		DetachDuration: durations(cfg.DetachDuration, server.DefaultDetachDuration),
		Tokens:         []server.Token{{Token: DriverToken, Role: server.RoleDriver}, {Token: AdminToken, Role: server.RoleAdmin}},
	}
}

// MountCapability is a single-node-writer filesystem volume capability.
func MountCapability() *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

// CreateVolume creates a 1 GiB volume named name through the driver and returns its ID.
func (s *Stack) CreateVolume(tb testing.TB, name string) string {
	tb.Helper()
	resp, err := csi.NewControllerClient(s.Conn).CreateVolume(context.Background(), &csi.CreateVolumeRequest{
		Name:               name,
		CapacityRange:      &csi.CapacityRange{RequiredBytes: 1 << 30},
		VolumeCapabilities: []*csi.VolumeCapability{MountCapability()},
	})
	if err != nil {
		tb.Fatalf("create volume %s: %v", name, err)
	}
	return resp.GetVolume().GetVolumeId()
}

// PublishRequest is a ControllerPublishVolume of volumeID to nodeID with MountCapability.
func PublishRequest(volumeID, nodeID string) *csi.ControllerPublishVolumeRequest {
	return &csi.ControllerPublishVolumeRequest{VolumeId: volumeID, NodeId: nodeID, VolumeCapability: MountCapability()}
}
