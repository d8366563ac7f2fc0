package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/capacity"
)

// params are the knobs of one comparison run; all times are in simulated seconds.
type params struct {
	Seed       uint64
	Nodes      int
	Limit      int // per-instance attach limit
	OutOfBand  int
	Quota      int64 // account attachment quota when not squeezed
	Duration   int   // seconds per scenario
	Period     int   // kubelet NodeGetInfo period (CSIDriver nodeAllocatableUpdatePeriodSeconds)
	ArrivalPS  float64
	MeanLife   float64 // seconds a pod keeps its volume once running
	RetryEvery int     // seconds between attach retries of the external-attacher
	RejectWait int     // seconds the kubelet waits on a failed attach before it rejects the pod
	Capacity   capacity.Config
	// LiveFloor gives the policy reporter the node's live count of staged volumes for its
	// floor, as the driver does; false: the floor uses the last good reading's count.
	LiveFloor bool
	// Refresh makes the policy reporter look the cloud up whenever a lookup is due, as the
	// driver's background refresher (Reporter.Run) does; false: only when the kubelet asks.
	Refresh bool
}

func defaultParams() params {
	return params{
		Seed: 1, Nodes: 8, Limit: 16, OutOfBand: 1, Quota: 1000,
		Duration: 2 * 3600, Period: 10, ArrivalPS: 100.0 / 600, MeanLife: 600,
		RetryEvery: 10, RejectWait: 120,
		Capacity: capacity.DefaultConfig(), LiveFloor: true, Refresh: true,
	}
}

// world is the cloud's truth.
type world struct {
	limit, oob, attached []int
	// names are the instance IDs, node-<i>.
	names []string
	// sum is the sum of attached, kept by attach and detach so that the quota check and
	// every reading cost O(1) however many nodes there are (-fleet).
	sum             int64
	quota, external int64
	rev             uint64
	lookupDown      bool
	// lookupFailP is the probability that one capacity lookup fails (a flaky cloud), drawn
	// from flaky; 0: lookups fail only while lookupDown.
	lookupFailP float64
	flaky       *rand.Rand
	// impaired nodes take no attaches (InstanceImpaired: retryable, so the kubelet rejects
	// no pod for it) and their readings say so.
	impaired []bool
	// lookups counts the capacity lookups the policy reporter made (GetCapacity calls).
	lookups int
}

// lookupFails says whether the capacity lookup being made now fails.
func (w *world) lookupFails() bool {
	return w.lookupDown || (w.lookupFailP > 0 && w.flaky.Float64() < w.lookupFailP)
}

func newWorld(p params) *world {
	w := &world{quota: p.Quota, rev: 1}
	for range p.Nodes {
		w.limit = append(w.limit, p.Limit)
		w.oob = append(w.oob, p.OutOfBand)
		w.attached = append(w.attached, 0)
		w.impaired = append(w.impaired, false)
		w.names = append(w.names, fmt.Sprintf("node-%d", len(w.names)))
	}
	return w
}

func (w *world) used() int64 {
	return w.external + w.sum
}

func (w *world) capacity(i int) cloud.Capacity {
	return cloud.Capacity{
		InstanceID: w.names[i], AttachLimit: w.limit[i], OutOfBandSlots: w.oob[i],
		Attached: w.attached[i], QuotaHeadroom: max(0, w.quota-w.used()), Instances: len(w.limit),
		Revision: w.rev, Health: health(w.impaired[i]),
	}
}

func health(impaired bool) cloud.InstanceHealth {
	if impaired {
		return cloud.InstanceHealthImpaired
	}
	return cloud.InstanceHealthOK
}

// attach is the cloud's atomic check: the node's health, its slots and the account quota.
// unhealthy says the refusal was the node's health (retryable), not capacity.
func (w *world) attach(i int) (ok, unhealthy bool) {
	if w.impaired[i] {
		return false, true
	}
	if w.attached[i] >= w.limit[i]-w.oob[i] || w.used() >= w.quota {
		return false, false
	}
	w.attached[i]++
	w.sum++
	w.rev++
	return true, false
}

func (w *world) detach(i int) { w.attached[i]--; w.sum--; w.rev++ }

// scenario is a capacity trace: events at given seconds, and optionally ±1 noise of other
// tenants' attachments (which moves every node's quota headroom).
type scenario struct {
	name     string
	about    string
	events   []event
	noise    bool  // other tenants' attachments flip between 4 and 5
	oobNoise bool  // every node's out-of-band slots flip between 1 and 2
	quota    int64 // 0: params.Quota
	// lookupFailP is the probability that any one capacity lookup fails, throughout.
	lookupFailP float64
	// extra traces are left out of the **all** rows and the goals, which were set on the
	// others: a variant of another trace would only dilute them.
	extra bool
	// health traces also run the policy with the instance health stripped from its
	// readings (reporterHealthBlind): the alternative of holding the value.
	health bool
}

// reporters are the reporters the trace runs.
func (sc scenario) reporters() []string {
	if sc.health {
		return append(slices.Clone(reporterNames), reporterHealthBlind)
	}
	return reporterNames
}

type event struct {
	at    int
	apply func(w *world)
}

func setLimit(nodes []int, limit int) func(*world) {
	return func(w *world) {
		for _, n := range nodes {
			w.limit[n] = limit
		}
		w.rev++
	}
}

func setImpaired(nodes []int, impaired bool) func(*world) {
	return func(w *world) {
		for _, n := range nodes {
			w.impaired[n] = impaired
		}
		// Health changes no revision in the fake cloud.
	}
}

func addOOB(nodes []int, d int) func(*world) {
	return func(w *world) {
		for _, n := range nodes {
			w.oob[n] += d
		}
		w.rev++
	}
}

// scenarios returns the traces for a cluster of nodes ≥ 2 nodes: "half" is the first half of
// the nodes, "quarter" the next quarter (at least one node).
func scenarios(nodes int) []scenario {
	var half, quarter []int
	for n := range nodes / 2 {
		half = append(half, n)
	}
	for n := nodes / 2; n < nodes/2+max(1, nodes/4); n++ {
		quarter = append(quarter, n)
	}
	return []scenario{
		{name: "step", about: "limit 16→8 on half the nodes at 20m, back at 50m; +6 out-of-band slots on a quarter 70m–100m",
			events: []event{{1200, setLimit(half, 8)}, {3000, setLimit(half, 16)}, {4200, addOOB(quarter, 6)}, {6000, addOOB(quarter, -6)}}},
		{name: "outage", about: "capacity lookups fail 20m–40m; limit 16→8 on half the nodes at 25m (during it), back at 60m",
			events: []event{
				{1200, func(w *world) { w.lookupDown = true }},
				{1500, setLimit(half, 8)},
				{2400, func(w *world) { w.lookupDown = false }},
				{3600, setLimit(half, 16)}}},
		{name: "noise", about: "±1 noise: each node's out-of-band slots flip between 1 and 2 (every ~15s on average, independently); quota loose",
			oobNoise: true},
		{name: "quota-noise", about: "attachment quota 112 nearly saturated by the pods; other tenants hold 4 or 5 attachments, flipping every ~7s",
			noise: true, quota: 112},
		{name: "squeeze", about: "attachment quota cut to use+2 at 20m, restored at 50m",
			events: []event{
				{1200, func(w *world) { w.quota = w.used() + 2; w.rev++ }},
				{3000, func(w *world) { w.quota = 1000; w.rev++ }}}},
		// Last, so that the traces above keep their workloads (seeded by position).
		{name: "flaky", about: "the step trace with 30% of capacity lookups failing throughout (each independently)",
			lookupFailP: 0.3, extra: true,
			events: []event{{1200, setLimit(half, 8)}, {3000, setLimit(half, 16)}, {4200, addOOB(quarter, 6)}, {6000, addOOB(quarter, -6)}}},
		{name: "impaired", about: "a quarter of the nodes impaired (attaches refused, retryable) 20m–40m, then again 60m–62m",
			extra: true, health: true,
			events: []event{{1200, setImpaired(quarter, true)}, {2400, setImpaired(quarter, false)},
				{3600, setImpaired(quarter, true)}, {3720, setImpaired(quarter, false)}}},
	}
}

// workload is the same for every reporter of a scenario: arrivals per second, lifetimes per
// pod, and the other tenants' usage per second.
type workload struct {
	arrivals []int
	lifetime []int
	external []int64
	oob      [][]int // [second][node], when the scenario has oobNoise
}

func newWorkload(p params, sc scenario, idx int) workload {
	rng := rand.New(rand.NewPCG(p.Seed, uint64(idx)))
	wl := workload{arrivals: make([]int, p.Duration), external: make([]int64, p.Duration)}
	ext := int64(4)
	for t := range p.Duration {
		n := poisson(rng, p.ArrivalPS)
		wl.arrivals[t] = n
		for range n {
			wl.lifetime = append(wl.lifetime, max(1, int(rng.ExpFloat64()*p.MeanLife)))
		}
		if sc.noise && rng.Float64() < 1.0/7 {
			ext = 9 - ext // 4 ↔ 5
		}
		if sc.noise {
			wl.external[t] = ext
		}
		if sc.oobNoise {
			row := make([]int, p.Nodes)
			for n := range row {
				row[n] = p.OutOfBand
				if t > 0 {
					row[n] = wl.oob[t-1][n]
				}
				if rng.Float64() < 1.0/15 {
					row[n] = 2*p.OutOfBand + 1 - row[n] // 1 ↔ 2
				}
			}
			wl.oob = append(wl.oob, row)
		}
	}
	return wl
}

func poisson(rng *rand.Rand, lambda float64) int {
	l, k, pr := math.Exp(-lambda), 0, 1.0
	for {
		pr *= rng.Float64()
		if pr <= l {
			return k
		}
		k++
	}
}

// reporter is what the kubelet asks for a node's count.
type reporter interface {
	value(node int) int64
	// step lets time pass by one second.
	step()
}

type staticReporter struct{ v []int64 }

func (s *staticReporter) value(n int) int64 { return s.v[n] }
func (s *staticReporter) step()             {}

// naiveReporter reports the raw value of every lookup, and its last one when a lookup fails.
type naiveReporter struct {
	w     *world
	share capacity.QuotaShare
	last  []int64
}

func (r *naiveReporter) value(n int) int64 {
	if !r.w.lookupFails() {
		r.last[n] = capacity.Reportable(capacity.Raw(r.w.capacity(n), r.share))
	}
	return r.last[n]
}
func (r *naiveReporter) step() {}

// oracleReporter sees the truth even during an outage, health included: the reference for
// "needed" waiting.
type oracleReporter struct {
	w     *world
	share capacity.QuotaShare
}

func (r *oracleReporter) value(n int) int64 {
	if r.w.impaired[n] {
		// An impaired node takes nothing more; what it holds stays.
		return capacity.Reportable(int64(r.w.attached[n]))
	}
	return capacity.Reportable(capacity.Raw(r.w.capacity(n), r.share))
}
func (r *oracleReporter) step() {}

// policyReporter is the real capacity.Reporter of each node on a fake clock.
type policyReporter struct {
	clk     *clocktesting.FakeClock
	reps    []*capacity.Reporter
	refresh bool
	// ctx is the context of the simulated calls: its logger (the zero klog.Logger) drops
	// the reporters' log lines, hundreds per run, which say nothing the table does not.
	ctx context.Context
}

type simSource struct {
	w *world
	n int
	// healthBlind strips the health from every reading.
	healthBlind bool
}

func (s simSource) GetCapacity(_ context.Context, _ string) (*cloud.Capacity, error) {
	s.w.lookups++
	if s.w.lookupFails() {
		return nil, cloud.NewError(cloud.CodeUnavailable, "outage")
	}
	c := s.w.capacity(s.n)
	if s.healthBlind {
		c.Health = ""
	}
	return &c, nil
}

func newPolicyReporter(p params, w *world) (*policyReporter, error) {
	return newPolicyReporterSeeing(p, w, false)
}

// newPolicyReporterSeeing is newPolicyReporter whose readings carry no health when
// healthBlind.
func newPolicyReporterSeeing(p params, w *world, healthBlind bool) (*policyReporter, error) {
	pr := &policyReporter{clk: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), refresh: p.Refresh,
		ctx: klog.NewContext(context.Background(), klog.Logger{})}
	for n := range p.Nodes {
		var here capacity.AttachedHereFunc
		if p.LiveFloor {
			// The node's own count of staged volumes: in this model a volume is staged
			// exactly while its pod runs, which is while the cloud has it attached.
			here = func() (int, error) { return w.attached[n], nil }
		}
		// No registry: nothing reads the metrics, and 10,000 registries (-fleet) cost memory.
		r, err := capacity.NewReporter(p.Capacity, simSource{w: w, n: n, healthBlind: healthBlind}, w.names[n], here, pr.clk, nil)
		if err != nil {
			return nil, err
		}
		pr.reps = append(pr.reps, r)
	}
	return pr, nil
}

func (r *policyReporter) value(n int) int64 {
	v, _ := r.reps[n].MaxVolumesPerNode(r.ctx)
	return v
}
func (r *policyReporter) step() {
	r.clk.Step(time.Second)
	if r.refresh {
		for _, rep := range r.reps {
			// What Run does each time a lookup is due; never fails with a live context.
			_ = rep.Refresh(r.ctx)
		}
	}
}

// result is what one reporter did on one scenario.
type result struct {
	AttachFailures int     // placements whose attach the cloud refused: the count was stale
	Rejected       int     // pods the kubelet failed after RejectWait (VolumeAttachmentLimitExceeded)
	Writes         int     // CSINode allocatable.count changes after registration
	PendingPodMin  float64 // pod-minutes Pending (no node with a free count)
	StuckPodMin    float64 // pod-minutes on a node waiting for a refused attach (capacity or health)
	Started        int
}

func (a *result) add(b result) {
	a.AttachFailures += b.AttachFailures
	a.Rejected += b.Rejected
	a.Writes += b.Writes
	a.PendingPodMin += b.PendingPodMin
	a.StuckPodMin += b.StuckPodMin
	a.Started += b.Started
}

type podState int

const (
	pending podState = iota
	attaching
	running
	gone
)

type pod struct {
	life     int
	state    podState
	node     int
	placedAt int
	nextTry  int
	failed   bool
	// waiting: the last attach was refused for the node's health; the attacher retries,
	// the kubelet rejects nothing for it.
	waiting bool
	endAt   int
}

// simulate replays one scenario against one reporter, second by second: the cloud changes,
// pods end and arrive, each node's kubelet copies the reported value every Period seconds,
// the scheduler places Pending pods where scheduled volumes < count, and the attacher asks
// the cloud, retrying a refused attach until the kubelet rejects the pod after RejectWait.
func simulate(p params, sc scenario, wl workload, w *world, rep reporter) result {
	s := newSimRun(p, sc, wl, w, rep)
	for t := range p.Duration {
		s.changeCloud(t)
		s.endPods(t)
		s.arrive(t)
		s.kubeletCopies(t)
		s.schedule(t)
		s.attach(t)
		s.account(t)
		rep.step()
	}
	return s.res
}

// simRun is one simulate run in progress: the inputs, each node's CSINode count (what the
// kubelet last copied) and scheduled volumes, the pods not yet gone (pods) and the Pending
// ones in FIFO order (queue), and the result so far.
type simRun struct {
	p   params
	sc  scenario
	wl  workload
	w   *world
	rep reporter
	res result

	count     []int64
	scheduled []int
	pods      []*pod
	queue     []*pod // Pending, FIFO
	next      int    // the next arrival's index in wl.lifetime
	evi       int    // the next event of sc.events
}

// newSimRun starts a run with every node's count copied from rep.
func newSimRun(p params, sc scenario, wl workload, w *world, rep reporter) *simRun {
	s := &simRun{p: p, sc: sc, wl: wl, w: w, rep: rep, count: make([]int64, p.Nodes), scheduled: make([]int, p.Nodes)}
	for n := range p.Nodes {
		s.count[n] = rep.value(n)
	}
	return s
}

// kubeletCopy copies node n's reported value to its CSINode count, a write when it changed.
func (s *simRun) kubeletCopy(n int) {
	if v := s.rep.value(n); v != s.count[n] {
		s.count[n] = v
		s.res.Writes++
	}
}

// changeCloud applies at second t the scenario's events due and, when the scenario has them,
// the external quota use and the out-of-band slots of the workload's noise.
func (s *simRun) changeCloud(t int) {
	w := s.w
	for s.evi < len(s.sc.events) && s.sc.events[s.evi].at <= t {
		s.sc.events[s.evi].apply(w)
		s.evi++
	}
	if s.sc.noise && s.wl.external[t] != w.external {
		w.external = s.wl.external[t]
		w.rev++
	}
	if s.sc.oobNoise {
		for n, o := range s.wl.oob[t] {
			if w.oob[n] != o {
				w.oob[n] = o
				w.rev++
			}
		}
	}
}

// endPods detaches the volumes of the running pods whose life ends at second t.
func (s *simRun) endPods(t int) {
	for _, pd := range s.pods {
		if pd.state == running && pd.endAt == t {
			s.w.detach(pd.node)
			s.scheduled[pd.node]--
			pd.state = gone
		}
	}
}

// arrive queues the pods arriving at second t.
func (s *simRun) arrive(t int) {
	for range s.wl.arrivals[t] {
		pd := &pod{life: s.wl.lifetime[s.next]}
		s.next++
		s.pods = append(s.pods, pd)
		s.queue = append(s.queue, pd)
	}
}

// kubeletCopies runs the kubelets whose period comes round at second t, their timers spread
// evenly over the period.
func (s *simRun) kubeletCopies(t int) {
	p := s.p
	for n := range p.Nodes {
		if (t+n*p.Period/p.Nodes)%p.Period == 0 && t > 0 {
			s.kubeletCopy(n)
		}
	}
}

// schedule places Pending pods, in order, on the node with the most room (count minus
// scheduled volumes). Identical pods: when one does not fit none does.
func (s *simRun) schedule(t int) {
	for len(s.queue) > 0 {
		best, free := -1, int64(0)
		for n := range s.p.Nodes {
			if f := s.count[n] - int64(s.scheduled[n]); f > free {
				best, free = n, f
			}
		}
		if best < 0 {
			break
		}
		pd := s.queue[0]
		s.queue = s.queue[1:]
		*pd = pod{life: pd.life, state: attaching, node: best, placedAt: t, nextTry: t}
		s.scheduled[best]++
	}
}

// attach is the attacher at second t: each attaching pod due a try asks the cloud. A refusal
// for the node's health is retried without counting; one for capacity counts as a failure
// (once per pod) and is retried every RetryEvery until the kubelet rejects the pod after
// RejectWait, which sends it back to the queue and makes its node's kubelet copy again.
func (s *simRun) attach(t int) {
	p := s.p
	for _, pd := range s.pods {
		if pd.state != attaching || pd.nextTry > t {
			continue
		}
		ok, unhealthy := s.w.attach(pd.node)
		if ok {
			pd.state, pd.endAt, pd.waiting = running, t+pd.life, false
			s.res.Started++
			continue
		}
		if unhealthy {
			pd.waiting, pd.nextTry = true, t+p.RetryEvery
			continue
		}
		pd.waiting = false
		if !pd.failed {
			pd.failed = true
			s.res.AttachFailures++
		}
		if t-pd.placedAt >= p.RejectWait {
			s.res.Rejected++
			s.scheduled[pd.node]--
			s.kubeletCopy(pd.node)
			pd.state = pending
			s.queue = append(s.queue, pd)
			continue
		}
		pd.nextTry = t + p.RetryEvery
	}
}

// account adds second t's pending and stuck pod-time to the result, dropping the pods that
// are gone once a minute.
func (s *simRun) account(t int) {
	s.res.PendingPodMin += float64(len(s.queue)) / 60
	if t%60 == 0 {
		live := s.pods[:0]
		for _, pd := range s.pods {
			if pd.state != gone {
				live = append(live, pd)
			}
		}
		s.pods = live
	}
	for _, pd := range s.pods {
		if pd.state == attaching && (pd.failed || pd.waiting) {
			s.res.StuckPodMin += 1.0 / 60
		}
	}
}
