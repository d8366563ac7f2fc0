package hostpath_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The programs the benchmark starts, by environment variable (hack/bench.sh sets all three).
const (
	envHostPath  = "HOSTPATH_PLUGIN" // hack/hostpath.sh's bin/hostpathplugin-<version>
	envDriver    = "DRIVER_BIN"      // go build ./cmd/driver of the main module
	envFakeCloud = "FAKECLOUD_BIN"   // go build ./cmd/fakecloud of the main module
	// envRequire=1 turns a skip for a missing program into a failure (hack/bench.sh sets it:
	// a figure docs/figures.md quotes must not vanish in a skip).
	envRequire = "BENCH_REQUIRE"
)

// startTimeout bounds how long a program may take to serve its first call.
const startTimeout = 30 * time.Second

// BenchmarkNodeGetInfoVsHostPath interleaves NodeGetInfo on our node plugin and on
// csi-driver-host-path's, each a real process serving its own unix socket, from this one
// client process, so both see the same machine load, and reports each one's p99 and the
// ratios ours/hostpath. Target (docs/figures.md): p99-ratio-hostpath <= 1.
//
// Ours is bin/driver --mode=node against a fake cloud (--auth=none, --auto-register, so
// node-1 exists once the driver asks), with the production lookup interval (the driver's
// default --capacity-min-interval, 5 s) and its capacity cache warm, as the kubelet finds it
// (bench/driver's BenchmarkNodeGetInfoVsEcho says why the interval matters). Host-path's is
// cmd/hostpathplugin with --nodeid=node-1 and a temporary --statedir; its NodeGetInfo answers
// from memory. The two calls alternate in both orders in turn, so that neither always
// follows the other's wake-up, as BenchmarkNodeGetInfoVsEcho interleaves its three.
func BenchmarkNodeGetInfoVsHostPath(b *testing.B) {
	hostpathBin, driverBin, cloudBin := program(b, envHostPath), program(b, envDriver), program(b, envFakeCloud)
	dir, err := os.MkdirTemp("", "nodeinfo") // short: a unix socket's path is at most 107 bytes
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) }) // registered first, so it runs after the processes stop

	cloudAddr := freeAddr(b)
	start(b, dir, "fakecloud", cloudBin, "--listen="+cloudAddr, "--auth=none", "--auto-register")
	ourSock := filepath.Join(dir, "ours.sock")
	start(b, dir, "driver", driverBin, "--mode=node", "--node-id=node-1", "--endpoint=unix://"+ourSock,
		"--cloud-url=http://"+cloudAddr, "--state-dir="+filepath.Join(dir, "ours-state"))
	hpSock := filepath.Join(dir, "hostpath.sock")
	start(b, dir, "hostpathplugin", hostpathBin, "--endpoint=unix://"+hpSock, "--nodeid=node-1",
		"--drivername=hostpath.csi.k8s.io", "--statedir="+filepath.Join(dir, "hostpath-state"))

	ctx := context.Background()
	req := &csi.NodeGetInfoRequest{}
	ours, hostpath := nodeClient(b, ourSock), nodeClient(b, hpSock)
	// Wait for both to answer; ours's first answer also warms its capacity cache.
	for name, c := range map[string]csi.NodeClient{"driver": ours, "hostpathplugin": hostpath} {
		if err := waitServing(ctx, c); err != nil {
			b.Fatalf("%s does not serve NodeGetInfo: %v; the end of its log:\n%s", name, err, logTail(filepath.Join(dir, name+".log")))
		}
	}

	calls := [2]func() error{
		func() error { _, err := ours.NodeGetInfo(ctx, req); return err },
		func() error { _, err := hostpath.NodeGetInfo(ctx, req); return err },
	}
	var took [2][]time.Duration // took[k] are the latencies of calls[k]: ours, hostpath
	for k := range took {
		took[k] = make([]time.Duration, 0, b.N)
	}
	orders := [2][2]int{{0, 1}, {1, 0}}
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
	op99, hp99 := p99(took[0]), p99(took[1])
	b.ReportMetric(float64(op99.Nanoseconds()), "ours-p99-ns")
	b.ReportMetric(float64(hp99.Nanoseconds()), "hostpath-p99-ns")
	b.ReportMetric(float64(op99)/float64(hp99), "p99-ratio-hostpath")
	b.ReportMetric(float64(mean(took[0]))/float64(mean(took[1])), "mean-ratio-hostpath")
}

// program is the path in environment variable env, an executable file. Without one the
// benchmark skips, saying which and how to get it, or fails when envRequire is 1.
func program(b *testing.B, env string) string {
	p := os.Getenv(env)
	var why string
	if p == "" {
		why = env + " is not set"
	} else if fi, err := os.Stat(p); err != nil {
		why = fmt.Sprintf("%s=%s: %v", env, p, err)
	} else if fi.IsDir() || fi.Mode()&0o111 == 0 {
		why = fmt.Sprintf("%s=%s is not an executable file", env, p)
	}
	if why == "" {
		return p
	}
	msg := why + ": set HOSTPATH_PLUGIN (hack/hostpath.sh builds it), DRIVER_BIN and FAKECLOUD_BIN (go build ./cmd/driver ./cmd/fakecloud), or run make bench"
	if os.Getenv(envRequire) == "1" {
		b.Fatal(msg)
	}
	b.Skip("SKIPPED, no NodeGetInfo comparison with host-path: " + msg)
	return ""
}

// start runs bin with args, its output in dir/<name>.log, and stops it when the benchmark
// ends, failed or not: SIGTERM, then SIGKILL after 5 s.
func start(b *testing.B, dir, name, bin string, args ...string) {
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		b.Fatalf("start %s: %v", name, err)
	}
	// Its exit status is not looked at: killed by the signals below, it is never 0.
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	b.Cleanup(func() {
		defer func() { _ = log.Close() }()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
}

// freeAddr is a loopback host:port free right now, for the fake cloud's --listen.
func freeAddr(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String()
}

// nodeClient is a CSI node client of the unix socket sock, closed when the benchmark ends.
func nodeClient(b *testing.B, sock string) csi.NodeClient {
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	return csi.NewNodeClient(conn)
}

// waitServing calls NodeGetInfo until it answers with a node ID, for at most startTimeout.
func waitServing(ctx context.Context, c csi.NodeClient) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	var last error
	for {
		resp, err := c.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{}, grpc.WaitForReady(true))
		if err == nil && strings.TrimSpace(resp.GetNodeId()) != "" {
			return nil
		}
		if err == nil {
			err = errors.New("empty node ID")
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %s: %w", startTimeout, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// logTail is the last 2 KiB of the log at path: the log goes with the temporary directory
// when the benchmark ends, so a failure quotes it.
func logTail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(log not read: %v)", err)
	}
	const tail = 2 << 10
	if len(data) > tail {
		data = data[len(data)-tail:]
	}
	return string(data)
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
