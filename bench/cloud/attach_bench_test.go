// Package cloud_test benchmarks the fake cloud's attach path: attach+detach through HTTP on a
// real loopback server, with the durable bbolt store on disk, against a bare gorilla/mux JSON
// handler that stores nothing, so the cost of durability is visible.
//
//	go test -run '^$' -bench AttachDetach -benchtime 2s ./bench/cloud/
//
// The target (≥ 50% of the bare handler's ops/s) is about what a cloud serves: many concurrent
// callers (the external-attacher runs many workers, and every node's driver talks to the same
// cloud), measured by the parallel sub-benchmarks. The sequential ones are fsync-bound by
// design: one caller waits for each acknowledged change to reach the disk before it sends the
// next, so they measure the disk's fsync latency, not the cloud's throughput.
//
// Both clouds answer synchronously. The durable one runs with zero transition durations
// (server.Config's zero value; docs/attach.md): the request's own commit takes the volume to
// attached or detached, so each request is one mutation in a group commit, and its 200 says
// the change is on disk. With the fakecloud command's default 300 ms an attach answers 202 at
// the start and the transition worker completes it in a second, batched commit; that mode
// adds simulated time, not cost per request, and is not what these figures are. cycle
// checks every answer's state, so a change of default would fail the benchmark rather than
// quietly measure 202s.
package cloud_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/mux"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
)

const (
	// clients is about how many requests a busy cloud has in flight: a few external-attacher
	// workers per controller plus node plugins.
	clients = 64
	// nodes spreads the volumes so that no instance reaches its attach limit.
	nodes = 8
)

// discardLogger formats every line as the fakecloud command's klog does at its default
// verbosity (0), so the server pays for its request log as in production, and writes it to
// io.Discard. The server logs through klog.FromContext of the request's context, which is
// the global klog (stderr) without one: go test -bench prints the binary's stderr with its
// stdout, and the sampled "Request" lines landed in the middle of benchmark rows, moving their
// figures to a line of their own that hack/bench.sh dropped.
func discardLogger() klog.Logger {
	return textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(io.Discard), textlogger.Verbosity(0)))
}

// serve runs h on 127.0.0.1:0 until the benchmark ends and returns its URL. Requests carry
// discardLogger in their context, as server.Serve gives them its Config.Logger.
func serve(b *testing.B, h http.Handler) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx := klog.NewContext(context.Background(), discardLogger())
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() { _ = hs.Serve(ln) }()
	b.Cleanup(func() { _ = hs.Close() })
	return "http://" + ln.Addr().String()
}

// client is the cloud's Go client, which keeps a keep-alive connection per concurrent caller
// (up to 64, as many as clients), so that the benchmark measures requests, not TCP set-up.
func client(b *testing.B, url string) *admin.Client {
	b.Helper()
	c, err := admin.NewClient(url, cloud.WithToken("bench"))
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// target is a cloud under test and the volumes its callers attach, one per caller.
type target struct {
	c    *admin.Client
	vols []string
}

func nodeOf(i int) string { return fmt.Sprint("node-", i%nodes) }

// durableCloud is a real fake cloud with its store on disk and n volumes to attach.
func durableCloud(b *testing.B, n int) target {
	b.Helper()
	seed := server.Seed{
		InstanceTypes: []cloud.InstanceType{{Name: "huge", MaxAttachments: 128}},
		Quotas:        &store.Limits{Attachments: 10 * int64(n), Volumes: 10 * int64(n), CapacityBytes: 1 << 40},
	}
	for i := range nodes {
		seed.Instances = append(seed.Instances, store.SeedInstance{CreateInstanceRequest: cloud.CreateInstanceRequest{ID: nodeOf(i), Zone: "z", InstanceType: "huge"}})
	}
	logger := discardLogger()
	srv, err := server.New(server.Config{
		DataDir: b.TempDir(),
		Tokens:  []server.Token{{Token: "bench", Role: server.RoleDriver}},
		Seed:    seed,
		Logger:  &logger,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Close() })
	t := target{c: client(b, serve(b, srv.Handler()))}
	for i := range n {
		v, err := t.c.CreateVolume(context.Background(), cloud.CreateVolumeRequest{Name: fmt.Sprint("bench-", i), SizeBytes: 1, Zone: "z"})
		if err != nil {
			b.Fatal(err)
		}
		t.vols = append(t.vols, v.ID)
	}
	return t
}

// bareCloud answers attach and detach with the same JSON shapes and no storage at all.
func bareCloud(b *testing.B, n int) target {
	b.Helper()
	r := mux.NewRouter()
	handler := func(w http.ResponseWriter, req *http.Request) {
		var in cloud.AttachRequest
		dec := json.NewDecoder(req.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		id := mux.Vars(req)["id"]
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(cloud.Attachment{VolumeID: id, InstanceID: in.InstanceID, Device: store.DevicePrefix + id, Revision: 1})
	}
	r.HandleFunc("/v1/volumes/{id}/attach", handler).Methods(http.MethodPost)
	r.HandleFunc("/v1/volumes/{id}/detach", handler).Methods(http.MethodPost)
	t := target{c: client(b, serve(b, r))}
	for i := range n {
		t.vols = append(t.vols, fmt.Sprintf("vol-%08x", i+1))
	}
	return t
}

// cycle attaches volume i to its node and detaches it again; it returns how long the attach
// took.
func (t target) cycle(ctx context.Context, i int) (time.Duration, error) {
	start := time.Now()
	a, err := t.c.AttachVolume(ctx, t.vols[i], nodeOf(i))
	if err != nil {
		return 0, err
	}
	attach := time.Since(start)
	if a.State != "" && a.State != cloud.StateAttached {
		return 0, fmt.Errorf("attach of %s answered state %q, want attached (a synchronous cloud)", t.vols[i], a.State)
	}
	d, err := t.c.DetachVolume(ctx, t.vols[i], nodeOf(i))
	if err != nil {
		return 0, err
	}
	if d.State != "" && d.State != cloud.StateDetached {
		return 0, fmt.Errorf("detach of %s answered state %q, want detached (a synchronous cloud)", t.vols[i], d.State)
	}
	return attach, nil
}

// result is one measured run: attach+detach cycles (two requests each) in elapsed time, and
// every attach's latency.
type result struct {
	cycles  int
	elapsed time.Duration
	attach  []time.Duration
	// cpu is the process's CPU time (user + system, getrusage) over the run: the client's
	// share is the same for both sides, so the ratio of CPU per op is what the throughput
	// ratio tends to on a machine where the benchmark is CPU-bound, and unlike throughput it
	// hardly moves with other load on the machine.
	cpu time.Duration
}

func (r result) cpuPerOp() time.Duration { return r.cpu / time.Duration(max(1, 2*r.cycles)) }

// processCPU is the CPU time the process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (r result) opsPerSec() float64 { return float64(2*r.cycles) / r.elapsed.Seconds() }

func (r result) p99() time.Duration {
	if len(r.attach) == 0 {
		return 0
	}
	slices.Sort(r.attach)
	return r.attach[(len(r.attach)*99)/100]
}

func (r result) report(b *testing.B, prefix string) {
	b.ReportMetric(r.opsPerSec(), prefix+"ops/s")
	b.ReportMetric(float64(r.p99().Microseconds())/1000, prefix+"p99-attach-ms")
	b.ReportMetric(float64(r.cpuPerOp().Nanoseconds())/1000, prefix+"cpu-µs/op")
}

func (r *result) add(o result) {
	r.cycles += o.cycles
	r.elapsed += o.elapsed
	r.cpu += o.cpu
	r.attach = append(r.attach, o.attach...)
}

// run makes n cycles from callers concurrent callers, caller i on volume i, and returns what
// it measured. The first error stops it.
func run(b *testing.B, t target, callers, n int) result {
	b.Helper()
	ctx := context.Background()
	var (
		next atomic.Int64
		mu   sync.Mutex
		wg   sync.WaitGroup
		r    = result{cycles: n, attach: make([]time.Duration, 0, n)}
	)
	start, cpu := time.Now(), processCPU()
	for i := range callers {
		wg.Go(func() {
			lat := make([]time.Duration, 0, n/callers+1)
			for next.Add(1) <= int64(n) {
				d, err := t.cycle(ctx, i)
				if err != nil {
					b.Error(err)
					return
				}
				lat = append(lat, d)
			}
			mu.Lock()
			r.attach = append(r.attach, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	r.elapsed, r.cpu = time.Since(start), processCPU()-cpu
	return r
}

// rounds is how many slices of its cycles the ratio alternates between the two sides, so that
// a change of machine load during the run falls on both alike.
const rounds = 10

// BenchmarkAttachDetach reports ops/s (each attach or detach request is one op) and the p99
// attach latency of the durable fake cloud and of the bare handler, one caller at a time and
// with many concurrent callers, and durable/bare, the share of the bare handler's throughput
// the durable store keeps (target ≥ 0.5 for the parallel case). The ratio runs both sides
// in alternating slices of the same number of cycles (rounds), in one run, and also reports
// cpu-bare/durable, the bare handler's CPU per op over the durable cloud's: the throughput
// ratio's CPU part, which other load on the machine hardly moves.
func BenchmarkAttachDetach(b *testing.B) {
	durable := durableCloud(b, clients)
	bare := bareCloud(b, clients)
	for _, mode := range []struct {
		name    string
		callers int
	}{
		{"sequential", 1},
		{fmt.Sprint("parallel-", clients), clients},
	} {
		b.Run(mode.name, func(b *testing.B) {
			b.Run("durable", func(b *testing.B) { run(b, durable, mode.callers, b.N).report(b, "") })
			b.Run("bare", func(b *testing.B) { run(b, bare, mode.callers, b.N).report(b, "") })
			b.Run("ratio", func(b *testing.B) {
				var rd, rb result
				// Slices of at least a few cycles per caller, so that every caller is busy.
				chunk := max(4*mode.callers, b.N/rounds)
				for i := range rounds {
					// Each side goes first every other round.
					first, second, fr, sr := durable, bare, &rd, &rb
					if i%2 == 1 {
						first, second, fr, sr = bare, durable, &rb, &rd
					}
					fr.add(run(b, first, mode.callers, chunk))
					sr.add(run(b, second, mode.callers, chunk))
				}
				rd.report(b, "durable-")
				rb.report(b, "bare-")
				b.ReportMetric(rd.opsPerSec()/rb.opsPerSec(), "durable/bare")
				b.ReportMetric(float64(rb.cpuPerOp())/float64(rd.cpuPerOp()), "cpu-bare/durable")
			})
		})
	}
}
