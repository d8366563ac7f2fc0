package main

// The fleet mode (-fleet): the same capacity.Reporter on a fake clock, one per node, for
// thousands of nodes and a realistic rate of capacity change, to say what the design costs a
// large cluster in CSINode writes and cloud lookups, per node and for the fleet, and whether
// a change the whole fleet sees at once becomes a burst of writes
// (docs/fleet-scale.md).
//
// The model is simulate's (kubelet copies every period and after a rejection, writing only on
// a change; the attacher retries every 10 s; the kubelet rejects a pod after 2 min), made to
// scale: the scheduler scores a random sample of the nodes with room (as kube-scheduler does
// on large clusters, percentageOfNodesToScore) instead of all of them, each kubelet's timer
// starts at a random phase of the period (they start when each kubelet does), and every
// count is kept incrementally, so a simulated second costs O(nodes) at most.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/capacity"
)

// fleetParams are the knobs of one fleet run; times in simulated seconds.
type fleetParams struct {
	params
	// PodsPerNode is the mean number of pods (one volume each) running per node: arrivals
	// are Nodes·PodsPerNode/MeanLife per second.
	PodsPerNode float64
	// OOBPerNodeHour is how often one node's out-of-band slots change (1 ↔ 2), per hour.
	OOBPerNodeHour float64
	// TenantEvery is the mean number of seconds between ±1 steps of the other tenants'
	// attachments in the account (which move every node's quota headroom).
	TenantEvery float64
	// Sample is how many nodes with room the scheduler scores per pod.
	Sample int
}

func defaultFleetParams() fleetParams {
	p := defaultParams()
	p.Duration = 3600
	return fleetParams{params: p, PodsPerNode: 12.5, OOBPerNodeHour: 1, TenantEvery: 7, Sample: 16}
}

// fleetScenario is a capacity trace of the fleet: the steady churn (pods, out-of-band
// changes, other tenants) plus account-wide quota changes at given seconds, each relative to
// what is in use then.
type fleetScenario struct {
	name, about string
	// quota is the account attachment quota at start, as a multiple of the expected use
	// (nodes × PodsPerNode).
	quota float64
	// cuts set the quota to use + headroom(nodes) at a share of the run.
	cuts []quotaCut
}

type quotaCut struct {
	// at is the share of the run's duration at which the change happens.
	at       float64
	headroom func(nodes int) int64
	// restore sets the quota back to the scenario's start value instead.
	restore bool
}

func fleetScenarios() []fleetScenario {
	return []fleetScenario{
		{name: "steady", quota: 2,
			about: "pods come and go (12.5 per node, 10 min each), each node's out-of-band slots flip 1 ↔ 2 once an hour, other tenants ±1 every ~7 s; quota at twice the use"},
		{name: "quota-cut", quota: 2,
			cuts:  []quotaCut{{at: 1.0 / 3, headroom: func(n int) int64 { return int64(n) }}, {at: 2.0 / 3, restore: true}},
			about: "steady, and after a third of the run the quota is cut to use + one attachment per node (every node's even share falls to 1), restored after two thirds: the same change seen by the whole fleet at once"},
		{name: "exhausted", quota: 2,
			cuts:  []quotaCut{{at: 1.0 / 3, headroom: func(int) int64 { return 10 }}, {at: 2.0 / 3, restore: true}},
			about: "steady, and for the middle third of the run the quota is cut to use + 10: every attach anywhere moves every node's headroom"},
	}
}

// fleetRun is one row: a scenario, a quota share, a spread, a fleet size and a period.
type fleetRun struct {
	sc     fleetScenario
	share  capacity.QuotaShare
	spread time.Duration
	nodes  int
	period int
}

// fleetResult is what one fleet run measured, with the per-node and per-second figures
// derived from it. The JSON names are the comparison format (-fleet-json, one object per
// line) that measurements on real components can write too, so that per-node figures at the
// same N and period compare directly: source says which (here "bench/policy").
type fleetResult struct {
	Source                string  `json:"source"`
	Scenario              string  `json:"scenario"`
	QuotaShare            string  `json:"quotaShare"`
	IncreaseSpreadSeconds float64 `json:"increaseSpreadSeconds"`
	Nodes                 int     `json:"nodes"`
	PeriodSeconds         int     `json:"periodSeconds"`
	Seconds               int     `json:"seconds"`
	CSINodeWrites         int     `json:"csinodeWrites"`
	CloudLookups          int     `json:"cloudLookups"`
	// CapacityChanges counts changes of a node's true count, max(1, raw), seen second by
	// second, summed over the nodes.
	CapacityChanges int     `json:"capacityChanges"`
	AttachFailures  int     `json:"staleCapacityAttachFailures"`
	Rejected        int     `json:"podsRejected"`
	PendingPodMin   float64 `json:"pendingPodMinutes"`
	Started         int     `json:"podsStarted"`

	WritesPerNodeHour    float64 `json:"csinodeWritesPerNodeHour"`
	LookupsPerNodeMinute float64 `json:"cloudLookupsPerNodeMinute"`
	WritesPerSecond      float64 `json:"csinodeWritesPerSecond"`
	LookupsPerSecond     float64 `json:"cloudLookupsPerSecond"`
	WritesPerChange      float64 `json:"csinodeWritesPerCapacityChange"`
	// PeakWritesPerSecond is the busiest 10 s of the run, in writes per second.
	PeakWritesPerSecond float64 `json:"peakCsinodeWritesPerSecond"`
	// Bursts are the writes after each fleet-wide quota change.
	Bursts []burst `json:"bursts,omitempty"`
}

// burst is the CSINode writes in the 5 minutes after a fleet-wide change at At: how many,
// how many nodes wrote, how long after the change half and 99% of those nodes had written
// their first write (how the burst spreads), and its busiest 10 s.
type burst struct {
	At              int     `json:"at"`
	Writes          int     `json:"writes"`
	NodesWriting    int     `json:"nodesWriting"`
	ShareOfTheFleet float64 `json:"shareOfTheFleet"`
	FirstHalf       int     `json:"firstWriteHalfSeconds"`
	FirstP99        int     `json:"firstWriteP99Seconds"`
	PeakPerSecond   float64 `json:"peakWritesPerSecond"`
}

const burstWindow = 300

// fleetWorkload is the same for every run of a scenario at one fleet size: arrivals and
// lifetimes, each node's out-of-band flips, the other tenants' steps and the kubelets'
// phases (drawn per period).
type fleetWorkload struct {
	arrivals []int
	lifetime []int
	oobFlips [][]int32 // [second] nodes whose out-of-band slots flip
	external []int64   // [second]
}

func newFleetWorkload(p fleetParams, nodes, idx int) fleetWorkload {
	rng := rand.New(rand.NewPCG(p.Seed, uint64(5000+idx)))
	wl := fleetWorkload{arrivals: make([]int, p.Duration), oobFlips: make([][]int32, p.Duration), external: make([]int64, p.Duration)}
	lambda := float64(nodes) * p.PodsPerNode / p.MeanLife
	flipP := p.OOBPerNodeHour / 3600
	ext := int64(4)
	for t := range p.Duration {
		n := poissonLarge(rng, lambda)
		wl.arrivals[t] = n
		for range n {
			wl.lifetime = append(wl.lifetime, max(1, int(rng.ExpFloat64()*p.MeanLife)))
		}
		// Binomial(nodes, flipP) flips, drawn as a count and then as nodes.
		for range poissonLarge(rng, float64(nodes)*flipP) {
			wl.oobFlips[t] = append(wl.oobFlips[t], int32(rng.IntN(nodes)))
		}
		if rng.Float64() < 1/p.TenantEvery {
			ext = 9 - ext // 4 ↔ 5
		}
		wl.external[t] = ext
	}
	return wl
}

// poissonLarge is poisson for any λ: the normal approximation above 500, where e^-λ
// underflows the product method.
func poissonLarge(rng *rand.Rand, lambda float64) int {
	if lambda <= 500 {
		return poisson(rng, lambda)
	}
	return max(0, int(math.Round(lambda+math.Sqrt(lambda)*rng.NormFloat64())))
}

// freeSet is the set of nodes whose count exceeds the volumes scheduled there, for the
// scheduler to sample from in O(1).
type freeSet struct {
	nodes []int32
	pos   []int32 // index in nodes, -1 when absent
}

func newFreeSet(n int) *freeSet {
	s := &freeSet{pos: make([]int32, n)}
	for i := range s.pos {
		s.pos[i] = -1
	}
	return s
}

func (s *freeSet) set(n int, in bool) {
	switch at := s.pos[n]; {
	case in && at < 0:
		s.pos[n] = int32(len(s.nodes))
		s.nodes = append(s.nodes, int32(n))
	case !in && at >= 0:
		last := s.nodes[len(s.nodes)-1]
		s.nodes[at], s.pos[last] = last, at
		s.nodes = s.nodes[:len(s.nodes)-1]
		s.pos[n] = -1
	}
}

// simulateFleet replays one fleet run with the real capacity.Reporter on every node.
func simulateFleet(p fleetParams, fr fleetRun, wl fleetWorkload, idx int) (fleetResult, error) {
	s, err := newFleetSim(p, fr, wl, idx)
	if err != nil {
		return fleetResult{}, err
	}
	for t := range p.Duration {
		s.changeCloud(t)
		s.endPods(t)
		s.arrive(t)
		s.kubeletCopies(t)
		s.schedule(t)
		s.attach(t)
		s.account()
		s.rep.step()
	}
	s.res.CloudLookups = s.w.lookups
	finishFleet(&s.res, s.writesAt, s.marks, s.first)
	return s.res, nil
}

// fleetSim is one fleet run in progress. Every count is kept incrementally: a simulated
// second costs O(nodes) at most.
type fleetSim struct {
	p         fleetParams
	fr        fleetRun
	wl        fleetWorkload
	w         *world
	rep       *policyReporter
	rng       *rand.Rand // the kubelets' phases, then the scheduler's samples
	baseQuota int64      // the account quota at start, which a restoring cut sets again
	res       fleetResult

	byPhase   [][]int32             // [second of the period] nodes whose kubelet copies then
	count     []int64               // [node] the CSINode count, as the kubelet last copied it
	scheduled []int                 // [node] volumes the scheduler placed there, not yet ended or rejected
	truth     []int64               // [node] the true count, max(1, raw), at the last second
	free      *freeSet              // nodes with count > scheduled
	writesAt  []int32               // [second] CSINode writes
	marks     []int                 // [cut] the second of each quota change
	first     map[int]map[int32]int // burst index → node → seconds after the change of its first write
	ends      [][]int32             // [second] nodes where a running pod's volume detaches then
	inFlight  []*pod                // attaching pods
	queue     []*pod                // Pending pods, FIFO
	next      int                   // the next arrival's index in wl.lifetime
	ci        int                   // the next cut of fr.sc.cuts
}

// newFleetSim sets up the run: the cloud at the scenario's start quota, the policy reporter
// on every node, the kubelets' phases drawn at random (the run's seed and idx), and each
// node's count and truth as of the first reading.
func newFleetSim(p fleetParams, fr fleetRun, wl fleetWorkload, idx int) (*fleetSim, error) {
	pp := p.params
	pp.Nodes, pp.Period = fr.nodes, fr.period
	pp.Capacity.QuotaShare, pp.Capacity.IncreaseSpread = fr.share, fr.spread
	baseQuota := int64(fr.sc.quota * float64(fr.nodes) * p.PodsPerNode)
	pp.Quota = baseQuota
	w := newWorld(pp)
	rep, err := newPolicyReporter(pp, w)
	if err != nil {
		return nil, err
	}
	n, period := fr.nodes, fr.period
	s := &fleetSim{p: p, fr: fr, wl: wl, w: w, rep: rep, baseQuota: baseQuota,
		rng:     rand.New(rand.NewPCG(p.Seed, uint64(9000+idx))),
		byPhase: make([][]int32, period),
		res: fleetResult{Source: "bench/policy", Scenario: fr.sc.name, QuotaShare: string(fr.share), IncreaseSpreadSeconds: fr.spread.Seconds(),
			Nodes: n, PeriodSeconds: period, Seconds: p.Duration},
		count: make([]int64, n), scheduled: make([]int, n), truth: make([]int64, n), free: newFreeSet(n),
		writesAt: make([]int32, p.Duration), first: map[int]map[int32]int{}, marks: make([]int, 0, len(fr.sc.cuts)),
		ends: make([][]int32, p.Duration),
	}
	for i := range n {
		ph := s.rng.IntN(period)
		s.byPhase[ph] = append(s.byPhase[ph], int32(i))
	}
	for _, c := range fr.sc.cuts {
		s.marks = append(s.marks, int(c.at*float64(p.Duration)))
		s.first[len(s.marks)-1] = map[int32]int{}
	}
	for i := range n {
		s.count[i] = rep.value(i)
		s.truth[i] = s.truthOf(i)
		s.updateFree(i)
	}
	return s, nil
}

// updateFree puts node i in the free set when its count exceeds its scheduled volumes, and
// takes it out otherwise.
func (s *fleetSim) updateFree(i int) { s.free.set(i, s.count[i] > int64(s.scheduled[i])) }

// truthOf is node i's true count now: max(1, its free slots, capped by its share of the
// account's quota headroom).
func (s *fleetSim) truthOf(i int) int64 {
	w, n := s.w, s.fr.nodes
	slots := int64(w.limit[i] - w.oob[i])
	q := max(0, w.quota-w.used())
	if s.fr.share == capacity.QuotaShareEven {
		q = (q + int64(n) - 1) / int64(n)
	}
	return capacity.Reportable(min(slots, int64(w.attached[i])+q))
}

// kubeletCopy copies node i's reported value to its CSINode count at second t: a write when
// it changed, noted for the bursts of the quota changes it follows.
func (s *fleetSim) kubeletCopy(i, t int) {
	v := s.rep.value(i)
	if v == s.count[i] {
		return
	}
	s.count[i] = v
	s.res.CSINodeWrites++
	s.writesAt[t]++
	for b, at := range s.marks {
		if _, seen := s.first[b][int32(i)]; !seen && t >= at && t < at+burstWindow {
			s.first[b][int32(i)] = t - at
		}
	}
	s.updateFree(i)
}

// changeCloud applies at second t the quota changes due, the other tenants' step and the
// out-of-band flips of the workload.
func (s *fleetSim) changeCloud(t int) {
	w, cuts := s.w, s.fr.sc.cuts
	for s.ci < len(cuts) && s.marks[s.ci] <= t {
		c := cuts[s.ci]
		if c.restore {
			w.quota = s.baseQuota
		} else {
			w.quota = w.used() + c.headroom(s.fr.nodes)
		}
		w.rev++
		s.ci++
	}
	if s.wl.external[t] != w.external {
		w.external = s.wl.external[t]
		w.rev++
	}
	for _, i := range s.wl.oobFlips[t] {
		w.oob[i] = 2*s.p.OutOfBand + 1 - w.oob[i] // 1 ↔ 2
		w.rev++
	}
}

// endPods detaches the volumes of the pods whose life ends at second t.
func (s *fleetSim) endPods(t int) {
	for _, i := range s.ends[t] {
		s.w.detach(int(i))
		s.scheduled[i]--
		s.updateFree(int(i))
	}
}

// arrive queues the pods arriving at second t.
func (s *fleetSim) arrive(t int) {
	for range s.wl.arrivals[t] {
		s.queue = append(s.queue, &pod{life: s.wl.lifetime[s.next]})
		s.next++
	}
}

// kubeletCopies runs the kubelets whose phase comes round at second t (none at 0: every count
// starts copied).
func (s *fleetSim) kubeletCopies(t int) {
	for _, i := range s.byPhase[t%s.fr.period] {
		if t > 0 {
			s.kubeletCopy(int(i), t)
		}
	}
}

// schedule places Pending pods at second t: for each, score a sample of the nodes with room
// and take the one with the most.
func (s *fleetSim) schedule(t int) {
	for len(s.queue) > 0 && len(s.free.nodes) > 0 {
		best, bestFree := -1, int64(0)
		for range min(s.p.Sample, len(s.free.nodes)) {
			c := int(s.free.nodes[s.rng.IntN(len(s.free.nodes))])
			if f := s.count[c] - int64(s.scheduled[c]); f > bestFree {
				best, bestFree = c, f
			}
		}
		pd := s.queue[0]
		s.queue = s.queue[1:]
		*pd = pod{life: pd.life, state: attaching, node: best, placedAt: t, nextTry: t}
		s.scheduled[best]++
		s.updateFree(best)
		s.inFlight = append(s.inFlight, pd)
	}
}

// attach is the attacher at second t: each attaching pod due a try asks the cloud; a refusal
// counts as a failure (once per pod) and is retried every RetryEvery until the kubelet
// rejects the pod after RejectWait, which sends it back to the queue and makes its node's
// kubelet copy again.
func (s *fleetSim) attach(t int) {
	p := s.p
	still := s.inFlight[:0]
	for _, pd := range s.inFlight {
		if pd.nextTry > t {
			still = append(still, pd)
			continue
		}
		if ok, _ := s.w.attach(pd.node); ok {
			s.res.Started++
			if end := t + pd.life; end < p.Duration {
				s.ends[end] = append(s.ends[end], int32(pd.node))
			}
			continue
		}
		if !pd.failed {
			pd.failed = true
			s.res.AttachFailures++
		}
		if t-pd.placedAt >= p.RejectWait {
			s.res.Rejected++
			s.scheduled[pd.node]--
			s.updateFree(pd.node)
			s.kubeletCopy(pd.node, t)
			pd.state = pending
			s.queue = append(s.queue, pd)
			continue
		}
		pd.nextTry = t + p.RetryEvery
		still = append(still, pd)
	}
	clear(s.inFlight[len(still):])
	s.inFlight = still
}

// account adds this second's pending pod-time to the result and counts the nodes whose true
// count changed.
func (s *fleetSim) account() {
	s.res.PendingPodMin += float64(len(s.queue)) / 60
	for i := range s.fr.nodes {
		if v := s.truthOf(i); v != s.truth[i] {
			s.truth[i] = v
			s.res.CapacityChanges++
		}
	}
}

// finishFleet derives the per-node, per-second and burst figures.
func finishFleet(r *fleetResult, writesAt []int32, marks []int, first map[int]map[int32]int) {
	hours, minutes, secs := float64(r.Seconds)/3600, float64(r.Seconds)/60, float64(r.Seconds)
	r.WritesPerNodeHour = float64(r.CSINodeWrites) / float64(r.Nodes) / hours
	r.LookupsPerNodeMinute = float64(r.CloudLookups) / float64(r.Nodes) / minutes
	r.WritesPerSecond = float64(r.CSINodeWrites) / secs
	r.LookupsPerSecond = float64(r.CloudLookups) / secs
	if r.CapacityChanges > 0 {
		r.WritesPerChange = float64(r.CSINodeWrites) / float64(r.CapacityChanges)
	}
	window := func(from, to, length int) int { // the most writes in length seconds within [from, to)
		best, sum := 0, 0
		for t := from; t < to; t++ {
			sum += int(writesAt[t])
			if t-length >= from {
				sum -= int(writesAt[t-length])
			}
			best = max(best, sum)
		}
		return best
	}
	r.PeakWritesPerSecond = float64(window(0, len(writesAt), 10)) / 10
	for b, at := range marks {
		end := min(at+burstWindow, len(writesAt))
		bu := burst{At: at, PeakPerSecond: float64(window(at, end, 10)) / 10, NodesWriting: len(first[b])}
		for t := at; t < end; t++ {
			bu.Writes += int(writesAt[t])
		}
		bu.ShareOfTheFleet = float64(bu.NodesWriting) / float64(r.Nodes)
		if len(first[b]) > 0 {
			after := make([]int, 0, len(first[b]))
			for _, d := range first[b] {
				after = append(after, d)
			}
			slices.Sort(after)
			bu.FirstHalf = after[(len(after)-1)/2]
			bu.FirstP99 = after[(len(after)-1)*99/100]
		}
		r.Bursts = append(r.Bursts, bu)
	}
}

// fleetOptions are the -fleet flags.
type fleetOptions struct {
	on        bool
	nodes     string
	periods   string
	scenarios string
	shares    string
	spread    time.Duration
	duration  time.Duration
	jsonOut   string
	at        int
}

// parseInts parses a comma-separated list of positive integers.
func parseInts(name, s string, lo, hi int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < lo || v > hi {
			return nil, fmt.Errorf("%s: %q is not a whole number in [%d, %d]", name, f, lo, hi)
		}
		out = append(out, v)
	}
	return out, nil
}

// fleetPlan checks the -fleet flags and lists the runs: every scenario with quota share none
// and even, at every fleet size and period; the quota-cut scenario with the even share also
// with the increase spread (the before/after of the burst).
func fleetPlan(o fleetOptions) ([]fleetRun, error) {
	var errs []error
	nodes, err := parseInts("fleet-nodes", o.nodes, 2, 100000)
	errs = append(errs, err)
	periods, err := parseInts("fleet-periods", o.periods, 1, 3600)
	errs = append(errs, err)
	if o.spread < 0 {
		errs = append(errs, fmt.Errorf("fleet-spread must be >= 0, got %s", o.spread))
	}
	if o.duration < 15*time.Minute || o.duration%time.Second != 0 {
		errs = append(errs, fmt.Errorf("fleet-duration must be whole seconds >= 15m (a third of it is the bursts' 5 min), got %s", o.duration))
	}
	if o.at < 2 {
		errs = append(errs, fmt.Errorf("fleet-at must be >= 2, got %d", o.at))
	}
	want := map[string]bool{}
	for _, s := range strings.Split(o.scenarios, ",") {
		want[strings.TrimSpace(s)] = true
	}
	var scs []fleetScenario
	for _, sc := range fleetScenarios() {
		if want[sc.name] || want["all"] {
			scs = append(scs, sc)
			delete(want, sc.name)
		}
	}
	delete(want, "all")
	for _, s := range slices.Sorted(maps.Keys(want)) {
		errs = append(errs, fmt.Errorf("fleet-scenarios: unknown scenario %q", s))
	}
	var shares []capacity.QuotaShare
	for _, s := range strings.Split(o.shares, ",") {
		share, err := capacity.ParseQuotaShare(strings.TrimSpace(s))
		if err != nil {
			errs = append(errs, fmt.Errorf("fleet-shares: %w", err))
		}
		shares = append(shares, share)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var runs []fleetRun
	for _, sc := range scs {
		for _, share := range shares {
			for _, nn := range nodes {
				for _, per := range periods {
					runs = append(runs, fleetRun{sc: sc, share: share, nodes: nn, period: per})
					if sc.name == "quota-cut" && share == capacity.QuotaShareEven && o.spread > 0 {
						runs = append(runs, fleetRun{sc: sc, share: share, nodes: nn, period: per, spread: o.spread})
					}
				}
			}
		}
	}
	return runs, nil
}

// runFleet runs the plan, prints the tables and, with jsonOut, writes one JSON object per run.
func runFleet(ctx context.Context, p fleetParams, o fleetOptions, stdout io.Writer) error {
	runs, err := fleetPlan(o)
	if err != nil {
		return err
	}
	p.Duration = int(o.duration / time.Second)
	var js io.Writer
	if o.jsonOut != "" {
		f, err := os.Create(o.jsonOut)
		if err != nil {
			return fmt.Errorf("fleet-json: %w", err)
		}
		defer f.Close()
		js = f
	}
	start, cpu0 := time.Now(), cpuSeconds()
	var peakHeap uint64
	workloads := map[[2]int]fleetWorkload{}
	var results []fleetResult
	for i, fr := range runs {
		if err := ctx.Err(); err != nil {
			return err
		}
		si := slices.IndexFunc(fleetScenarios(), func(s fleetScenario) bool { return s.name == fr.sc.name })
		key := [2]int{si, fr.nodes}
		wl, ok := workloads[key]
		if !ok {
			clear(workloads) // one fleet size's workload at a time: bounded memory
			wl = newFleetWorkload(p, fr.nodes, si)
			workloads[key] = wl
		}
		t0 := time.Now()
		r, err := simulateFleet(p, fr, wl, si)
		if err != nil {
			return fmt.Errorf("fleet run %s/%s/%d nodes/%ds: %w", fr.sc.name, fr.share, fr.nodes, fr.period, err)
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peakHeap = max(peakHeap, ms.HeapInuse)
		fmt.Fprintf(os.Stderr, "fleet run %d/%d: %s, share %s, spread %s, %d nodes, period %ds: %d writes, %.1fs\n",
			i+1, len(runs), fr.sc.name, fr.share, fr.spread, fr.nodes, fr.period, r.CSINodeWrites, time.Since(t0).Seconds())
		results = append(results, r)
		if js != nil {
			b, err := json.Marshal(r)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(js, "%s\n", b); err != nil {
				return fmt.Errorf("fleet-json: %w", err)
			}
		}
	}
	printFleet(stdout, p, o, results)
	fmt.Fprintf(stdout, "\nCost of this run: %d fleet runs of %s simulated in %.0f s wall, %.1f CPU-s, peak heap in use %.0f MiB.\n",
		len(runs), o.duration, time.Since(start).Seconds(), cpuSeconds()-cpu0, float64(peakHeap)/(1<<20))
	return nil
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

func printFleet(w io.Writer, p fleetParams, o fleetOptions, rs []fleetResult) {
	fmt.Fprintf(w, "Fleet: seed %d, %d slots per node (limit %d − %d out-of-band, flipping 1 ↔ 2 %.0f× per node-hour), %.1f pods per node of mean life %.0fs, "+
		"scheduler scoring %d sampled nodes, kubelet timers at random phases, %s per run; policy defaults (min interval %s, jitter %.0f%%, window %s).\n\n",
		p.Seed, p.Limit-p.OutOfBand, p.Limit, p.OutOfBand, p.OOBPerNodeHour, p.PodsPerNode, p.MeanLife, p.Sample, o.duration,
		p.Capacity.MinInterval, p.Capacity.Jitter*100, p.Capacity.StabilityWindow)
	fmt.Fprintf(w, "| scenario | quota share | spread | nodes | period | CSINode writes per node-hour | lookups per node-minute | writes per capacity change | fleet writes/s | peak writes/s (10 s) | cloud lookups/s | at %d nodes: writes/s, lookups/s | stale attach failures | pending pod-min per node |\n", o.at)
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %s | %s | %d | %ds | %.2f | %.2f | %.2f | %.2f | %.1f | %.1f | %.1f, %.0f | %d | %.2f |\n",
			r.Scenario, r.QuotaShare, spreadName(r.IncreaseSpreadSeconds), r.Nodes, r.PeriodSeconds, r.WritesPerNodeHour, r.LookupsPerNodeMinute,
			r.WritesPerChange, r.WritesPerSecond, r.PeakWritesPerSecond, r.LookupsPerSecond,
			r.WritesPerNodeHour*float64(o.at)/3600, r.LookupsPerNodeMinute*float64(o.at)/60, r.AttachFailures, r.PendingPodMin/float64(r.Nodes))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Bursts: the CSINode writes in the 5 min after each fleet-wide quota change, and when each writing node wrote first.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| scenario | quota share | spread | nodes | period | change at | writes | nodes writing (share of the fleet) | half of them wrote within | 99% within | peak writes/s (10 s) |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rs {
		for _, b := range r.Bursts {
			fmt.Fprintf(w, "| %s | %s | %s | %d | %ds | %dm | %d | %d (%.0f%%) | %ds | %ds | %.1f |\n",
				r.Scenario, r.QuotaShare, spreadName(r.IncreaseSpreadSeconds), r.Nodes, r.PeriodSeconds, b.At/60, b.Writes, b.NodesWriting,
				100*b.ShareOfTheFleet, b.FirstHalf+1, b.FirstP99+1, b.PeakPerSecond)
		}
	}
	// The legend names only the scenarios that ran: make bench runs two of the three, and a
	// legend line for one with no rows sent readers looking for them.
	for _, sc := range fleetScenarios() {
		if slices.ContainsFunc(rs, func(r fleetResult) bool { return r.Scenario == sc.name }) {
			fmt.Fprintf(w, "\n- %s: %s", sc.name, sc.about)
		}
	}
	fmt.Fprintln(w)
}

func spreadName(s float64) string {
	if s == 0 {
		return "off"
	}
	return (time.Duration(s) * time.Second).String()
}
