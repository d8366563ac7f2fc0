package csi

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/capacity"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/clustercheck"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

// clusterCheckInterval is the pause between start-up cluster check attempts.
const clusterCheckInterval = 2 * time.Second

// reportTimeout bounds the creation of the Event that explains a fallback.
const reportTimeout = 10 * time.Second

// newCapacityReporter is the capacity policy (capacity.Reporter) when staticReason is empty,
// else the static count (capacity.Static).
func newCapacityReporter(opts Options, staticReason string, c Cloud, reg *prometheus.Registry) (CapacityReporter, error) {
	if staticReason != "" {
		return capacity.NewStatic(c, opts.NodeID, staticReason, opts.CapacityConfig().LookupTimeout, reg)
	}
	return capacity.NewReporter(opts.CapacityConfig(), c, opts.NodeID, nil, reg)
}

// DynamicCapacityNodeLabel is the Node label that switches one node between the capacity
// policy ("true") and the static count ("false"), overriding --dynamic-capacity; read once at
// node plugin start, with --node-name and API access. It is the canary switch of
// docs/upgrade.md: one DaemonSet, some nodes labelled.
const DynamicCapacityNodeLabel = "fakecloud.dev/dynamic-capacity"

// staticReason decides whether the node plugin reports the capacity policy's value ("") or a
// static count (why, for /debug/capacity). Wanted is opts.DynamicCapacity, or the Node's
// DynamicCapacityNodeLabel when kube is set and the Node has it. A node that wants dynamic
// capacity gets it, unless the cluster check (package clustercheck) answers that the cluster
// cannot take CSINode allocatable updates (KEP-4876); then it logs the problems, creates a
// Warning Event on the CSIDriver and reports a static count. A check that gets no answer
// within opts.ClusterCheckTimeout (API server unreachable, RBAC refuses, Node missing) keeps
// what was wanted, read from the flag, and logs why: on the clusters this driver targets
// (v1.36+) that is right, and a missing permission must not silently change what the node
// reports. reg receives fakecloud_csi_cluster_dynamic_capacity_supported when a node that
// wants dynamic capacity got an answer.
func staticReason(ctx context.Context, opts Options, kube kubernetes.Interface, reg prometheus.Registerer) string {
	flagReason := ""
	if !opts.DynamicCapacity {
		flagReason = "--dynamic-capacity=false"
	}
	// Without a node name there is no label to read, and a static node needs no check.
	if kube == nil || (!opts.DynamicCapacity && opts.NodeName == "") {
		klog.InfoS("Cluster not checked (no Kubernetes API access, or --dynamic-capacity=false without --node-name)",
			"nodeID", opts.NodeID, "dynamicCapacity", opts.DynamicCapacity)
		return flagReason
	}
	chk := clustercheck.Checker{Client: kube, DriverName: DriverName, NodeName: opts.NodeName,
		ModeLabel: DynamicCapacityNodeLabel, NodeID: opts.NodeID}
	res, err := chk.CheckUntil(ctx, clusterCheckInterval, opts.ClusterCheckTimeout)
	if err != nil {
		klog.ErrorS(err, "Cannot tell whether the cluster takes CSINode allocatable updates; reporting as --dynamic-capacity says",
			"nodeID", opts.NodeID, "dynamicCapacity", opts.DynamicCapacity)
		return flagReason
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
			klog.InfoS("The node label overrides --dynamic-capacity", "nodeID", opts.NodeID, "label", DynamicCapacityNodeLabel, "value", v)
		default:
			klog.ErrorS(nil, "Ignoring the node label: its value must be true or false", "nodeID", opts.NodeID,
				"label", DynamicCapacityNodeLabel, "value", v, "dynamicCapacity", opts.DynamicCapacity)
		}
	}
	if !want {
		klog.InfoS("Dynamic capacity is off, reporting a static count", "nodeID", opts.NodeID, "reason", wantReason)
		return wantReason
	}
	supported := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "fakecloud_csi", Subsystem: "cluster", Name: "dynamic_capacity_supported",
		Help: "1 when the start-up check found that the cluster takes CSINode allocatable updates (KEP-4876), 0 when the node plugin fell back to a static count.",
	})
	if err := reg.Register(supported); err != nil {
		klog.ErrorS(err, "Cannot register the cluster check metric")
	}
	kv := []any{"nodeID", opts.NodeID, "serverVersion", res.ServerVersion, "kubeletVersion", res.KubeletVersion}
	if res.PeriodSeconds != nil {
		kv = append(kv, "nodeAllocatableUpdatePeriodSeconds", *res.PeriodSeconds)
	}
	if res.Supported {
		supported.Set(1)
		klog.InfoS("The cluster takes CSINode allocatable updates, reporting dynamic capacity", kv...)
		return ""
	}
	supported.Set(0)
	klog.ErrorS(nil, "The cluster cannot take CSINode allocatable updates (KEP-4876); reporting a static count instead of dynamic capacity",
		append(kv, "problems", res.Problems)...)
	rctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	if err := chk.Report(rctx, res); err != nil {
		klog.ErrorS(err, "Cannot create the Event that explains the static count", "nodeID", opts.NodeID)
	}
	return "the cluster cannot take CSINode allocatable updates: " + strings.Join(res.Problems, "; ")
}

// NewForCloud builds the Driver of opts.Mode around one cloud client c: the controller and
// node services call c, and in node and all modes a capacity.Reporter reads the node's capacity
// through c and persists its last trusted value under opts.StateDir (created 0750 if missing),
// or a capacity.Static reports a count read once: with opts.DynamicCapacity false, or when
// kube is not nil and the start-up cluster check finds that the cluster cannot take CSINode
// allocatable updates (see staticReason; this may wait up to opts.ClusterCheckTimeout for
// the API server). kube nil skips the check. m does the node's bind mounts; reg receives the
// driver's and the reporter's metrics.
// Errors: invalid opts (every problem at once), an unusable state dir.
func NewForCloud(ctx context.Context, opts Options, c Cloud, kube kubernetes.Interface, m mount.Mounter, reg *prometheus.Registry) (*Driver, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	deps := Deps{ControllerCloud: c, Registry: reg}
	if opts.Mode == ModeNode || opts.Mode == ModeAll {
		if err := os.MkdirAll(opts.StateDir, 0o750); err != nil {
			return nil, fmt.Errorf("create state dir %s: %w", opts.StateDir, err)
		}
		reporter, err := newCapacityReporter(opts, staticReason(ctx, opts, kube, reg), c, reg)
		if err != nil {
			return nil, fmt.Errorf("capacity reporter for %s: %w", opts.NodeID, err)
		}
		deps.NodeCloud, deps.Mounter, deps.Capacity = c, m, reporter
	}
	return New(opts, deps)
}
