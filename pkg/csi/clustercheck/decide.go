package clustercheck

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/internal/kubeapi"
)

// checkInterval is the pause between start-up check attempts.
const checkInterval = 2 * time.Second

// reportTimeout bounds the creation of the Event that explains a fallback, and each re-check.
const reportTimeout = 10 * time.Second

// recheckInterval is how often a node plugin that wants dynamic capacity checks the cluster
// again.
const recheckInterval = 5 * time.Minute

// Config is what the node plugin's start-up step Decide needs: the driver's flags, as
// pkg/csi.Options.ClusterCheckConfig fills them in. Its log lines and reasons quote those
// flags (--dynamic-capacity, --node-name).
type Config struct {
	// DriverName is the CSIDriver object's name (the CSI driver name).
	DriverName string
	// NodeID is the CSI node ID (the cloud instance), for log lines and Events.
	NodeID string
	// NodeName is the node's Kubernetes name (--node-name); empty: no kubelet check and no
	// label.
	NodeName string
	// ModeLabel is the Node label that overrides DynamicCapacity ("true"/"false").
	ModeLabel string
	// DynamicCapacity is what --dynamic-capacity asks for.
	DynamicCapacity bool
	// Timeout bounds the retries of the check at start (--cluster-check-timeout), > 0.
	Timeout time.Duration
}

// Mode is what Decide decided for a node plugin: the capacity policy (capacity.Reporter) or a
// static count (capacity.Static), and the re-check that follows the cluster while the plugin
// runs. The zero value is the capacity policy without a re-check.
type Mode struct {
	// StaticReason is why the node reports a static count (shown in /debug/capacity); ""
	// for the capacity policy.
	StaticReason string
	// Watch re-checks the cluster in the background (its Run) and shows the newest answer
	// (its DebugState, /debug/cluster); nil when nothing is re-checked.
	Watch *Watch
	// Decision is the decision with its reason and evidence (shown in /debug/capacity and
	// as fakecloud_csi_cluster_capacity_decision); its zero value when Decide did not run.
	Decision Decision
}

// Decide is the node plugin's explicit start-up step that decides its Mode; cmd/driver calls
// it before building the driver, and it is the only part of start-up that waits on the
// Kubernetes API server. Controller plugins do not call it.
//
// Wanted is cfg.DynamicCapacity, or the Node's cfg.ModeLabel when kube is set and the Node
// has it. A node that wants dynamic capacity gets it, unless the cluster check (Check)
// answers that the cluster cannot take CSINode allocatable updates (KEP-4876); then it logs
// the problems, creates a Warning Event on the CSIDriver (Report) and reports a static count.
// A check that gets no answer within cfg.Timeout (API server unreachable, RBAC refuses, Node
// missing) keeps what was wanted, read from the flag, and logs why: on the clusters this
// driver targets (v1.36+) that is right, and a missing permission must not silently change
// what the node reports. kube nil skips the check. reg receives
// fakecloud_csi_cluster_dynamic_capacity_supported when a node that wants dynamic capacity
// got an answer, and fakecloud_csi_cluster_capacity_decision and
// fakecloud_csi_cluster_kubelet_minor_version always (exportDecision); nil: not exported.
func Decide(ctx context.Context, cfg Config, kube *kubeapi.Client, reg prometheus.Registerer) Mode {
	mode := decide(ctx, cfg, kube, reg)
	if err := exportDecision(reg, mode.Decision); err != nil {
		klog.FromContext(ctx).Error(err, "Cannot register the capacity decision metrics")
	}
	klog.FromContext(ctx).Info("Capacity decision", "nodeID", cfg.NodeID, "decision", mode.Decision.Decision, "reason", mode.Decision.Reason,
		"kubeletVersion", mode.Decision.Evidence.KubeletVersion, "kubeletGate", mode.Decision.Evidence.KubeletGate,
		"attacherErrorCode", mode.Decision.Evidence.AttacherErrorCode)
	return mode
}

// decide is Decide without the decision's metrics.
func decide(ctx context.Context, cfg Config, kube *kubeapi.Client, reg prometheus.Registerer) Mode {
	logger := klog.FromContext(ctx)
	flagReason := ""
	if !cfg.DynamicCapacity {
		flagReason = "--dynamic-capacity=false"
	}
	// Without a node name there is no label to read, and a static node needs no check.
	if kube == nil || (!cfg.DynamicCapacity && cfg.NodeName == "") {
		logger.Info("Cluster not checked (no Kubernetes API access, or --dynamic-capacity=false without --node-name)",
			"nodeID", cfg.NodeID, "dynamicCapacity", cfg.DynamicCapacity)
		return Mode{StaticReason: flagReason, Decision: uncheckedDecision(cfg.DynamicCapacity, time.Now())}
	}
	chk := Checker{Client: kube, DriverName: cfg.DriverName, NodeName: cfg.NodeName, ModeLabel: cfg.ModeLabel, NodeID: cfg.NodeID}
	res, err := chk.CheckUntil(ctx, checkInterval, cfg.Timeout)
	if err != nil {
		logger.Error(err, "Cannot tell whether the cluster takes CSINode allocatable updates; reporting as --dynamic-capacity says",
			"nodeID", cfg.NodeID, "dynamicCapacity", cfg.DynamicCapacity)
		return Mode{StaticReason: flagReason, Decision: uncheckedDecision(cfg.DynamicCapacity, time.Now())}
	}
	want, wantReason := cfg.DynamicCapacity, flagReason
	if res.ModeLabelSet {
		switch v := res.ModeLabel; v {
		case "true", "false":
			want = v == "true"
			wantReason = ""
			if !want {
				wantReason = "node label " + cfg.ModeLabel + "=false"
			}
			logger.Info("The node label overrides --dynamic-capacity", "nodeID", cfg.NodeID, "label", cfg.ModeLabel, "value", v)
		default:
			logger.Error(nil, "Ignoring the node label: its value must be true or false", "nodeID", cfg.NodeID,
				"label", cfg.ModeLabel, "value", v, "dynamicCapacity", cfg.DynamicCapacity)
		}
	}
	if !want {
		logger.Info("Dynamic capacity is off, reporting a static count", "nodeID", cfg.NodeID, "reason", wantReason)
		return Mode{StaticReason: wantReason, Decision: decisionOf(res, false, wantReason != flagReason, time.Now())}
	}
	supported := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "fakecloud_csi", Subsystem: "cluster", Name: "dynamic_capacity_supported",
		Help: "1 when the start-up check found that the cluster takes CSINode allocatable updates (KEP-4876), 0 when the node plugin fell back to a static count.",
	})
	if reg != nil {
		if err := reg.Register(supported); err != nil {
			logger.Error(err, "Cannot register the cluster check metric")
		}
	}
	kv := []any{"nodeID", cfg.NodeID, "serverVersion", res.ServerVersion, "kubeletVersion", res.KubeletVersion}
	if res.PeriodSeconds != nil {
		kv = append(kv, "nodeAllocatableUpdatePeriodSeconds", *res.PeriodSeconds)
	}
	watch := &Watch{chk: chk, gauge: supported, now: time.Now, atStart: res.Supported}
	watch.record(res)
	decision := decisionOf(res, true, false, time.Now())
	if res.Supported {
		if len(res.Overridden) > 0 {
			kv = append(kv, "overridden", res.Overridden)
		}
		logger.Info("The cluster takes CSINode allocatable updates, reporting dynamic capacity", kv...)
		return Mode{Watch: watch, Decision: decision}
	}
	logger.Error(nil, "The cluster cannot take CSINode allocatable updates (KEP-4876); reporting a static count instead of dynamic capacity",
		append(kv, "problems", res.Problems)...)
	rctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	if err := chk.Report(rctx, res); err != nil {
		logger.Error(err, "Cannot create the Event that explains the static count", "nodeID", cfg.NodeID)
	}
	return Mode{StaticReason: "the cluster cannot take CSINode allocatable updates: " + strings.Join(res.Problems, "; "), Watch: watch, Decision: decision}
}

// Watch re-runs the cluster check while the node plugin runs, so that
// fakecloud_csi_cluster_dynamic_capacity_supported follows the cluster (e.g. someone removed
// the CSIDriver's period: from then on the kubelet no longer refreshes this node's count) and
// a change is logged. It does not switch the reporter: the mode is decided once at start, and
// the log says to restart the node plugin. Decide makes one; safe for concurrent use.
type Watch struct {
	chk     Checker
	gauge   prometheus.Gauge
	now     func() time.Time
	atStart bool // the verdict the mode was decided on

	mu        sync.Mutex
	last      Result // the newest answer, for DebugState
	checkedAt time.Time
}

// DebugInfo is what GET /debug/cluster shows: the newest answer of the cluster check
// (KEP-4876 preconditions), next to the verdict the node plugin's mode was decided on at start.
type DebugInfo struct {
	// CheckedAt is when the newest answer came (RFC 3339); the check runs every 5 minutes.
	CheckedAt time.Time `json:"checkedAt"`
	// Supported: the cluster takes CSINode allocatable updates now.
	Supported bool `json:"supported"`
	// SupportedAtStart is the verdict the mode was decided on; when it differs from Supported,
	// a restart of the node plugin changes the mode.
	SupportedAtStart bool   `json:"supportedAtStart"`
	ServerVersion    string `json:"serverVersion"`
	KubeletVersion   string `json:"kubeletVersion,omitempty"`
	// NodeAllocatableUpdatePeriodSeconds is the CSIDriver's period, absent when unset.
	NodeAllocatableUpdatePeriodSeconds *int64   `json:"nodeAllocatableUpdatePeriodSeconds,omitempty"`
	Problems                           []string `json:"problems,omitempty"`
	// Overridden are problems the Node's mode label "true" overrode (Result.Overridden).
	Overridden []string `json:"overridden,omitempty"`
	// KubeletGate is what the kubelet's version implies for its gate (GateState).
	KubeletGate GateState `json:"kubeletGate,omitempty"`
	// AttacherErrorCode: whether this driver's VolumeAttachments carried errorCode.
	AttacherErrorCode AttacherEvidence `json:"attacherErrorCode,omitempty"`
}

// DebugState returns a DebugInfo of the newest answer (as any, for the driver's debug
// endpoint).
func (w *Watch) DebugState() any {
	w.mu.Lock()
	defer w.mu.Unlock()
	return DebugInfo{
		CheckedAt: w.checkedAt.UTC(), Supported: w.last.Supported, SupportedAtStart: w.atStart,
		ServerVersion: w.last.ServerVersion, KubeletVersion: w.last.KubeletVersion,
		NodeAllocatableUpdatePeriodSeconds: w.last.PeriodSeconds, Problems: w.last.Problems,
		Overridden: w.last.Overridden, KubeletGate: w.last.KubeletGate, AttacherErrorCode: w.last.AttacherErrorCode,
	}
}

// record keeps the answer, sets the gauge to its verdict and reports whether the verdict
// differs from the one before.
func (w *Watch) record(res Result) (changed bool) {
	if res.Supported {
		w.gauge.Set(1)
	} else {
		w.gauge.Set(0)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	changed = res.Supported != w.last.Supported
	w.last, w.checkedAt = res, w.now()
	return changed
}

// Run checks the cluster again every 5 minutes until ctx ends (once each time).
func (w *Watch) Run(ctx context.Context) {
	t := time.NewTicker(recheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.once(ctx)
	}
}

// once checks the cluster once (bounded by reportTimeout), sets the gauge and logs when the
// verdict changed. A failed check changes nothing.
func (w *Watch) once(ctx context.Context) {
	logger := klog.FromContext(ctx)
	cctx, cancel := context.WithTimeout(ctx, reportTimeout)
	res, err := w.chk.Check(cctx)
	cancel()
	if err != nil {
		logger.V(2).Info("Cluster re-check failed", "nodeID", w.chk.NodeID, "err", err)
		return
	}
	if !w.record(res) {
		return
	}
	switch {
	case !res.Supported && w.atStart:
		logger.Error(nil, "The cluster no longer takes CSINode allocatable updates: the kubelet stops refreshing this node's count. Fix it, then restart the node plugin",
			"nodeID", w.chk.NodeID, "problems", res.Problems)
	case res.Supported && !w.atStart:
		logger.Info("The cluster now takes CSINode allocatable updates; restart the node plugin to report dynamic capacity", "nodeID", w.chk.NodeID)
	default:
		logger.Info("The cluster check is back to its verdict at start", "nodeID", w.chk.NodeID, "supported", res.Supported, "problems", res.Problems)
	}
}
