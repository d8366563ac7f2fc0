package scale

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/scenario"
	"github.com/fakecloud/fakecloud-csi/tests/e2e/capacityplot"
	"github.com/fakecloud/fakecloud-csi/tests/e2e/localcluster"
)

// stuckAfter is how long a pod may wait on its node for its volume before it counts as
// stuck in ContainerCreating: longer than the squeeze, the attacher's retries and the
// controller's capacity backoff (at most 1 min) together.
const stuckAfter = 3 * time.Minute

// Run measures every node count of o in turn on one cluster that grows: it starts with the
// first count, measures a phase per period, drains, and grows to the next count (the new
// nodes join as they would join a real cluster: their instances exist, their kubelets and
// plugins start StartBatch at a time), until the last. It writes the results into outDir
// after each count, so a run cut short keeps what it measured. A cluster that fails to
// start or grow, or breaks, ends the run: the counts before stay in the results, with
// Stopped saying why.
func Run(ctx context.Context, o Options, outDir string) (res *Results, err error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("scale options: %w", err)
	}
	res = &Results{Started: time.Now(), Host: host(), DriverArgs: o.DriverArgs, MinIntervalSeconds: o.MinInterval.Seconds()}
	record := func(c Cluster, cerr error) error {
		res.Clusters = append(res.Clusters, c)
		if cerr != nil {
			res.Stopped = fmt.Sprintf("N=%d: %v", c.Nodes, cerr)
		}
		if werr := WriteFiles(outDir, res); werr != nil {
			return errors.Join(cerr, werr)
		}
		return cerr
	}
	maxN := o.Nodes[len(o.Nodes)-1]
	runDir, err := localcluster.NewRunDir()
	if err != nil {
		return res, err
	}
	first := Cluster{Nodes: o.Nodes[0]}
	o.progress("N=%d: starting the cluster in %s (it grows to %d nodes)", first.Nodes, runDir, maxN)
	start := time.Now()
	c, err := localcluster.Start(ctx, o.clusterOptions(first.Nodes, maxN, runDir))
	if err != nil {
		o.progress("N=%d: the cluster did not start; its logs stay in %s", first.Nodes, runDir)
		err = fmt.Errorf("start %d nodes: %w", first.Nodes, err)
		first.Error = err.Error()
		return res, record(first, err)
	}
	defer func() { o.stopCluster(c, runDir, err != nil) }()
	first.StartSeconds, first.LoadAtStart = time.Since(start).Seconds(), loadAvg()
	o.progress("N=%d: cluster up in %.0f s (load %.1f)", first.Nodes, first.StartSeconds, first.LoadAtStart)

	// The informers outlive every count: the drains read them.
	infCtx, stopInformers := context.WithCancel(ctx)
	defer stopInformers()
	m, err := newMeter(infCtx, o, c, first.Nodes)
	if err != nil {
		return res, record(first, err)
	}
	for i, n := range o.Nodes {
		cl := first
		if i > 0 {
			var err error
			if cl, err = m.growTo(ctx, n, runDir); err != nil {
				return res, record(cl, err)
			}
		}
		err := m.measure(ctx, &cl)
		if err != nil {
			cl.Error = err.Error()
		}
		if err := record(cl, err); err != nil {
			return res, err
		}
	}
	return res, nil
}

// stopCluster stops c at the end of a run, and removes runDir unless the run failed or
// KeepRunDirs keeps it.
func (o Options) stopCluster(c *localcluster.Cluster, runDir string, failed bool) {
	stopStart := time.Now()
	o.progress("stopping the cluster (%d nodes)", len(c.Nodes))
	c.Stop()
	o.progress("cluster stopped in %.0f s", time.Since(stopStart).Seconds())
	if o.KeepRunDirs || failed {
		o.progress("logs in %s", c.LogDir)
		return
	}
	if rerr := os.RemoveAll(runDir); rerr != nil {
		o.progress("cannot remove %s: %v", runDir, rerr)
	}
}

// newMeter makes the clients of cluster c and starts the workload's informers, for nodes
// nodes; they run until infCtx ends.
func newMeter(infCtx context.Context, o Options, c *localcluster.Cluster, nodes int) (*meter, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	rc.QPS, rc.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	cc, err := admin.NewClient(c.CloudURL, cloud.WithToken(c.AdminToken), cloud.WithUserAgent("fakecloud-csi-scale"))
	if err != nil {
		return nil, err
	}
	w, err := startWorkload(infCtx, cs, nodes, o.PodLifetime/time.Duration(nodes))
	if err != nil {
		return nil, err
	}
	return &meter{o: o, c: c, cs: cs, cloud: cc, hc: &http.Client{Timeout: 10 * time.Second}, w: w}, nil
}

// growTo grows the cluster to n nodes for the next count and times it. A cluster that does
// not grow is the count's Error (its logs stay in runDir).
func (m *meter) growTo(ctx context.Context, n int, runDir string) (Cluster, error) {
	cl := Cluster{Nodes: n, GrownFrom: len(m.c.Nodes)}
	growStart := time.Now()
	m.o.progress("N=%d: growing the cluster from %d nodes", n, cl.GrownFrom)
	if err := m.grow(ctx, n); err != nil {
		m.o.progress("N=%d: the cluster did not grow; its logs stay in %s", n, runDir)
		cl.Error = err.Error()
		return cl, err
	}
	cl.StartSeconds, cl.LoadAtStart = time.Since(growStart).Seconds(), loadAvg()
	m.o.progress("N=%d: grown from %d nodes in %.0f s (load %.1f)", n, cl.GrownFrom, cl.StartSeconds, cl.LoadAtStart)
	return cl, nil
}

// grow takes the cluster to n nodes: an attachment quota of 10 per node, as the cluster
// started with, then the new nodes.
func (m *meter) grow(ctx context.Context, n int) error {
	quota := int64(10 * n)
	if _, err := m.cloud.PatchQuotas(ctx, cloud.QuotasPatch{Attachments: &quota}); err != nil {
		return fmt.Errorf("attachment quota for %d nodes: %w", n, err)
	}
	return m.c.Grow(ctx, n)
}

func host() Host {
	h := Host{CPUs: runtime.NumCPU()}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(data), "MemTotal: %d kB", &kb); err == nil {
			h.MemoryGB = float64(kb) / (1 << 20)
		}
	}
	return h
}

func (o Options) progress(format string, args ...any) {
	fmt.Fprintf(o.Out, "%s scale: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// measure runs the workload at res.Nodes (one pod per node, one replaced every
// PodLifetime / N) and one phase per period, then stops the workload and waits, up to
// Drain, until every pod runs; the workload resumes at the next count.
func (m *meter) measure(ctx context.Context, res *Cluster) error {
	n, o := res.Nodes, m.o
	created0, errs0, _ := m.w.stats()
	m.w.resize(n, o.PodLifetime/time.Duration(n))
	wctx, stopWorkload := context.WithCancel(ctx)
	defer stopWorkload()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); m.w.run(wctx) }()
	stop := func() {
		stopWorkload()
		wg.Wait()
		created, errs, last := m.w.stats()
		res.PodsCreated, res.WorkloadErrors = created-created0, errs-errs0
		if last != nil && errs > errs0 {
			res.LastWorkloadError = last.Error()
		}
	}
	for i, p := range o.Periods {
		ph, err := m.phase(ctx, n, p, uint64(n*100+i))
		if err != nil {
			stop()
			return fmt.Errorf("phase of %s: %w", p, err)
		}
		res.Phases = append(res.Phases, ph)
		o.progress("N=%d period %s: %.2f CSINode writes/s, %.2f per truth change, lag p50 %.1f s p99 %.1f s, %d stale attach failures, %d stuck, load %.1f",
			n, p, ph.WritesPerSecond, ph.WritesPerTruthChange, ph.LagP50, ph.LagP99, ph.StaleAttachFailures, ph.PodsAtEnd.Stuck, ph.LoadEnd)
	}
	stop()
	drainStart := time.Now()
	o.progress("N=%d: workload stopped; waiting up to %s for its pods to run", n, o.Drain)
	lastSaid := drainStart
	for {
		pc := m.w.counts(0)
		res.AfterDrain = pc
		if pc.ContainerCreating+pc.Unscheduled == 0 || time.Since(drainStart) > o.Drain {
			break
		}
		if time.Since(lastSaid) >= progressEvery {
			lastSaid = time.Now()
			o.progress("N=%d: draining for %.0f s: %d running, %d in ContainerCreating, %d unscheduled", n, time.Since(drainStart).Seconds(), pc.Running, pc.ContainerCreating, pc.Unscheduled)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	res.DrainSeconds = time.Since(drainStart).Seconds()
	o.progress("N=%d: drained in %.0f s: %d running, %d in ContainerCreating, %d unscheduled", n, res.DrainSeconds, res.AfterDrain.Running, res.AfterDrain.ContainerCreating, res.AfterDrain.Unscheduled)
	return nil
}

// progressEvery is how often a long wait (a phase, a drain) says where it is.
const progressEvery = 30 * time.Second

// meter measures phases on one cluster.
type meter struct {
	o     Options
	c     *localcluster.Cluster
	cs    kubernetes.Interface
	cloud *admin.Client
	hc    *http.Client
	w     *workload
}

// reading is a counter read at one moment.
type reading struct {
	at time.Time
	v  float64
}

// rate is (b − a) / (b.at − a.at); 0 when either is missing, the clock did not move or the
// counter went back (a restarted process).
func rate(a, b reading) float64 {
	d := b.at.Sub(a.at).Seconds()
	if a.at.IsZero() || b.at.IsZero() || d <= 0 || b.v < a.v {
		return 0
	}
	return (b.v - a.v) / d
}

// snapshot is every counter a phase differences, each with the moment it was read: on a
// loaded machine reading N plugins takes seconds, and a rate over the phase's nominal
// length would count that time twice or not at all.
type snapshot struct {
	at           time.Time
	apiAt        time.Time
	api          map[RequestKey]float64
	cloudGetCapa reading
	// lookups are each node plugin's fakecloud_csi_capacity_lookups_total, by node.
	lookups           map[string]reading
	plugins, kubelets map[string]procReading
	apiserver, etcd   procReading
	notes             []string
}

// procReading is a ProcStat and when it was read.
type procReading struct {
	at time.Time
	ProcStat
}

// scrapeParallel bounds the node plugins read at once.
const scrapeParallel = 8

func (m *meter) snapshot(ctx context.Context) snapshot {
	s := snapshot{at: time.Now(), lookups: map[string]reading{}, plugins: map[string]procReading{}, kubelets: map[string]procReading{}}
	note := func(err error) { s.notes = append(s.notes, err.Error()) }
	proc := func(name string) (procReading, error) {
		ps, err := procStats(m.c.PidDir, name)
		return procReading{at: time.Now(), ProcStat: ps}, err
	}
	// Processes first: reading /proc takes microseconds.
	for _, n := range m.c.Nodes {
		if pr, err := proc("driver-node-" + n.Name); err == nil {
			s.plugins[n.Name] = pr
		}
		if pr, err := proc("kubelet-" + n.Name); err == nil {
			s.kubelets[n.Name] = pr
		}
	}
	var err error
	if s.apiserver, err = proc("kube-apiserver"); err != nil {
		note(err)
	}
	if s.etcd, err = proc("etcd"); err != nil {
		note(err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, scrapeParallel)
	failed := 0
	for _, n := range m.c.Nodes {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			mf, err := httpMetrics(ctx, m.hc, m.c.PluginURLs[n.Name], "")
			at := time.Now()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				return
			}
			s.lookups[n.Name] = reading{at: at, v: sumCounter(mf, "fakecloud_csi_capacity_lookups_total", nil)}
		}()
	}
	wg.Wait()
	if failed > 0 {
		note(fmt.Errorf("%d node plugins' /metrics unreadable", failed))
	}
	if mf, err := httpMetrics(ctx, m.hc, m.c.CloudURL, m.c.AdminToken); err != nil {
		note(err)
	} else {
		s.cloudGetCapa = reading{at: time.Now(), v: sumCounter(mf, "fakecloud_requests_total", map[string]string{"route": "getCapacity"})}
	}
	if mf, err := apiServerMetrics(ctx, m.cs); err != nil {
		note(err)
	} else {
		s.api, s.apiAt = apiRequests(mf), time.Now()
	}
	return s
}

// setPeriod sets the CSIDriver's nodeAllocatableUpdatePeriodSeconds; every kubelet
// restarts its updater with it (pkg/volume/csi/csi_node_updater.go).
func (m *meter) setPeriod(ctx context.Context, p time.Duration) error {
	patch := fmt.Sprintf(`{"spec":{"nodeAllocatableUpdatePeriodSeconds":%d}}`, int64(p/time.Second))
	if _, err := m.cs.StorageV1().CSIDrivers().Patch(ctx, localcluster.DriverName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("set the CSIDriver's period to %s: %w", p, err)
	}
	return nil
}

// phase runs one period's churn script under the workload and measures it.
func (m *meter) phase(ctx context.Context, n int, period time.Duration, seed uint64) (Phase, error) {
	ph := Phase{Nodes: n, PeriodSeconds: int(period / time.Second)}
	if err := m.setPeriod(ctx, period); err != nil {
		return ph, err
	}
	in, err := m.scriptInput(ctx, seed)
	if err != nil {
		return ph, err
	}
	sc, err := Script(in)
	if err != nil {
		return ph, err
	}
	length := ScriptLength + period + m.o.Tail
	m.o.progress("N=%d period %s: churn for %s (%d steps), one pod replaced every %s", n, period, length, len(sc.Steps), m.w.every)

	// One sample at the start only: the convergence figures come from the CSINode watch
	// and the cloud's audit log, and sampling N nodes every few seconds would add its own
	// capacity lookups to those measured.
	rec, err := capacityplot.NewRecorder(m.cs, m.cloud, capacityplot.Options{Driver: localcluster.DriverName, Interval: 24 * time.Hour,
		Title: fmt.Sprintf("scale N=%d period %s", n, period)})
	if err != nil {
		return ph, err
	}
	if err := rec.Start(ctx); err != nil {
		return ph, err
	}
	before := m.snapshot(ctx)
	ph.LoadStart = loadAvg()
	runner := scenario.Runner{API: m.cloud, Report: func(at time.Duration, s scenario.Step, err error) {
		if err != nil {
			m.o.progress("  +%s %s: FAILED: %v", at.Round(time.Second), s.Describe(), err)
		}
	}}
	scErr := make(chan error, 1)
	go func() { scErr <- runner.Run(ctx, sc) }()
	if err := m.waitPhase(ctx, n, period, length); err != nil {
		rec.Stop(context.Background())
		return ph, err
	}
	if err := <-scErr; err != nil {
		ph.Notes = append(ph.Notes, "churn script: "+err.Error())
	}
	after := m.snapshot(ctx)
	ph.LoadEnd = loadAvg()
	stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	recording := rec.Stop(stopCtx)
	ph.Notes = append(ph.Notes, recording.Notes...)
	ph.Notes = append(ph.Notes, before.notes...)
	ph.Notes = append(ph.Notes, after.notes...)
	fill(&ph, before, after, recording, m.o.MinInterval)
	ph.StaleAttachFailures = m.w.exhaustedBetween(before.at, after.at)
	ph.PodsAtEnd = m.w.counts(stuckAfter)
	return ph, nil
}

// scriptInput reads what the churn script starts from: the cluster's nodes with their
// out-of-band slots, and the account's attachment quota and use.
func (m *meter) scriptInput(ctx context.Context, seed uint64) (ScriptInput, error) {
	// One list, not a GET per node: the cloud also holds the instances of the nodes yet to
	// join.
	insts, err := m.cloud.ListInstances(ctx)
	if err != nil {
		return ScriptInput{}, fmt.Errorf("instances: %w", err)
	}
	oob := make(map[string]int, len(insts))
	for _, inst := range insts {
		oob[inst.ID] = inst.OutOfBandSlots
	}
	ids := make([]string, 0, len(m.c.Nodes))
	in := ScriptInput{OutOfBand: map[string]int{}, Seed: seed}
	for _, node := range m.c.Nodes {
		v, ok := oob[node.Name]
		if !ok {
			return ScriptInput{}, fmt.Errorf("instance %s: not in the cloud's list", node.Name)
		}
		ids = append(ids, node.Name)
		in.OutOfBand[node.Name] = v
	}
	in.Nodes = ids
	q, err := m.cloud.GetQuotas(ctx)
	if err != nil {
		return ScriptInput{}, fmt.Errorf("quotas: %w", err)
	}
	in.Quota, in.Used = q.Attachments.Limit, q.Attachments.Used
	return in, nil
}

// waitPhase waits the phase's length, saying every progressEvery where it is; it returns
// ctx's error when ctx ends first.
func (m *meter) waitPhase(ctx context.Context, n int, period, length time.Duration) error {
	phaseStart := time.Now()
	end := time.NewTimer(length)
	defer end.Stop()
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			m.o.progress("N=%d period %s: %.0f of %.0f s, load %.1f", n, period, time.Since(phaseStart).Seconds(), length.Seconds(), loadAvg())
		case <-end.C:
			return nil
		}
	}
}

// fill computes a phase's figures from its two snapshots and its recording.
func fill(ph *Phase, before, after snapshot, rec *capacityplot.Recording, minInterval time.Duration) {
	ph.Seconds = after.at.Sub(before.at).Seconds()
	fillConvergence(ph, rec)
	fillAPIRequests(ph, before, after)
	fillLookups(ph, before, after, minInterval)
	fillProcesses(ph, before, after)
	if len(ph.Notes) > 20 {
		ph.Notes = append(ph.Notes[:20], fmt.Sprintf("... %d notes in all", len(ph.Notes)))
	}
	ph.Notes = slicesCompact(ph.Notes)
}

// fillConvergence computes the CSINode writes and how the counts followed the truth (the
// recording's stats, the lags of the matched changes and of the decreases among them) over
// the phase's ph.Seconds.
func fillConvergence(ph *Phase, rec *capacityplot.Recording) {
	secs, n := ph.Seconds, float64(ph.Nodes)
	var lags, dec []float64
	for _, st := range rec.Stats() {
		ph.CSINodeWrites += st.Writes
		ph.CountChanges += st.CountChanges
		ph.TruthChanges += st.TruthChanges
		ph.Matched += st.Matched
		ph.Missed += st.Missed
		ph.Stale += st.Stale
	}
	for _, node := range rec.Nodes {
		for _, l := range rec.Lags[node] {
			if !l.Matched {
				continue
			}
			lags = append(lags, l.Lag.Seconds())
			if l.Change.Old != nil && l.Change.New != nil && *l.Change.New < *l.Change.Old {
				dec = append(dec, l.Lag.Seconds())
			}
		}
	}
	sort.Float64s(lags)
	sort.Float64s(dec)
	ph.LagP50, ph.LagP99, ph.LagMax = quantile(lags, 0.5), quantile(lags, 0.99), quantile(lags, 1)
	ph.LagDecreaseP50, ph.LagDecreaseMax, ph.LagDecreaseCount = quantile(dec, 0.5), quantile(dec, 1), len(dec)
	ph.WritesPerSecond = float64(ph.CSINodeWrites) / secs
	ph.WritesPerNodePerMinute = 60 * ph.WritesPerSecond / n
	if ph.TruthChanges > 0 {
		ph.WritesPerTruthChange = float64(ph.CSINodeWrites) / float64(ph.TruthChanges)
	}
}

// fillAPIRequests computes the API server's request rates by kind over the interval between
// the two snapshots' API readings, and the capacity requests' share of them.
func fillAPIRequests(ph *Phase, before, after snapshot) {
	ph.APIRequests = map[RequestKey]float64{}
	var total, capa float64
	apiSecs := after.apiAt.Sub(before.apiAt).Seconds()
	for k, v := range after.api {
		d := v - before.api[k]
		if d <= 0 || apiSecs <= 0 {
			continue
		}
		ph.APIRequests[k] = d / apiSecs
		total += d / apiSecs
		if IsCapacityRequest(k) {
			capa += d / apiSecs
		}
	}
	ph.APIRequestsPerSecond = total
	ph.APIRequestsPerNodePerSecond = ph.APIRequestsPerSecond / float64(ph.Nodes)
	ph.CapacityRequestsPerSecond = capa
	if total > 0 {
		ph.CapacityShare = capa / total
	}
}

// fillLookups computes the plugins' capacity lookup rate, its bound at one per minInterval
// per node, and the cloud's getCapacity rate.
func fillLookups(ph *Phase, before, after snapshot, minInterval time.Duration) {
	n := float64(ph.Nodes)
	// Each plugin's own rate, summed: the fleet's rate as if every plugin had been read.
	var perNode float64
	var read int
	for node, a := range before.lookups {
		if b, ok := after.lookups[node]; ok {
			perNode += rate(a, b)
			read++
		}
	}
	if read > 0 {
		ph.LookupsPerSecond = perNode / float64(read) * n
	}
	ph.LookupBound = n / minInterval.Seconds()
	ph.CloudGetCapacityPerSecond = rate(before.cloudGetCapa, after.cloudGetCapa)
}

// fillProcesses computes the processes' CPU and memory: the plugins' and kubelets' means,
// the API server's and etcd's cores.
func fillProcesses(ph *Phase, before, after snapshot) {
	ph.PluginCPUPercent, ph.PluginRSSMiB, ph.PluginRSSMaxMiB = procUsage(before.plugins, after.plugins)
	ph.KubeletCPUPercent, ph.KubeletRSSMiB, _ = procUsage(before.kubelets, after.kubelets)
	ph.APIServerCores = rate(reading{at: before.apiserver.at, v: before.apiserver.CPU.Seconds()}, reading{at: after.apiserver.at, v: after.apiserver.CPU.Seconds()})
	ph.EtcdCores = rate(reading{at: before.etcd.at, v: before.etcd.CPU.Seconds()}, reading{at: after.etcd.at, v: after.etcd.CPU.Seconds()})
	ph.APIServerRSSMiB = float64(after.apiserver.RSS) / (1 << 20)
}

// procUsage is the mean CPU (percent of a core) and the mean and largest RSS (MiB) of the
// processes read in both b and a, by name.
func procUsage(b, a map[string]procReading) (pct, rssMean, rssMax float64) {
	var sum, rss, count float64
	for node, s := range a {
		bs, ok := b[node]
		if !ok {
			continue
		}
		sum += rate(reading{at: bs.at, v: bs.CPU.Seconds()}, reading{at: s.at, v: s.CPU.Seconds()})
		r := float64(s.RSS) / (1 << 20)
		rss += r
		rssMax = max(rssMax, r)
		count++
	}
	if count == 0 {
		return 0, 0, 0
	}
	return 100 * sum / count, rss / count, rssMax
}

func slicesCompact(notes []string) []string {
	var out []string
	for _, s := range notes {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
