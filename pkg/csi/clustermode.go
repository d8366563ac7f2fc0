package csi

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/clustercheck"
)

// clusterCheckInterval is the pause between start-up cluster check attempts.
const clusterCheckInterval = 2 * time.Second

// reportTimeout bounds the creation of the Event that explains a fallback.
const reportTimeout = 10 * time.Second

// DynamicCapacityNodeLabel is the Node label that switches one node between the capacity
// policy ("true") and the static count ("false"), overriding --dynamic-capacity; read once at
// node plugin start, with --node-name and API access. It is the canary switch of
// docs/upgrade.md: one DaemonSet, some nodes labelled.
const DynamicCapacityNodeLabel = "fakecloud.dev/dynamic-capacity"

// CapacityMode is what the start-up cluster check decided for a node plugin: the capacity
// policy (capacity.Reporter) or a static count (capacity.Static), and the re-check that
// follows the cluster while the plugin runs. The zero value is the capacity policy without a
// re-check. CheckCluster makes one; NewForCloud reads it.
type CapacityMode struct {
	// StaticReason is why the node reports a static count (shown in /debug/capacity); ""
	// for the capacity policy.
	StaticReason string
	// watch re-checks the cluster in the background; nil when nothing is re-checked.
	watch *clusterWatch
}

// CheckCluster is the node plugin's explicit start-up step that decides its CapacityMode;
// cmd/driver calls it before NewForCloud, and it is the only part of start-up that waits on
// the Kubernetes API server. In controller mode it decides nothing.
//
// Wanted is opts.DynamicCapacity, or the Node's DynamicCapacityNodeLabel when kube is set and
// the Node has it. A node that wants dynamic capacity gets it, unless the cluster check
// (package clustercheck) answers that the cluster cannot take CSINode allocatable updates
// (KEP-4876); then it logs the problems, creates a Warning Event on the CSIDriver and reports
// a static count. A check that gets no answer within opts.ClusterCheckTimeout (API server
// unreachable, RBAC refuses, Node missing) keeps what was wanted, read from the flag, and
// logs why: on the clusters this driver targets (v1.36+) that is right, and a missing
// permission must not silently change what the node reports. kube nil skips the check. reg
// receives fakecloud_csi_cluster_dynamic_capacity_supported when a node that wants dynamic
// capacity got an answer.
func CheckCluster(ctx context.Context, opts Options, kube kubernetes.Interface, reg prometheus.Registerer) CapacityMode {
	if opts.Mode != ModeNode && opts.Mode != ModeAll {
		return CapacityMode{}
	}
	reason, watch := staticReason(ctx, opts, kube, reg)
	return CapacityMode{StaticReason: reason, watch: watch}
}

// staticReason is CheckCluster's decision: the static reason ("" for the policy) and the
// re-check, nil when nothing is re-checked.
func staticReason(ctx context.Context, opts Options, kube kubernetes.Interface, reg prometheus.Registerer) (string, *clusterWatch) {
	logger := klog.FromContext(ctx)
	flagReason := ""
	if !opts.DynamicCapacity {
		flagReason = "--dynamic-capacity=false"
	}
	// Without a node name there is no label to read, and a static node needs no check.
	if kube == nil || (!opts.DynamicCapacity && opts.NodeName == "") {
		logger.Info("Cluster not checked (no Kubernetes API access, or --dynamic-capacity=false without --node-name)",
			"nodeID", opts.NodeID, "dynamicCapacity", opts.DynamicCapacity)
		return flagReason, nil
	}
	chk := clustercheck.Checker{Client: kube, DriverName: DriverName, NodeName: opts.NodeName,
		ModeLabel: DynamicCapacityNodeLabel, NodeID: opts.NodeID}
	res, err := chk.CheckUntil(ctx, clusterCheckInterval, opts.ClusterCheckTimeout)
	if err != nil {
		logger.Error(err, "Cannot tell whether the cluster takes CSINode allocatable updates; reporting as --dynamic-capacity says",
			"nodeID", opts.NodeID, "dynamicCapacity", opts.DynamicCapacity)
		return flagReason, nil
	}
	want, wantReason := opts.DynamicCapacity, flagReason
	if res.ModeLabelSet {
		switch v := res.ModeLabel; v {
		case "true", "false":
			want = v == "true"
			wantReason = ""
			if !want {
				wantReason = "node label " + DynamicCapacityNodeLabel + "=false"
			}
			logger.Info("The node label overrides --dynamic-capacity", "nodeID", opts.NodeID, "label", DynamicCapacityNodeLabel, "value", v)
		default:
			logger.Error(nil, "Ignoring the node label: its value must be true or false", "nodeID", opts.NodeID,
				"label", DynamicCapacityNodeLabel, "value", v, "dynamicCapacity", opts.DynamicCapacity)
		}
	}
	if !want {
		logger.Info("Dynamic capacity is off, reporting a static count", "nodeID", opts.NodeID, "reason", wantReason)
		return wantReason, nil
	}
	supported := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "fakecloud_csi", Subsystem: "cluster", Name: "dynamic_capacity_supported",
		Help: "1 when the start-up check found that the cluster takes CSINode allocatable updates (KEP-4876), 0 when the node plugin fell back to a static count.",
	})
	if err := reg.Register(supported); err != nil {
		logger.Error(err, "Cannot register the cluster check metric")
	}
	kv := []any{"nodeID", opts.NodeID, "serverVersion", res.ServerVersion, "kubeletVersion", res.KubeletVersion}
	if res.PeriodSeconds != nil {
		kv = append(kv, "nodeAllocatableUpdatePeriodSeconds", *res.PeriodSeconds)
	}
	watch := &clusterWatch{chk: chk, gauge: supported, now: time.Now, atStart: res.Supported}
	watch.record(res)
	if res.Supported {
		logger.Info("The cluster takes CSINode allocatable updates, reporting dynamic capacity", kv...)
		return "", watch
	}
	logger.Error(nil, "The cluster cannot take CSINode allocatable updates (KEP-4876); reporting a static count instead of dynamic capacity",
		append(kv, "problems", res.Problems)...)
	rctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	if err := chk.Report(rctx, res); err != nil {
		logger.Error(err, "Cannot create the Event that explains the static count", "nodeID", opts.NodeID)
	}
	return "the cluster cannot take CSINode allocatable updates: " + strings.Join(res.Problems, "; "), watch
}

// clusterRecheckInterval is how often a node plugin that wants dynamic capacity checks the
// cluster again.
const clusterRecheckInterval = 5 * time.Minute

// clusterWatch re-runs the cluster check while the node plugin runs, so that
// fakecloud_csi_cluster_dynamic_capacity_supported follows the cluster (e.g. someone removed
// the CSIDriver's period: from then on the kubelet no longer refreshes this node's count) and
// a change is logged. It does not switch the reporter: the mode is decided once at start, and
// the log says to restart the node plugin.
type clusterWatch struct {
	chk     clustercheck.Checker
	gauge   prometheus.Gauge
	now     func() time.Time
	atStart bool // the verdict the mode was decided on

	mu        sync.Mutex
	last      clustercheck.Result // the newest answer, for DebugState
	checkedAt time.Time
}

// ClusterDebugInfo is what GET /debug/cluster shows: the newest answer of the cluster check
// (KEP-4876 preconditions), next to the verdict the node plugin's mode was decided on at start.
type ClusterDebugInfo struct {
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
}

// DebugState returns a ClusterDebugInfo of the newest answer.
func (w *clusterWatch) DebugState() any {
	w.mu.Lock()
	defer w.mu.Unlock()
	return ClusterDebugInfo{
		CheckedAt: w.checkedAt.UTC(), Supported: w.last.Supported, SupportedAtStart: w.atStart,
		ServerVersion: w.last.ServerVersion, KubeletVersion: w.last.KubeletVersion,
		NodeAllocatableUpdatePeriodSeconds: w.last.PeriodSeconds, Problems: w.last.Problems,
	}
}

// record keeps the answer, sets the gauge to its verdict and reports whether the verdict
// differs from the one before.
func (w *clusterWatch) record(res clustercheck.Result) (changed bool) {
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

// run calls once every clusterRecheckInterval until ctx ends.
func (w *clusterWatch) run(ctx context.Context) {
	t := time.NewTicker(clusterRecheckInterval)
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
func (w *clusterWatch) once(ctx context.Context) {
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
