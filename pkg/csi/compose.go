package csi

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/capacity"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/clustercheck"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/nodestate"
)

// The composition root of a driver process: every dependency is built here, in order, and
// passed in; nothing here waits on the network or creates a directory (the state directory
// is created by Driver.Run when it takes its lock).

// NewForCloud builds the Driver of opts.Mode around one cloud client c: the controller and
// node services call c. In node and all modes it first builds the state directory's owner
// and the staged-volume tracker, then the capacity reporter of mode (a capacity.Reporter
// reading the node's capacity through c, persisting its last trusted value under
// opts.StateDir, its floor fed by the tracker; or a capacity.Static count when
// mode.StaticReason is set) and gives the node service the same tracker; mode.Watch, if
// any, runs beside the servers and answers /debug/cluster. mode comes from the start-up step
// clustercheck.Decide (node plugins only); the zero Mode is the capacity policy. m does the
// node's bind mounts;
// reg receives the driver's and the reporter's metrics. opts must have passed
// Options.Validate (cmd/driver validates once, first). Errors: missing dependencies, a
// reporter or metrics that cannot be built.
func NewForCloud(opts Options, c Cloud, mode clustercheck.Mode, m mount.Mounter, reg *prometheus.Registry) (*Driver, error) {
	deps := Deps{ControllerCloud: c, Registry: reg}
	if opts.Mode == ModeNode || opts.Mode == ModeAll {
		staged := nodestate.NewStaged(nodestate.NewDir(opts.StateDir), m)
		reporter, err := newCapacityReporter(opts, mode.StaticReason, c, staged, reg)
		if err != nil {
			return nil, fmt.Errorf("capacity reporter for %s: %w", opts.NodeID, err)
		}
		deps.NodeCloud, deps.Mounter, deps.Capacity, deps.Staged = c, m, reporter, staged
		if mode.Decision.Decision != "" {
			deps.CapacityDecision = mode.Decision
		}
		if mode.Watch != nil {
			deps.Background = append(deps.Background, mode.Watch.Run)
			deps.ClusterCheck = mode.Watch
		}
	}
	return New(opts, deps)
}

// newCapacityReporter is the capacity policy (capacity.Reporter) when staticReason is empty,
// else the static count (capacity.Static).
// The policy's live floor reads staged, the tracker the node service writes.
func newCapacityReporter(opts Options, staticReason string, c Cloud, staged *nodestate.Staged, reg *prometheus.Registry) (CapacityReporter, error) {
	if staticReason != "" {
		return capacity.NewStatic(c, opts.NodeID, staticReason, opts.CapacityConfig().LookupTimeout, reg)
	}
	return capacity.NewReporter(opts.CapacityConfig(), c, opts.NodeID, staged.Count, nil, reg)
}
