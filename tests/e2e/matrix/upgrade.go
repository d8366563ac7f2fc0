package matrix

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
	"github.com/fakecloud/fakecloud-csi/tests/e2e/localcluster"
)

// Walk is the upgrade path of docs/upgrade.md walked on real versions: every kubelet starts
// at From, then for each of Steps the nodes are upgraded one at a time, the first one (the
// canary) first, with PodsPerNode pods holding one volume each on every node.
type Walk struct {
	From        string   `json:"from"`
	Steps       []string `json:"steps"`
	PodsPerNode int      `json:"podsPerNode"`
	// ReplacePlugins: after each kubelet's upgrade its node plugin's pod is replaced (with
	// re-registration, as docs/upgrade.md's canary step 2 does to make it read the label and
	// decide again). False leaves the plugin running: its decision is the one it made at
	// start, against the older kubelet.
	ReplacePlugins bool `json:"replacePlugins"`
}

// DefaultWalk is issue 27's walk: kubelets 1.35 → 1.36 → 1.37 under a 1.37 control plane,
// each node's plugin pod replaced after its kubelet's upgrade.
func DefaultWalk() Walk {
	return Walk{From: "v1.35.4", Steps: []string{"v1.36.3", localcluster.KubeVersion}, PodsPerNode: 2, ReplacePlugins: true}
}

// Validate checks the walk's versions (each a newer minor than the one before, at most one
// minor per step as the skew policy asks of an in-place kubelet upgrade) and bounds.
func (w Walk) Validate() error {
	if w.PodsPerNode < 1 || w.PodsPerNode > 3 {
		return fmt.Errorf("podsPerNode %d: want 1..3 (node-2 holds 3 volumes)", w.PodsPerNode)
	}
	if len(w.Steps) == 0 || len(w.Steps) > 3 {
		return fmt.Errorf("steps %v: want 1..3 versions", w.Steps)
	}
	prev, err := localcluster.KubeMinor(w.From)
	if err != nil {
		return fmt.Errorf("from %q: %w", w.From, err)
	}
	pinned, _ := localcluster.KubeMinor(localcluster.KubeVersion)
	if prev < 34 || prev > pinned {
		return fmt.Errorf("from %s: want a kubelet 1.34..1.%d (the control plane is %s)", w.From, pinned, localcluster.KubeVersion)
	}
	for _, s := range w.Steps {
		m, err := localcluster.KubeMinor(s)
		if err != nil {
			return fmt.Errorf("step %q: %w", s, err)
		}
		if m != prev+1 || m > pinned {
			return fmt.Errorf("step %s after 1.%d: want the next minor, at most the control plane's 1.%d", s, prev, pinned)
		}
		prev = m
	}
	return nil
}

// Builds lists the hollow-kubelet builds the walk needs beyond the pinned set.
func (w Walk) Builds() []localcluster.VersionBuildOptions {
	var out []localcluster.VersionBuildOptions
	for _, v := range append([]string{w.From}, w.Steps...) {
		if v != localcluster.KubeVersion {
			out = append(out, localcluster.VersionBuildOptions{Version: v, Components: []string{"hollow-kubelet"}})
		}
	}
	return out
}

// canaryLabel is docs/upgrade.md's per-node switch; the walk sets it true on each node as it
// is upgraded, the canary first.
const canaryLabel = "fakecloud.dev/dynamic-capacity"

// samplePeriod is how often the walk reads every CSINode (and, every 5th sample, the
// VolumeAttachments and pods).
const samplePeriod = 200 * time.Millisecond

// UpgradeResult is one walk, measured. Durations are seconds.
type UpgradeResult struct {
	Walk   Walk      `json:"walk"`
	Date   time.Time `json:"date"`
	Commit string    `json:"commit"`
	// Nodes are the nodes upgraded, in order (the canary first).
	Nodes []string `json:"nodes"`
	// Steps are the node upgrades in the order they ran.
	Steps []NodeUpgrade `json:"steps"`
	// Samples is how many times every CSINode was read (every 200 ms); CountGaps are the
	// intervals in which a node's CSINode did not list the driver or listed it with a count
	// of 0 or none (empty: never).
	Samples   int   `json:"samples"`
	CountGaps []Gap `json:"countGaps,omitempty"`
	// MinCount is the lowest count each node's CSINode listed during the walk.
	MinCount map[string]int32 `json:"minCount"`
	// VolumeAttachments, Pods are how many the walk created (one per pod). VAsNotAttached are
	// the VolumeAttachments seen missing or with attached false after they were first
	// attached (name: first time seen so, seconds into the walk); PodsNotRunning the same for
	// pods not Running or replaced (another UID).
	VolumeAttachments int                `json:"volumeAttachments"`
	Pods              int                `json:"pods"`
	VAsNotAttached    map[string]float64 `json:"vasNotAttached,omitempty"`
	PodsNotRunning    map[string]float64 `json:"podsNotRunning,omitempty"`
	// VolumesInUseDropped are the nodes whose Node status.volumesInUse (the kubelet's volume
	// manager's mounted volumes) listed fewer than the node's pods' volumes at a sample.
	VolumesInUseDropped []string `json:"volumesInUseDropped,omitempty"`
	// PodRestarts is the sum of the pods' container restart counts after the walk (the
	// hollow kubelet's fake runtime forgets its containers when it restarts).
	PodRestarts int32 `json:"podRestarts"`
	// CloudBefore, CloudAfter are the fake cloud's attachments per node (volume IDs) before
	// the first upgrade and after the last; CloudLost and CloudAdded their difference.
	CloudBefore map[string][]string `json:"cloudBefore"`
	CloudAfter  map[string][]string `json:"cloudAfter"`
	CloudLost   []string            `json:"cloudLost,omitempty"`
	CloudAdded  []string            `json:"cloudAdded,omitempty"`
	// CountFollowed, CountFollowSeconds: after the walk, node-1's count followed one more
	// slot taken out of band (window FollowWindowSeconds).
	CountFollowed       bool     `json:"countFollowed"`
	CountFollowSeconds  *float64 `json:"countFollowSeconds,omitempty"`
	FollowWindowSeconds float64  `json:"followWindowSeconds"`
	// Outcome is "as expected" (no gap, nothing lost, every decision dynamic, the count
	// followed) or what differed; Errors the steps that could not run.
	Outcome      string   `json:"outcome"`
	Errors       []string `json:"errors,omitempty"`
	TotalSeconds float64  `json:"totalSeconds"`
}

// NodeUpgrade is one node's kubelet upgraded in place.
type NodeUpgrade struct {
	Node string `json:"node"`
	From string `json:"from"`
	To   string `json:"to"`
	// ReadySeconds: from the kubelet's stop until the Node reported the new version and a
	// Ready heartbeat from the new kubelet, and its volumesInUse listed the node's volumes.
	ReadySeconds *float64 `json:"readySeconds,omitempty"`
	// DwellSeconds: how long the upgraded kubelet then ran, sampled, before the plugin's
	// restart (two CSIDriver periods: its periodic refresh ran).
	DwellSeconds float64 `json:"dwellSeconds"`
	// Decision, Reason are the node plugin's after the kubelet's upgrade: restarted (with
	// re-registration, as deleting its DaemonSet pod does) to read the canary label when
	// Walk.ReplacePlugins, else the running plugin's, made at its start.
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
	// SettledSeconds: from the kubelet's stop until every VolumeAttachment of the walk was
	// attached and every pod Running again, the plugin restarted.
	SettledSeconds *float64 `json:"settledSeconds,omitempty"`
	// CountBefore, CountAfter are the node's CSINode count before the upgrade and once settled.
	CountBefore int32 `json:"countBefore"`
	CountAfter  int32 `json:"countAfter"`
}

// Gap is an interval in which node's CSINode did not list the driver with a count above 0.
type Gap struct {
	Node string `json:"node"`
	// Start is seconds into the walk; Seconds how long (until the next sample listed it).
	Start   float64 `json:"start"`
	Seconds float64 `json:"seconds"`
	// Absent: the driver was not listed; otherwise the count was 0 or unset.
	Absent bool `json:"absent"`
	// Phase is what the walk was doing when the gap began: "kubelet" (the node's kubelet
	// restarted from the new binary, until its dwell ended), "plugin" (its node plugin's pod
	// replaced, with re-registration) or "" (another node's step, or between steps).
	Phase string `json:"phase,omitempty"`
}

// judge sets Outcome.
func (u *UpgradeResult) judge() {
	var bad []string
	if len(u.Errors) > 0 {
		u.Outcome = "error: " + strings.Join(u.Errors, "; ")
		return
	}
	byPhase := map[string]int{}
	for _, g := range u.CountGaps {
		byPhase[g.Phase]++
	}
	if n := byPhase["kubelet"]; n > 0 {
		bad = append(bad, fmt.Sprintf("%d count gaps while a kubelet was upgraded", n))
	}
	if n := byPhase[""]; n > 0 {
		bad = append(bad, fmt.Sprintf("%d count gaps between node upgrades", n))
	}
	if n := byPhase["plugin"]; n > 0 {
		bad = append(bad, fmt.Sprintf("%d count gaps while a node plugin's pod was replaced (re-registration)", n))
	}
	if len(u.VolumesInUseDropped) > 0 {
		bad = append(bad, fmt.Sprintf("volumesInUse dropped on %v", u.VolumesInUseDropped))
	}
	if len(u.VAsNotAttached) > 0 {
		bad = append(bad, fmt.Sprintf("%d VolumeAttachments not attached", len(u.VAsNotAttached)))
	}
	if len(u.PodsNotRunning) > 0 {
		bad = append(bad, fmt.Sprintf("%d pods not running", len(u.PodsNotRunning)))
	}
	if len(u.CloudLost) > 0 || len(u.CloudAdded) > 0 {
		bad = append(bad, fmt.Sprintf("cloud attachments lost %v, added %v", u.CloudLost, u.CloudAdded))
	}
	for _, s := range u.Steps {
		if s.Decision != "dynamic" {
			bad = append(bad, fmt.Sprintf("%s at %s decided %s (%s)", s.Node, s.To, s.Decision, s.Reason))
		}
	}
	if !u.CountFollowed {
		bad = append(bad, "the count did not follow after the walk")
	}
	if len(bad) == 0 {
		u.Outcome = "as expected"
		return
	}
	u.Outcome = "unexpected: " + strings.Join(bad, "; ")
}

// cloudDiff is what before has and after lacks (lost) and the reverse (added), as
// "node/volume", sorted.
func cloudDiff(before, after map[string][]string) (lost, added []string) {
	for n, vs := range before {
		for _, v := range vs {
			if !slices.Contains(after[n], v) {
				lost = append(lost, n+"/"+v)
			}
		}
	}
	for n, vs := range after {
		for _, v := range vs {
			if !slices.Contains(before[n], v) {
				added = append(added, n+"/"+v)
			}
		}
	}
	sort.Strings(lost)
	sort.Strings(added)
	return lost, added
}

// gapTracker turns samples of each node's count into Gaps.
type gapTracker struct {
	start time.Time
	// phase is what the walk does now, per node (Gap.Phase).
	phase map[string]string
	open  map[string]*Gap
	gaps  []Gap
	min   map[string]int32
}

func newGapTracker(start time.Time) *gapTracker {
	return &gapTracker{start: start, phase: map[string]string{}, open: map[string]*Gap{}, min: map[string]int32{}}
}

// sample records node's state at t: listed with count (0: none).
func (g *gapTracker) sample(t time.Time, node string, listed bool, count int32) {
	at := t.Sub(g.start).Seconds()
	if listed && count > 0 {
		if m, ok := g.min[node]; !ok || count < m {
			g.min[node] = count
		}
		if o := g.open[node]; o != nil {
			o.Seconds = at - o.Start
			g.gaps = append(g.gaps, *o)
			delete(g.open, node)
		}
		return
	}
	if g.open[node] == nil {
		g.open[node] = &Gap{Node: node, Start: at, Absent: !listed, Phase: g.phase[node]}
	}
}

// close ends the open gaps at t.
func (g *gapTracker) close(t time.Time) []Gap {
	nodes := make([]string, 0, len(g.open))
	for n := range g.open {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		o := g.open[n]
		o.Seconds = t.Sub(g.start).Seconds() - o.Start
		g.gaps = append(g.gaps, *o)
	}
	g.open = map[string]*Gap{}
	return g.gaps
}

// RunUpgrade starts a local cluster (control plane localcluster.KubeVersion, every kubelet at
// w.From, the driver dynamic, the CSIDriver period 10 s), creates w.PodsPerNode pods with a
// volume on every node, then walks w.Steps node by node while it samples every CSINode,
// VolumeAttachment and pod; stops the cluster and returns the result, judged. The versions'
// binaries must be built (Walk.Builds).
func RunUpgrade(ctx context.Context, o Options, w Walk) (u UpgradeResult) {
	u = UpgradeResult{Walk: w, Date: time.Now().UTC(), Commit: o.Commit, FollowWindowSeconds: followWindow.Seconds()}
	start := time.Now()
	defer func() { u.TotalSeconds = time.Since(start).Seconds(); u.judge() }()
	run := &walkRun{o: o, w: w, u: &u}
	if err := w.Validate(); err != nil {
		_ = run.fail("walk", err)
		return u
	}
	if err := run.startCluster(ctx, start); err != nil {
		return u
	}
	defer run.cl.Stop()
	if err := run.connect(); err != nil {
		return u
	}
	if err := run.startWorkload(ctx); err != nil {
		return u
	}
	stopSampler := run.startSampler(ctx)
	if err := run.walkNodes(ctx); err != nil {
		stopSampler()
		return u
	}
	// A moment for the last samples, then the sampler stops before the follow check changes
	// node-1's count on purpose.
	time.Sleep(2 * time.Second)
	stopSampler()
	run.closeSamples()
	_ = run.checkAfter(ctx)
	return u
}

// upgradeCSIDriverPeriod is the CSIDriver's period during the walk, in seconds.
const upgradeCSIDriverPeriod = 10

// walkRun is one RunUpgrade in progress: the result it fills in (u; the sampler's fields
// under mu), the cluster and its clients once started, the workload's pods (their UIDs and
// VolumeAttachments as first Running and attached) and the sampler's gap tracker.
type walkRun struct {
	o Options
	w Walk
	u *UpgradeResult

	cl *localcluster.Cluster
	cs kubernetes.Interface
	cc *admin.Client
	r  *cellRun

	pods    []string
	uids    map[string]types.UID
	vaNames map[string]bool

	mu sync.Mutex
	gt *gapTracker
}

func (run *walkRun) logf(format string, args ...any) {
	fmt.Fprintf(run.o.Out, "upgrade: %s\n", fmt.Sprintf(format, args...))
}

// fail records that the step what could not run (UpgradeResult.Errors), logs it, and returns
// err for the caller to stop on.
func (run *walkRun) fail(what string, err error) error {
	run.u.Errors = append(run.u.Errors, what+": "+err.Error())
	run.logf("%s: %v", what, err)
	return err
}

// startCluster starts the local cluster: every kubelet at Walk.From, the CSIDriver period
// upgradeCSIDriverPeriod; start is when the walk began, for the log.
func (run *walkRun) startCluster(ctx context.Context, start time.Time) error {
	period := int64(upgradeCSIDriverPeriod)
	versions := localcluster.Versions{CSIDriverPeriodSeconds: &period}
	if run.w.From != localcluster.KubeVersion {
		dir, err := localcluster.VersionCacheDir(run.w.From)
		if err != nil {
			return run.fail("versions", err)
		}
		versions.KubeletBinDir = dir
	}
	runDir, err := localcluster.NewRunDir()
	if err != nil {
		return run.fail("run dir", err)
	}
	co := localcluster.DefaultOptions(run.o.RepoRoot, run.o.BinDir, runDir)
	co.Versions, co.Out = versions, run.o.Out
	sctx, cancel := context.WithTimeout(ctx, 6*time.Minute)
	cl, err := localcluster.Start(sctx, co)
	cancel()
	if err != nil {
		return run.fail("start the cluster", err)
	}
	run.cl = cl
	run.logf("cluster up in %s (logs %s)", time.Since(start).Round(time.Second), cl.LogDir)
	return nil
}

// connect makes the Kubernetes and fake cloud clients and lists the nodes to upgrade.
func (run *walkRun) connect() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", run.cl.Kubeconfig)
	if err != nil {
		return run.fail("kubeconfig", err)
	}
	if run.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return run.fail("client", err)
	}
	run.cc, err = admin.NewClient(run.cl.CloudURL, cloud.WithToken(run.cl.AdminToken), cloud.WithUserAgent("fakecloud-csi-matrix"))
	if err != nil {
		return run.fail("cloud client", err)
	}
	for _, n := range run.cl.Nodes {
		run.u.Nodes = append(run.u.Nodes, n.Name)
	}
	run.r = &cellRun{o: run.o, plugins: localPlugins{run.cl}, cs: run.cs, cloud: run.cc, row: &Row{Cell: Cell{Name: "upgrade"}}, period: upgradeCSIDriverPeriod,
		target: target, ns: ns, podImage: podImage}
	return nil
}

// startWorkload creates Walk.PodsPerNode pods with one volume each, pinned to every node,
// waits until all are Running with their volumes attached (noting their UIDs and
// VolumeAttachments), and reads the cloud's attachments before the walk.
func (run *walkRun) startWorkload(ctx context.Context) error {
	pods, err := upgradeWorkload(ctx, run.cs, run.u.Nodes, run.w.PodsPerNode)
	if err != nil {
		return run.fail("workload", err)
	}
	run.pods = pods
	run.u.Pods, run.u.VolumeAttachments = len(pods), len(pods)
	run.uids, run.vaNames = map[string]types.UID{}, map[string]bool{}
	if _, ok := waitFor(ctx, 4*time.Minute, func() bool {
		vas, ok := attachedVAs(ctx, run.cs)
		if !ok || len(vas) < len(pods) {
			return false
		}
		for _, name := range pods {
			p, err := run.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil || !running(p) {
				return false
			}
			run.uids[name] = p.UID
		}
		for _, v := range vas {
			run.vaNames[v] = true
		}
		return true
	}); !ok {
		return run.fail("workload", fmt.Errorf("%d pods not all Running with their volumes attached within 4 min", len(pods)))
	}
	run.logf("%d pods Running, %d VolumeAttachments attached", len(pods), len(run.vaNames))
	if run.u.CloudBefore, err = cloudAttachments(ctx, run.cc, run.u.Nodes); err != nil {
		return run.fail("cloud attachments before", err)
	}
	return nil
}

// startSampler starts the sampler: every CSINode every samplePeriod; VolumeAttachments, pods
// and Nodes every 5th time. The returned stop ends it and waits until it has.
func (run *walkRun) startSampler(ctx context.Context) (stop func()) {
	walkStart := time.Now()
	run.gt = newGapTracker(walkStart)
	run.u.VAsNotAttached, run.u.PodsNotRunning = map[string]float64{}, map[string]float64{}
	sctx, stopSampler := context.WithCancel(ctx)
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		tick := time.NewTicker(samplePeriod)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-sctx.Done():
				return
			case <-tick.C:
			}
			if err := run.sampleCounts(sctx); err != nil {
				continue // an API server that did not answer says nothing about the count
			}
			if i%5 == 0 {
				run.sampleWorkload(sctx, time.Since(walkStart).Seconds())
			}
		}
	}()
	return func() {
		stopSampler()
		<-samplerDone
	}
}

// sampleCounts reads every CSINode and gives each node's count of the driver to the gap
// tracker (not listed, or listed with a count of 0 or none, opens a gap).
func (run *walkRun) sampleCounts(ctx context.Context) error {
	cns, err := run.cs.StorageV1().CSINodes().List(ctx, metav1.ListOptions{})
	now := time.Now()
	if err != nil {
		return err
	}
	run.mu.Lock()
	defer run.mu.Unlock()
	run.u.Samples++
	for _, n := range run.u.Nodes {
		listed, count := false, int32(0)
		for _, cn := range cns.Items {
			if cn.Name != n {
				continue
			}
			for _, d := range cn.Spec.Drivers {
				if d.Name == localcluster.DriverName {
					listed = true
					if d.Allocatable != nil && d.Allocatable.Count != nil {
						count = *d.Allocatable.Count
					}
				}
			}
		}
		run.gt.sample(now, n, listed, count)
	}
	return nil
}

// sampleWorkload notes, at seconds into the walk, the walk's VolumeAttachments not attached,
// its pods not Running (or replaced), and the Nodes whose volumesInUse lists fewer than
// Walk.PodsPerNode, each the first time seen. A list that fails is skipped, and so are the
// ones after it.
func (run *walkRun) sampleWorkload(ctx context.Context, at float64) {
	u := run.u
	if vas, ok := attachedVAs(ctx, run.cs); ok {
		run.mu.Lock()
		for v := range run.vaNames {
			if !slices.Contains(vas, v) {
				if _, seen := u.VAsNotAttached[v]; !seen {
					u.VAsNotAttached[v] = at
				}
			}
		}
		run.mu.Unlock()
	}
	pl, err := run.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	run.mu.Lock()
	for _, name := range run.pods {
		ok := false
		for i := range pl.Items {
			if p := &pl.Items[i]; p.Name == name && p.UID == run.uids[name] && p.Status.Phase == corev1.PodRunning {
				ok = true
			}
		}
		if _, seen := u.PodsNotRunning[name]; !ok && !seen {
			u.PodsNotRunning[name] = at
		}
	}
	run.mu.Unlock()
	nl, err := run.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	run.mu.Lock()
	for _, n := range nl.Items {
		if len(n.Status.VolumesInUse) < run.w.PodsPerNode && !slices.Contains(u.VolumesInUseDropped, n.Name) {
			u.VolumesInUseDropped = append(u.VolumesInUseDropped, n.Name)
		}
	}
	run.mu.Unlock()
}

// walkNodes upgrades every node, one at a time, to each of Walk.Steps in turn (upgradeNode),
// recording each step; it stops at the first that fails.
func (run *walkRun) walkNodes(ctx context.Context) error {
	current := run.w.From
	for _, to := range run.w.Steps {
		binary, err := localcluster.BinaryFor(run.o.BinDir, to, "hollow-kubelet")
		if err != nil {
			return run.fail("kubelet "+to, err)
		}
		for _, node := range run.u.Nodes {
			s, err := upgradeNode(ctx, upgradeStep{cl: run.cl, cs: run.cs, r: run.r, node: node, from: current, to: to, binary: binary,
				perNode: run.w.PodsPerNode, replacePlugin: run.w.ReplacePlugins,
				phase: func(p string) {
					run.mu.Lock()
					defer run.mu.Unlock()
					run.gt.phase[node] = p
				},
				settled: func() bool { return run.settled(ctx) }})
			run.u.Steps = append(run.u.Steps, s)
			run.logf("%s %s → %s: Ready %s, decision %s (%s), settled %s, count %d → %d", node, s.From, s.To,
				secs(s.ReadySeconds), s.Decision, s.Reason, secs(s.SettledSeconds), s.CountBefore, s.CountAfter)
			if err != nil {
				return run.fail(node+" → "+to, err)
			}
		}
		current = to
	}
	return nil
}

// settled says whether every VolumeAttachment of the walk is attached and the same pods
// (same UIDs) are Running.
func (run *walkRun) settled(ctx context.Context) bool {
	vas, ok := attachedVAs(ctx, run.cs)
	if !ok {
		return false
	}
	for v := range run.vaNames {
		if !slices.Contains(vas, v) {
			return false
		}
	}
	for _, name := range run.pods {
		p, err := run.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.UID != run.uids[name] || !running(p) {
			return false
		}
	}
	return true
}

// closeSamples ends the stopped sampler's open gaps and keeps its findings in the result
// (an empty map of findings as none).
func (run *walkRun) closeSamples() {
	u := run.u
	run.mu.Lock()
	u.CountGaps = run.gt.close(time.Now())
	u.MinCount = run.gt.min
	run.mu.Unlock()
	if len(u.VAsNotAttached) == 0 {
		u.VAsNotAttached = nil
	}
	if len(u.PodsNotRunning) == 0 {
		u.PodsNotRunning = nil
	}
}

// checkAfter measures the walk's end state: the pods' restarts, the cloud's attachments
// against those before, and whether node-1's count still follows a slot taken out of band.
func (run *walkRun) checkAfter(ctx context.Context) error {
	u := run.u
	if pl, err := run.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pl.Items {
			for _, c := range p.Status.ContainerStatuses {
				u.PodRestarts += c.RestartCount
			}
		}
	}
	var err error
	if u.CloudAfter, err = cloudAttachments(ctx, run.cc, u.Nodes); err != nil {
		return run.fail("cloud attachments after", err)
	}
	u.CloudLost, u.CloudAdded = cloudDiff(u.CloudBefore, u.CloudAfter)
	ok, took, err := run.r.followOnce(ctx)
	if err != nil {
		return run.fail("count follows", err)
	}
	u.CountFollowed = ok
	if ok {
		u.CountFollowSeconds = seconds(took)
	}
	run.logf("after the walk: %d samples, %d gaps, cloud lost %v added %v, count followed %v in %s", u.Samples, len(u.CountGaps), u.CloudLost, u.CloudAdded, ok, took.Round(100*time.Millisecond))
	return nil
}

// upgradeStep is one node's upgrade: the cluster, the node, the versions and the walk's hooks.
type upgradeStep struct {
	cl             *localcluster.Cluster
	cs             kubernetes.Interface
	r              *cellRun
	node, from, to string
	binary         string
	perNode        int
	replacePlugin  bool
	// phase tells the sampler what the step does now (Gap.Phase); settled answers whether
	// every VolumeAttachment of the walk is attached and the same pods Running.
	phase   func(string)
	settled func() bool
}

// dwell is how long an upgraded kubelet runs, sampled, before its plugin's pod is replaced:
// two CSIDriver periods, so that its periodic refresh ran at least once.
const dwell = 20 * time.Second

// upgradeNode is one in-place kubelet upgrade, as an operator does it: the canary label on
// the Node, the kubelet restarted from the new binary (same root dir: its pods, mounts and
// the plugin's registration socket stay), the Node back at the new version with a heartbeat of
// the new kubelet and its volumes in use, two periods of dwell, the node plugin's pod replaced
// (re-registration) so that it reads the label and decides again, and the workload settled.
func upgradeNode(ctx context.Context, st upgradeStep) (NodeUpgrade, error) {
	s := NodeUpgrade{Node: st.node, From: st.from, To: st.to}
	defer st.phase("")
	c, _, err := st.r.countOf(ctx, st.node)
	if err != nil {
		return s, err
	}
	s.CountBefore = c
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"true"}}}`, canaryLabel)
	if _, err := st.cs.CoreV1().Nodes().Patch(ctx, st.node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return s, fmt.Errorf("label: %w", err)
	}
	st.phase("kubelet")
	began := time.Now()
	if err := st.cl.RestartKubelet(ctx, st.node, st.binary); err != nil {
		return s, err
	}
	// Heartbeats have a resolution of one second: one from the new kubelet is at or after
	// the second the old one stopped in.
	since := began.Truncate(time.Second)
	want := strings.TrimPrefix(st.to, "v")
	var seen string
	took, ok := waitFor(ctx, 3*time.Minute, func() bool {
		n, err := st.cs.CoreV1().Nodes().Get(ctx, st.node, metav1.GetOptions{})
		if err != nil {
			return false
		}
		seen = n.Status.NodeInfo.KubeletVersion
		if strings.TrimPrefix(seen, "v") != want || len(n.Status.VolumesInUse) < st.perNode {
			return false
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue && !c.LastHeartbeatTime.Time.Before(since)
			}
		}
		return false
	})
	if !ok {
		return s, fmt.Errorf("node %s not Ready at %s with its volumes in use within 3 min (kubelet reports %q)", st.node, st.to, seen)
	}
	s.ReadySeconds = seconds(took)
	d0 := time.Now()
	select {
	case <-ctx.Done():
		return s, ctx.Err()
	case <-time.After(dwell):
	}
	s.DwellSeconds = time.Since(d0).Seconds()
	if st.replacePlugin {
		st.phase("plugin")
		if err := st.cl.RestartNodePlugin(ctx, st.node, localcluster.NodePluginRestart{Reregister: true}); err != nil {
			return s, err
		}
	}
	if s.Decision, s.Reason, err = readDecisionOf(ctx, st.r, st.node); err != nil {
		return s, err
	}
	if _, ok := waitFor(ctx, 3*time.Minute, func() bool {
		_, listed, _ := st.r.countOf(ctx, st.node)
		return listed && st.settled()
	}); !ok {
		return s, errors.New("the workload did not settle within 3 min (VolumeAttachments attached, the same pods Running)")
	}
	s.SettledSeconds = seconds(time.Since(began))
	// The kubelet's plugin watcher may still deregister and register the replaced plugin
	// (its gap is the sampler's to record): the count after is the first one listed again.
	waitFor(ctx, time.Minute, func() bool {
		c, listed, _ := st.r.countOf(ctx, st.node)
		s.CountAfter = c
		return listed && c > 0 && time.Since(began) > dwell+3*time.Second
	})
	return s, nil
}

// readDecisionOf is node's plugin's decision from /debug/capacity.
func readDecisionOf(ctx context.Context, r *cellRun, node string) (string, string, error) {
	var d struct {
		Decision struct {
			Decision, Reason string
		} `json:"decision"`
	}
	if err := r.plugins.getJSON(ctx, node, "/debug/capacity", &d); err != nil {
		return "", "", err
	}
	return d.Decision.Decision, d.Decision.Reason, nil
}

// attachedVAs is the names of this driver's VolumeAttachments with attached true.
func attachedVAs(ctx context.Context, cs kubernetes.Interface) ([]string, bool) {
	vas, err := cs.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, false
	}
	var out []string
	for _, va := range vas.Items {
		if va.Spec.Attacher == localcluster.DriverName && va.Status.Attached {
			out = append(out, va.Name)
		}
	}
	return out, true
}

// cloudAttachments is every node's attachments in the fake cloud.
func cloudAttachments(ctx context.Context, cc *admin.Client, nodes []string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, n := range nodes {
		in, err := cc.GetInstance(ctx, n)
		if err != nil {
			return nil, err
		}
		out[n] = slices.Clone(in.Attachments)
	}
	return out, nil
}

// upgradeWorkload creates the namespace and perNode pods with one volume each on every node;
// it returns the pods' names.
func upgradeWorkload(ctx context.Context, cs kubernetes.Interface, nodes []string, perNode int) ([]string, error) {
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	zero := int64(0)
	var names []string
	for _, n := range nodes {
		for i := range perNode {
			name := fmt.Sprintf("%s-%d", n, i)
			if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim(ns, name), metav1.CreateOptions{}); err != nil {
				return nil, err
			}
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: &zero, NodeSelector: map[string]string{hostKey: n},
				Containers: []corev1.Container{{Name: "app", Image: podImage, VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "/data"}}}},
				Volumes:    []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}},
			}}
			if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				return nil, err
			}
			names = append(names, name)
		}
	}
	return names, nil
}
