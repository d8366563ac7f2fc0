package csi

import (
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/capacity"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

// newCapacityReporter is the capacity policy (capacity.Reporter) with opts.DynamicCapacity,
// else the static count (capacity.Static).
func newCapacityReporter(opts Options, c Cloud, reg *prometheus.Registry) (CapacityReporter, error) {
	if !opts.DynamicCapacity {
		klog.InfoS("Dynamic capacity is off, reporting a static count", "nodeID", opts.NodeID)
		return capacity.NewStatic(c, opts.NodeID, opts.CapacityConfig().LookupTimeout, reg)
	}
	return capacity.NewReporter(opts.CapacityConfig(), c, opts.NodeID, nil, reg)
}

// NewForCloud builds the Driver of opts.Mode around one cloud client c: the controller and
// node services call c, and in node and all modes a capacity.Reporter reads the node's capacity
// through c and persists its last trusted value under opts.StateDir (created 0750 if missing),
// or with opts.DynamicCapacity false a capacity.Static reports a count read once.
// m does the node's bind mounts; reg receives the driver's and the reporter's metrics.
// Errors: invalid opts (every problem at once), an unusable state dir.
func NewForCloud(opts Options, c Cloud, m mount.Mounter, reg *prometheus.Registry) (*Driver, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	deps := Deps{ControllerCloud: c, Registry: reg}
	if opts.Mode == ModeNode || opts.Mode == ModeAll {
		if err := os.MkdirAll(opts.StateDir, 0o750); err != nil {
			return nil, fmt.Errorf("create state dir %s: %w", opts.StateDir, err)
		}
		reporter, err := newCapacityReporter(opts, c, reg)
		if err != nil {
			return nil, fmt.Errorf("capacity reporter for %s: %w", opts.NodeID, err)
		}
		deps.NodeCloud, deps.Mounter, deps.Capacity = c, m, reporter
	}
	return New(opts, deps)
}
