// Package teststack starts the real pair in process for integration tests and benchmarks: a
// fake cloud (pkg/cloud/server) serving HTTP on a loopback port and one driver process's
// services (pkg/csi) on a unix socket, talking to each other over the network as in
// production. Everything stops in tb.Cleanup.
package teststack

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
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
	Admin *cloud.Client
	// Conn is a gRPC connection to the driver.
	Conn *grpc.ClientConn
	// NodeID is the instance the driver's node service reports.
	NodeID string
}

// Start starts a stack and waits until the driver's Probe says ready (up to 20 s).
func Start(tb testing.TB, cfg Config) *Stack {
	tb.Helper()
	if cfg.NodeID == "" {
		cfg.NodeID = cfg.Instances[0]
	}
	if cfg.AttachmentQuota == 0 {
		cfg.AttachmentQuota = 1000
	}
	if cfg.CapacityMinInterval <= 0 {
		cfg.CapacityMinInterval = time.Millisecond
	}
	// Unix socket paths are limited to 108 bytes; tb.TempDir() under a long test name is not.
	dir, err := os.MkdirTemp("", "stack")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })

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
	srv, err := server.New(server.Config{
		Seed:           seed,
		DataDir:        cfg.DataDir,
		AttachDuration: durations(cfg.AttachDuration, server.DefaultAttachDuration),
		DetachDuration: durations(cfg.DetachDuration, server.DefaultDetachDuration),
		Tokens:         []server.Token{{Token: DriverToken, Role: server.RoleDriver}, {Token: AdminToken, Role: server.RoleAdmin}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cloudDone := make(chan error, 1)
	go func() { cloudDone <- srv.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String()

	driverClient, err := cloud.NewClient(url, cloud.WithToken(DriverToken))
	if err != nil {
		tb.Fatal(err)
	}
	admin, err := cloud.NewClient(url, cloud.WithToken(AdminToken))
	if err != nil {
		tb.Fatal(err)
	}

	var m mount.Mounter = mount.NewFake()
	if os.Geteuid() == 0 {
		m = mount.NewLinux() // real bind mounts; as another user the fake stands in
	}
	opts := csidriver.DefaultOptions()
	opts.Mode, opts.NodeID, opts.Version = csidriver.ModeAll, cfg.NodeID, "v0.0.0-test"
	opts.Endpoint = "unix://" + filepath.Join(dir, "csi.sock")
	opts.StateDir = filepath.Join(dir, "state")
	opts.CloudURL = url
	opts.CapacityMinInterval = cfg.CapacityMinInterval
	if cfg.KubeletRoot != "" {
		opts.KubeletRoot = cfg.KubeletRoot
	}
	if err := opts.Validate(); err != nil {
		tb.Fatal(err)
	}
	d, err := csidriver.NewForCloud(opts, driverClient, clustercheck.Decide(ctx, opts.ClusterCheckConfig(), nil, nil), m, prometheus.NewRegistry())
	if err != nil {
		tb.Fatal(err)
	}
	driverDone := make(chan error, 1)
	go func() { driverDone <- d.Run(ctx) }()

	conn, err := grpc.NewClient(opts.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = conn.Close()
		cancel()
		if err := <-driverDone; err != nil {
			tb.Errorf("driver Run: %v", err)
		}
		if err := <-cloudDone; err != nil && !errors.Is(err, http.ErrServerClosed) {
			tb.Errorf("fake cloud Serve: %v", err)
		}
		_ = srv.Close()
	})
	waitReady(tb, conn)
	return &Stack{Endpoint: opts.Endpoint, CloudURL: url, Admin: admin, Conn: conn, NodeID: cfg.NodeID}
}

func waitReady(tb testing.TB, conn *grpc.ClientConn) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		resp, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{}, grpc.WaitForReady(true))
		if err == nil && resp.GetReady().GetValue() {
			return
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("driver not ready: last probe %v, %v", resp, err)
		case <-time.After(20 * time.Millisecond):
		}
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
