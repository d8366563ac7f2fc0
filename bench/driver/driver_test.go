// Package driver_test benchmarks the driver against the real fake cloud on loopback: how
// NodeGetInfo (the kubelet's periodic call) compares with a bare gRPC health check (a unary
// call) on a unix socket, and how many ControllerPublishVolume calls per second driver +
// cloud sustain.
// Run with `make bench` (hack/bench.sh), which prints the figures docs/figures.md quotes.
package driver_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/capacity"
	"github.com/fakecloud/fakecloud-csi/tests/teststack"
)

// BenchmarkNodeGetInfoVsEcho interleaves NodeGetInfo on the driver (its capacity cache warm)
// with a grpc.health Check on two bare servers over unix sockets, so all three see the same
// machine load, and reports each one's p99 and the ratios. Target (docs/figures.md):
// NodeGetInfo p99 <= 1.05x echo.
//
// The two bare servers: "echo" is gRPC's default (a new goroutine per call); "workers" has
// the stream workers the driver's server has (grpc.NumStreamWorkers, GOMAXPROCS of them, as
// pkg/csi/driver.go sets), whose goroutines serve call after call without growing a fresh
// stack each time. p99-ratio compares NodeGetInfo with the default server, what a bare gRPC
// call costs; p99-ratio-workers with the same server options, so it is the cost of the
// driver's interceptors and handler alone.
//
// The node plugin runs with the production lookup interval (capacity.DefaultMinInterval,
// 5 s), so the cache is warm as the kubelet finds it. With teststack's 1 ms for tests, its
// background refresher asked the in-process cloud a thousand times a second during the
// measurement, and most NodeGetInfo calls found a lookup due and waited for one: that, not
// the driver's code, was most of the gap to the bare call.
func BenchmarkNodeGetInfoVsEcho(b *testing.B) {
	s := teststack.Start(b, teststack.Config{AttachLimit: 16, Instances: []string{"node-1"}, CapacityMinInterval: capacity.DefaultMinInterval})
	node := csi.NewNodeClient(s.Conn)
	echo := startEcho(b)
	workers := startEcho(b, grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))))
	ctx := context.Background()
	req := &csi.NodeGetInfoRequest{}
	hreq := &healthpb.HealthCheckRequest{}
	if _, err := node.NodeGetInfo(ctx, req); err != nil { // warm the capacity cache
		b.Fatal(err)
	}
	// took[k] are the latencies of calls[k]: NodeGetInfo, echo, workers.
	calls := [3]func() error{
		func() error { _, err := node.NodeGetInfo(ctx, req); return err },
		func() error { _, err := echo.Check(ctx, hreq); return err },
		func() error { _, err := workers.Check(ctx, hreq); return err },
	}
	var took [3][]time.Duration
	for k := range took {
		took[k] = make([]time.Duration, 0, b.N)
	}
	// Every order of the three in turn, so that none always follows another's wake-up.
	orders := [6][3]int{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}, {0, 2, 1}, {2, 1, 0}, {1, 0, 2}}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for _, k := range orders[i%len(orders)] {
			t0 := time.Now()
			if err := calls[k](); err != nil {
				b.Fatal(err)
			}
			took[k] = append(took[k], time.Since(t0))
		}
	}
	b.StopTimer()
	ip99, ep99, wp99 := p99(took[0]), p99(took[1]), p99(took[2])
	b.ReportMetric(float64(ip99.Nanoseconds()), "nodeinfo-p99-ns")
	b.ReportMetric(float64(ep99.Nanoseconds()), "echo-p99-ns")
	b.ReportMetric(float64(wp99.Nanoseconds()), "workers-p99-ns")
	b.ReportMetric(float64(ip99)/float64(ep99), "p99-ratio")
	b.ReportMetric(float64(mean(took[0]))/float64(mean(took[1])), "mean-ratio")
	b.ReportMetric(float64(ip99)/float64(wp99), "p99-ratio-workers")
	b.ReportMetric(float64(mean(took[0]))/float64(mean(took[2])), "mean-ratio-workers")
}

// BenchmarkControllerPublish runs publish + unpublish cycles from 32 concurrent callers (the
// external-attacher's workers) through the driver and a durable fake cloud (bbolt on disk,
// fsync per commit) and reports publishes per second. Target (docs/figures.md): >= 2,000/s on 2 cores.
//
// The stack runs the driver in mode all, so its node plugin's capacity reporter runs too; it
// runs with the production lookup interval (capacity.DefaultMinInterval, 5 s), as a node
// plugin beside a busy controller would, not teststack's 1 ms for tests, which would have it
// ask the cloud and fsync its state file every few milliseconds during the measurement. The
// cloud attaches and detaches synchronously (durations 0).
func BenchmarkControllerPublish(b *testing.B) {
	const callers = 32
	nodes := make([]string, 8)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("node-%d", i)
	}
	s := teststack.Start(b, teststack.Config{
		AttachLimit: 64, Instances: nodes, DataDir: b.TempDir(),
		CapacityMinInterval: capacity.DefaultMinInterval,
		// A synchronous cloud: this measures the driver and the durable store, not the
		// simulated time a cloud takes to attach (docs/attach.md), which would only add sleep.
		AttachDuration: -1, DetachDuration: -1,
	})
	ctrl := csi.NewControllerClient(s.Conn)
	vols := make([]string, callers*4)
	for i := range vols {
		vols[i] = s.CreateVolume(b, fmt.Sprintf("bench-%d", i))
	}
	var next atomic.Int64
	b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0))) // RunParallel starts p x GOMAXPROCS goroutines
	start := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := int(next.Add(1)) - 1
		ctx := context.Background()
		for i := 0; pb.Next(); i++ {
			// Each caller owns 4 volumes, so no two callers hold the same one (that would be
			// an ABORTED in-flight conflict, which is not what is measured here).
			vol := vols[(id*4+i%4)%len(vols)]
			node := nodes[(id+i)%len(nodes)]
			if _, err := ctrl.ControllerPublishVolume(ctx, teststack.PublishRequest(vol, node)); err != nil {
				b.Error(err)
				return
			}
			if _, err := ctrl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: vol, NodeId: node}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "publishes/s")
}

// startEcho serves grpc.health on a unix socket with opts and returns a client of it.
func startEcho(b *testing.B, opts ...grpc.ServerOption) healthpb.HealthClient {
	dir, err := os.MkdirTemp("", "echo")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "echo.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(ln) }()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close(); srv.Stop() })
	return healthpb.NewHealthClient(conn)
}

func p99(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)*99)/100]
}

func mean(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return sum / time.Duration(len(d))
}
