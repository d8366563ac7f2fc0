package csi

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/capacity"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/nodestate"
)

// shortDir is a temp dir with a path short enough for a unix socket (108 bytes).
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

type runningDriver struct {
	d    *Driver
	conn *grpc.ClientConn
	reg  *prometheus.Registry
	fake *realCloud
	sock string
	done chan error
	stop context.CancelFunc
}

func startDriver(t *testing.T, mode string) *runningDriver {
	t.Helper()
	dir := shortDir(t)
	f := newRealCloud(t)
	f.AddInstance("i-1", "zone-a", 8, 1)
	opts := DefaultOptions()
	opts.Mode, opts.NodeID, opts.StateDir, opts.Version = mode, "i-1", filepath.Join(dir, "state"), "v0.0.0-test"
	sock := filepath.Join(dir, "csi.sock")
	opts.Endpoint = "unix://" + sock
	reg := prometheus.NewRegistry()
	d, err := New(opts, Deps{ControllerCloud: f, NodeCloud: f, Mounter: mount.NewFake(), Capacity: &fixedCapacity{slots: 7}, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	// A stale socket from a "previous process" must not stop the start.
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	r := &runningDriver{d: d, conn: conn, reg: reg, fake: f, sock: sock, done: done, stop: cancel}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		<-done
	})
	return r
}

func TestDriverServesModes(t *testing.T) {
	for _, tc := range []struct {
		mode             string
		controller, node bool
	}{{ModeController, true, false}, {ModeNode, false, true}, {ModeAll, true, true}} {
		t.Run(tc.mode, func(t *testing.T) {
			r := startDriver(t, tc.mode)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			info, err := csi.NewIdentityClient(r.conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{}, grpc.WaitForReady(true))
			if err != nil || info.GetName() != DriverName || info.GetVendorVersion() != "v0.0.0-test" {
				t.Fatalf("GetPluginInfo = %v, %v", info, err)
			}
			caps, err := csi.NewIdentityClient(r.conn).GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
			wantCode(t, err, codes.OK)
			hasController := false
			for _, c := range caps.GetCapabilities() {
				if c.GetService().GetType() == csi.PluginCapability_Service_CONTROLLER_SERVICE {
					hasController = true
				}
			}
			if hasController != tc.controller {
				t.Errorf("CONTROLLER_SERVICE advertised = %v, want %v", hasController, tc.controller)
			}
			_, err = csi.NewControllerClient(r.conn).ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
			wantCode(t, err, map[bool]codes.Code{true: codes.OK, false: codes.Unimplemented}[tc.controller])
			_, err = csi.NewNodeClient(r.conn).NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
			wantCode(t, err, map[bool]codes.Code{true: codes.OK, false: codes.Unimplemented}[tc.node])

			// Readiness comes from the background checks.
			deadline := time.Now().Add(5 * time.Second)
			for {
				p, err := csi.NewIdentityClient(r.conn).Probe(ctx, &csi.ProbeRequest{})
				wantCode(t, err, codes.OK)
				if p.GetReady().GetValue() {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("Probe never became ready")
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

func TestDriverPublishAndMetrics(t *testing.T) {
	r := startDriver(t, ModeAll)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc := csi.NewControllerClient(r.conn)
	v, err := cc.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc", VolumeCapabilities: []*csi.VolumeCapability{rwo}}, grpc.WaitForReady(true))
	wantCode(t, err, codes.OK)
	r.fake.SetInstanceLimits("i-1", 1, 1)
	_, err = cc.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: v.GetVolume().GetVolumeId(), NodeId: "i-1", VolumeCapability: rwo})
	wantCode(t, err, codes.ResourceExhausted)
	// i-1 is in its publish backoff window now: the throttled attach goes to another node.
	r.fake.AddInstance("i-2", "zone-a", 8, 0)
	r.fake.FailNext(cloud.OperationAttachVolume, cloud.NewError(cloud.CodeThrottled, "slow down"))
	_, err = cc.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: v.GetVolume().GetVolumeId(), NodeId: "i-2", VolumeCapability: rwo})
	wantCode(t, err, codes.Unavailable)
	ni, err := csi.NewNodeClient(r.conn).NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	wantCode(t, err, codes.OK)
	if ni.GetMaxVolumesPerNode() != 7 {
		t.Errorf("max_volumes_per_node = %d, want 7", ni.GetMaxVolumesPerNode())
	}

	const publish = "/csi.v1.Controller/ControllerPublishVolume"
	for code, want := range map[string]float64{"ResourceExhausted": 1, "Unavailable": 1, "OK": 0} {
		got := testutil.ToFloat64(r.d.metrics.calls.WithLabelValues(publish, code))
		if got != want {
			t.Errorf("requests_total{method=publish,code=%s} = %v, want %v", code, got, want)
		}
	}

	srv := httptest.NewServer(r.d.HTTPHandler())
	defer srv.Close()
	for path, want := range map[string]string{
		"/healthz":        "ok",
		"/metrics":        `fakecloud_csi_grpc_requests_total{code="ResourceExhausted",method="` + publish + `"} 1`,
		"/debug/capacity": `"slots": 7`,
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		buf := make([]byte, 1<<16)
		for {
			n, err := resp.Body.Read(buf)
			b.WriteString(string(buf[:n]))
			if err != nil {
				break
			}
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(b.String(), want) {
			t.Errorf("GET %s = %d, body lacks %q:\n%s", path, resp.StatusCode, want, b.String())
		}
		if path == "/debug/capacity" && !json.Valid([]byte(b.String())) {
			t.Errorf("/debug/capacity is not JSON: %s", b.String())
		}
	}
	// No Kubernetes API here, so no cluster check to show.
	if resp, err := http.Get(srv.URL + "/debug/cluster"); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /debug/cluster without a cluster check = %d, want 404", resp.StatusCode)
	}

	r.stop()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("Run returned %v after ctx ended, want nil", err)
		}
		r.done <- nil // for the cleanup
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return after ctx ended")
	}
	if _, err := os.Stat(r.sock); !os.IsNotExist(err) {
		t.Errorf("socket still there after stop: %v", err)
	}
}

func TestRunRefusesNonSocket(t *testing.T) {
	dir := shortDir(t)
	p := filepath.Join(dir, "csi.sock")
	if err := os.WriteFile(p, []byte("not a socket"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Mode, opts.Endpoint = ModeController, "unix://"+p
	d, err := New(opts, Deps{ControllerCloud: newRealCloud(t), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Run(context.Background()); err == nil {
		t.Fatal("Run replaced a regular file with its socket")
	}
	if b, _ := os.ReadFile(p); string(b) != "not a socket" {
		t.Error("the regular file was changed")
	}
}

func TestNewRequiresDeps(t *testing.T) {
	opts := DefaultOptions()
	opts.NodeID = "i-1"
	if _, err := New(opts, Deps{}); err == nil {
		t.Fatal("New without dependencies succeeded")
	}
}

// Both reporters are CapacityReporters, Run included.
var (
	_ CapacityReporter = (*capacity.Reporter)(nil)
	_ CapacityReporter = (*capacity.Static)(nil)
)

// refreshingCapacity is a fixedCapacity whose Run is a background refresher that runs until
// its ctx ends.
type refreshingCapacity struct {
	fixedCapacity
	running chan struct{}
	stopped chan struct{}
}

func (c *refreshingCapacity) Run(ctx context.Context) error {
	close(c.running)
	<-ctx.Done()
	close(c.stopped)
	return nil
}

func TestDriverRunsTheRefresherAndFeedsTheLiveCount(t *testing.T) {
	dir := shortDir(t)
	f := newRealCloud(t)
	f.AddInstance("i-1", "zone-a", 8, 1)
	c := &refreshingCapacity{fixedCapacity: fixedCapacity{slots: 7}, running: make(chan struct{}), stopped: make(chan struct{})}
	opts := DefaultOptions()
	opts.Mode, opts.NodeID, opts.StateDir, opts.KubeletRoot = ModeNode, "i-1", filepath.Join(dir, "state"), dir
	opts.Endpoint = "unix://" + filepath.Join(dir, "csi.sock")
	m := mount.NewFake()
	// The composition root builds the tracker first and gives the same one to the reporter
	// (its AttachedHereFunc) and to the node service.
	staged := nodestate.NewStaged(nodestate.NewDir(opts.StateDir), m)
	var count capacity.AttachedHereFunc = staged.Count
	d, err := New(opts, Deps{NodeCloud: f, Mounter: m, Capacity: c, Staged: staged, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	staging := filepath.Join(dir, "staging")
	if _, err := d.node.NodeStageVolume(context.Background(), &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging, VolumeCapability: rwo}); err != nil {
		t.Fatal(err)
	}
	if n, err := count(); n != 1 || err != nil {
		t.Errorf("count = %d, %v; want 1", n, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	select {
	case <-c.running:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not start the capacity refresher")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	select {
	case <-c.stopped:
	default:
		t.Error("the refresher was still running after Run returned")
	}
}

// The controller's start-up wait for the cloud names a missing or refused token instead of
// the network when the cloud answered 401 (a newcomer started it without --cloud-token-file
// and read "Cloud not reachable yet ... Unauthenticated").
func TestCloudWaitMessage(t *testing.T) {
	refused := fmt.Errorf("list volumes: %w", cloud.ErrUnauthenticated)
	down := fmt.Errorf("list volumes: %w", &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded})
	for _, tc := range []struct {
		name, tokenFile string
		err             error
		want            string
	}{
		{"no token", "", refused, "Cloud refused the controller: no --cloud-token-file was given"},
		{"a refused token", "/run/token", refused, "Cloud refused the token in --cloud-token-file"},
		{"the network", "/run/token", down, "Cloud not reachable yet"},
		{"the network, no token", "", down, "Cloud not reachable yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := cloudWaitMessage(tc.err, tc.tokenFile); got != tc.want {
				t.Errorf("cloudWaitMessage = %q, want %q", got, tc.want)
			}
		})
	}
}
