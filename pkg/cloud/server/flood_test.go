package server_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/faults"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
)

// floodHeapBound is the documented bound (docs/limits.md) on the heap of the process that
// runs the flood: the fake cloud and every flooding client together. It is measured with
// runtime.MemStats in process, not as RSS: the server runs inside the test binary, so RSS
// would also count the test's own clients, the race detector's shadow memory under -race
// and pages the Go runtime has freed but not yet returned; HeapSys (heap memory obtained from
// the OS) is the part that bounded inputs must keep small. Before the bounds, the same kind
// of flood took the server from 62 MB to 486 MB (large rules) and 3.76 GB (parallel reads).
const floodHeapBound = 256 << 20

// countingListener tracks how many accepted connections are open at once.
type countingListener struct {
	net.Listener
	open, peak atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	n := l.open.Add(1)
	for p := l.peak.Load(); n > p && !l.peak.CompareAndSwap(p, n); p = l.peak.Load() {
	}
	return &countedConn{Conn: c, l: l}, nil
}

type countedConn struct {
	net.Conn
	l    *countingListener
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}

// heapSampler records the peak heap while a flood runs.
type heapSampler struct {
	stop               chan struct{}
	done               chan struct{}
	peakAlloc, peakSys uint64
}

func sampleHeap(every time.Duration) *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			h.peakAlloc, h.peakSys = max(h.peakAlloc, m.HeapAlloc), max(h.peakSys, m.HeapSys)
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

func (h *heapSampler) finish() { close(h.stop); <-h.done }

// statusTally counts answers by status and phase and records the undocumented ones.
type statusTally struct {
	mu     sync.Mutex
	counts map[string]int
	bad    []string
}

func (s *statusTally) add(phase string, status int, want ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[fmt.Sprintf("%s %d", phase, status)]++
	for _, w := range want {
		if status == w {
			return
		}
	}
	if len(s.bad) < 20 {
		s.bad = append(s.bad, fmt.Sprintf("%s: status %d, want one of %v", phase, status, want))
	}
}

// parallel runs n calls of fn over workers goroutines.
func parallel(workers, n int, fn func(i int)) {
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// TestFloodStaysBounded floods a real fake cloud on 127.0.0.1:0 with what once blew it up
// (issue 12): fault rules with 1 MB fields, more rules than the cap, a full event log of
// the largest events, parallel full reads of /v1/events and /v1/faults, stacked latency and
// hundreds of idle connections. Every request must get a documented status, no answer may
// exceed its page bound, the connection cap must hold, and the heap must stay under
// floodHeapBound. Loop counts are fixed and every wait is bounded; all traffic is loopback.
func TestFloodStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("flood test skipped in -short")
	}
	const (
		maxConns    = 32
		workers     = 8
		idleConns   = 300
		triggerGets = 330 // 32 FaultFired + 1 FaultFiredMore events each: past the 10,000-event cap
	)
	var maxSleep atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Room for a loaded machine under -race: a 1 s ReadTimeout cut 1 MB bodies off ("use of
	// closed network connection"), a 1 s IdleTimeout closed keep-alive connections the client
	// was just sending a POST on, and a 300 ms ReadHeaderTimeout timed out a reused
	// connection whose headers had arrived before the server goroutine ran again (EOF; Go
	// does not retry a POST): each a status -1. The idle-connection phase, which needs a
	// short ReadHeaderTimeout to shed sockets that never send a byte, has a server of its own.
	cfg := server.Config{Tokens: testTokens(), Seed: testSeed(), MaxConnections: maxConns,
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second,
		// Injected latency is recorded, not waited: the flood measures bounds, not time.
		Sleep: func(_ context.Context, d time.Duration) error {
			for m := maxSleep.Load(); int64(d) > m && !maxSleep.CompareAndSwap(m, int64(d)); m = maxSleep.Load() {
			}
			return nil
		}}
	url, ln := serveFlood(ctx, t, cfg)
	// One transport for the flood, with no more connections than the server serves, so the
	// clients queue instead of piling up sockets the cap would hold back.
	// ExpectContinueTimeout: a request with "Expect: 100-continue" waits for the server's go
	// before it sends its body, as a client that sends bodies over the limit must.
	tr := &http.Transport{MaxConnsPerHost: maxConns / 2, MaxIdleConnsPerHost: maxConns / 2, ExpectContinueTimeout: 10 * time.Second}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: time.Minute}
	admin := newClientHTTP(t, url, adminToken, hc)
	reader := newClientHTTP(t, url, readerToken, hc)
	tally := &statusTally{counts: map[string]int{}}
	do := func(method, path, token, body string) (int, int) {
		req, err := http.NewRequestWithContext(ctx, method, url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		if len(body) > 1<<20 {
			req.Header.Set("Expect", "100-continue")
		}
		var reused, wasIdle bool
		var idleFor time.Duration
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) {
			reused, wasIdle, idleFor = ci.Reused, ci.WasIdle, ci.IdleTime
		}}))
		resp, err := hc.Do(req)
		if err != nil {
			t.Logf("%s %s: no answer (reused %v idle %v for %v, %d bytes): %v", method, path, reused, wasIdle, idleFor, len(body), err)
			return -1, 0 // no answer: counted as an undocumented status
		}
		defer resp.Body.Close()
		n, _ := io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, int(n)
	}

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	heap := sampleHeap(10 * time.Millisecond)
	start := time.Now()
	var phases []string
	last := start
	phase := func(name string) {
		phases = append(phases, fmt.Sprintf("%s %v", name, time.Since(last).Round(time.Millisecond)))
		last = time.Now()
	}

	// 1. Large fields: rules with a ~1 MB instanceId (400) and bodies over the limit (413).
	bigRule := `{"operation":"AttachVolume","error":"Unavailable","instanceId":"` + strings.Repeat("x", 1_000_000) + `"}`
	tooBig := `{"operation":"AttachVolume","error":"Unavailable","instanceId":"` + strings.Repeat("x", 2<<20) + `"}`
	parallel(workers, 30, func(i int) {
		body, want := bigRule, http.StatusBadRequest
		if i%3 == 0 {
			body, want = tooBig, http.StatusRequestEntityTooLarge
		}
		status, _ := do("POST", "/v1/faults", adminToken, body)
		tally.add("large field", status, want)
	})

	phase("large fields")
	// 2. Many rules: up to the cap (201), then past it (409). Each matches every GetVolume
	// and adds 100 ms, so one GetVolume fires all of them: 100 s of stacked latency.
	parallel(workers, faults.DefaultMaxRules+40, func(i int) {
		status, _ := do("POST", "/v1/faults", adminToken, fmt.Sprintf(`{"operation":"GetVolume","latencyMs":100,"seed":%d}`, i))
		tally.add("many rules", status, http.StatusCreated, http.StatusConflict)
	})
	if n := tally.counts["many rules 201"]; n != faults.DefaultMaxRules {
		t.Errorf("%d rules created, want exactly the cap %d", n, faults.DefaultMaxRules)
	}

	phase("many rules")
	// 3. Fill the event log with the largest events and stack the latency: GetVolume of
	// 128-byte IDs, each firing every rule; 100 s asked, so each waits the 60 s cap and
	// answers 503 Unavailable.
	id := strings.Repeat("v", cloud.MaxIDBytes-4)
	parallel(workers, triggerGets, func(i int) {
		status, _ := do("GET", fmt.Sprintf("/v1/volumes/%s%04d", id, i), readerToken, "")
		tally.add("stacked latency", status, http.StatusServiceUnavailable)
	})

	phase("stacked latency")
	// 5. Parallel full reads of events and faults (every page), and single maximum pages.
	parallel(workers, 12, func(i int) { // 4 full reads of each kind at once, as in issue 12
		switch i % 3 {
		case 0:
			evs, err := reader.ListEvents(ctx, 0)
			if err != nil || len(evs) > store.DefaultMaxEvents {
				tally.add(fmt.Sprintf("read events (%d, %v)", len(evs), err), -1, 200)
				return
			}
			tally.add("read events", 200, 200)
		case 1:
			rules, err := reader.ListFaults(ctx)
			if err != nil || len(rules) > faults.DefaultMaxRules {
				tally.add(fmt.Sprintf("read faults (%d, %v)", len(rules), err), -1, 200)
				return
			}
			tally.add("read faults", 200, 200)
		default:
			status, n := do("GET", "/v1/events?sinceRevision=0&maxResults=100000", readerToken, "")
			tally.add("event page", status, 200)
			if n > 1000*store.MaxEventRecordBytes {
				tally.add(fmt.Sprintf("event page of %d bytes", n), -1, 200)
			}
		}
	})
	evs, err := reader.ListEvents(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var logBytes int
	for _, ev := range evs {
		logBytes += len(mustJSON(t, ev))
	}
	if len(evs) > store.DefaultMaxEvents || logBytes > store.DefaultMaxEventBytes {
		t.Errorf("event log holds %d events, %d bytes: over its bounds", len(evs), logBytes)
	}

	phase("full reads")
	// 6. Idle connections, ten times the cap, none of them sending a byte; then a request
	// must still be answered (the idle ones are closed after ReadHeaderTimeout).
	idleCfg := cfg
	idleCfg.ReadHeaderTimeout = 300 * time.Millisecond
	idleURL, idleLn := serveFlood(ctx, t, idleCfg)
	var idle []net.Conn
	for range idleConns {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(idleURL, "http://"), 5*time.Second)
		if err != nil {
			t.Fatalf("dial idle connection: %v", err)
		}
		idle = append(idle, c)
	}
	healthStart := time.Now()
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Minute}
	status := -1
	if resp, err := fresh.Get(idleURL + "/healthz"); err == nil {
		status = resp.StatusCode
		_ = resp.Body.Close()
	}
	tally.add("request behind idle connections", status, 200)
	healthWait := time.Since(healthStart)
	for _, c := range idle {
		_ = c.Close()
	}

	phase("idle connections")
	heap.finish()
	elapsed := time.Since(start)
	var rules int
	if rl, err := admin.ListFaults(ctx); err == nil {
		rules = len(rl)
	}
	t.Logf("flood: %v (%s); statuses %v", elapsed.Round(time.Millisecond), strings.Join(phases, ", "), tally.counts)
	t.Logf("heap: base alloc %d MiB, peak alloc %d MiB, peak sys %d MiB (bound %d MiB); event log %d events, %d KiB; %d rules",
		base.HeapAlloc>>20, heap.peakAlloc>>20, heap.peakSys>>20, floodHeapBound>>20, len(evs), logBytes>>10, rules)
	t.Logf("connections: peak %d open at the server (cap %d); request behind %d idle connections answered in %v; longest injected wait %v",
		ln.peak.Load(), maxConns, idleConns, healthWait.Round(time.Millisecond), time.Duration(maxSleep.Load()))
	for _, b := range tally.bad {
		t.Error(b)
	}
	if heap.peakSys > floodHeapBound {
		t.Errorf("peak heap %d MiB, over the bound of %d MiB", heap.peakSys>>20, floodHeapBound>>20)
	}
	for _, l := range []*countingListener{ln, idleLn} {
		if p := l.peak.Load(); p > maxConns {
			t.Errorf("%d connections open at once, over the cap of %d", p, maxConns)
		}
	}
	if d := time.Duration(maxSleep.Load()); d != faults.MaxLatency {
		t.Errorf("longest injected wait %v, want the cap %v", d, faults.MaxLatency)
	}
}

// serveFlood serves a new fake cloud of cfg on 127.0.0.1:0 until the test ends and returns
// its URL and the listener that counts its open connections.
func serveFlood(ctx context.Context, t *testing.T, cfg server.Config) (string, *countingListener) {
	t.Helper()
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &countingListener{Listener: raw}
	serveCtx, stopServe := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(serveCtx, ln) }()
	t.Cleanup(func() {
		stopServe()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		_ = srv.Close()
	})
	return "http://" + raw.Addr().String(), ln
}

func newClientHTTP(t *testing.T, url, token string, hc *http.Client) *admin.Client {
	t.Helper()
	c, err := admin.NewClient(url, cloud.WithToken(token), cloud.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
