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

// staticReason decides whether the node plugin reports the capacity policy's value ("") or a
// static count (why, for /debug/capacity):
// opts.DynamicCapacity, unless kube is set and the cluster check (package clustercheck) answers
// that the cluster cannot take CSINode allocatable updates (KEP-4876); then it logs the
// problems, creates a Warning Event on the CSIDriver and reports a static count. A check that
// gets no answer within opts.ClusterCheckTimeout (API server unreachable, RBAC refuses) keeps
// opts.DynamicCapacity and logs why: on the clusters this driver targets (v1.36+) that is
// right, and a missing permission must not silently change what the node reports.
// reg receives fakecloud_csi_cluster_dynamic_capacity_supported when the check answered.
func staticReason(ctx context.Context, opts Options, kube kubernetes.Interface, reg prometheus.Registerer) string {
	if !opts.DynamicCapacity {
		klog.InfoS("Dynamic capacity is off (--dynamic-capacity=false), reporting a static count", "nodeID", opts.NodeID)
		return "--dynamic-capacity=false"
	}
	if kube == nil {
		klog.InfoS("No Kubernetes API access (no --kubeconfig, not in a pod): cluster not checked, reporting dynamic capacity", "nodeID", opts.NodeID)
		return ""
	}
	chk := clustercheck.Checker{Client: kube, DriverName: DriverName, NodeName: opts.NodeName, NodeID: opts.NodeID}
	res, err := chk.CheckUntil(ctx, clusterCheckInterval, opts.ClusterCheckTimeout)
	if err != nil {
		klog.ErrorS(err, "Cannot tell whether the cluster takes CSINode allocatable updates; reporting dynamic capacity as configured", "nodeID", opts.NodeID)
		return ""
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
