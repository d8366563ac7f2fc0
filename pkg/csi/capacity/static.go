package capacity

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// Static answers NodeGetInfo.max_volumes_per_node with a count that never changes: the
// instance's slots (attach limit − out-of-band slots, at least 1) read from the cloud once,
// at the first successful lookup. It is what the node plugin reports with
// --dynamic-capacity=false, or on a cluster that cannot take allocatable updates (KEP-4876
// not available): there the kubelet reads the value only at registration, so a value that
// depends on attachments or the quota at that moment would stay wrong for the node's life.
// Static does not read or write the persisted state of Reporter, so a later rollback or
// roll-forward to the dynamic policy finds the last trusted value untouched. Safe for
// concurrent use.
type Static struct {
	src           Source
	instanceID    string
	reason        string
	lookupTimeout time.Duration
	m             *metrics

	mu     sync.Mutex // held during the lookup, so there is at most one at a time
	value  int64      // 0 until the first successful lookup
	inputs *cloud.Capacity
	err    error
}

// NewStatic returns a static count for instanceID read through src; each lookup is bounded by
// lookupTimeout (> 0). reason says why the count is static (shown by DebugState, e.g.
// "--dynamic-capacity=false"). reg nil means the metrics are not exported. It does not call
// the cloud.
// Errors: nil src, empty instanceID, lookupTimeout <= 0, metrics that cannot be registered.
func NewStatic(src Source, instanceID, reason string, lookupTimeout time.Duration, reg prometheus.Registerer) (*Static, error) {
	var errs []error
	if src == nil {
		errs = append(errs, errors.New("capacity source is nil"))
	}
	if instanceID == "" {
		errs = append(errs, errors.New("capacity instance ID is empty"))
	}
	if lookupTimeout <= 0 {
		errs = append(errs, fmt.Errorf("capacity lookup-timeout must be > 0, got %s", lookupTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("new static capacity: %w", err)
	}
	s := &Static{src: src, instanceID: instanceID, reason: reason, lookupTimeout: lookupTimeout,
		m: newMetrics(func() float64 { return -1 })}
	if reg != nil {
		if err := register(reg, s.m.staticCollectors()); err != nil {
			return nil, fmt.Errorf("new static capacity: %w", err)
		}
	}
	s.m.info.WithLabelValues(instanceID).Set(1)
	s.m.dynamic.Set(0)
	return s, nil
}

// CachedMaxVolumesPerNode returns the static count, with ok true, once a lookup has
// succeeded; before that it does nothing and ok is false (MaxVolumesPerNode looks up).
func (s *Static) CachedMaxVolumesPerNode(context.Context) (slots int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.value, s.value > 0
}

// MaxVolumesPerNode returns the static count (≥ 1). Until a lookup has succeeded each call
// looks the cloud up and returns its error (a *cloud.Error or a transport or context error,
// wrapped), so that NodeGetInfo fails with a retryable code and the kubelet retries the
// registration rather than registering a guess that would never be corrected.
func (s *Static) MaxVolumesPerNode(ctx context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.value > 0 {
		return s.value, nil
	}
	lctx, cancel := context.WithTimeout(ctx, s.lookupTimeout)
	c, err := s.src.GetCapacity(lctx, s.instanceID)
	cancel()
	s.m.lookups.Inc()
	class := ClassInvalid
	switch {
	case err != nil:
		class = Classify(err)
	case c == nil:
		err = errors.New("cloud returned no capacity")
	case c.InstanceID != "" && c.InstanceID != s.instanceID:
		err = fmt.Errorf("cloud returned the capacity of instance %q", c.InstanceID)
	case c.AttachLimit < 0 || c.OutOfBandSlots < 0:
		err = fmt.Errorf("cloud returned a negative limit (%d) or out-of-band count (%d)", c.AttachLimit, c.OutOfBandSlots)
	}
	if err != nil {
		s.m.lookupErrors.WithLabelValues(string(class)).Inc()
		logger := klog.FromContext(ctx)
		if s.err == nil {
			// The first failure only: Run retries with a backoff and the kubelet retries
			// NodeGetInfo, each failure alike.
			logger.Error(err, "Static capacity lookup failing, NodeGetInfo fails until it succeeds", "nodeID", s.instanceID, "class", class)
		} else {
			logger.V(2).Info("Static capacity lookup failed", "nodeID", s.instanceID, "class", class, "err", err)
		}
		s.err = err
		return 0, fmt.Errorf("static capacity of %s: %w", s.instanceID, err)
	}
	s.value = max(1, int64(c.Slots()))
	in := *c
	s.inputs, s.err = &in, nil
	s.m.setCloud(in)
	s.m.reported.Set(float64(s.value))
	klog.FromContext(ctx).Info("Static capacity fixed", "nodeID", s.instanceID, "reported", s.value,
		"attachLimit", c.AttachLimit, "outOfBandSlots", c.OutOfBandSlots, "revision", c.Revision)
	return s.value, nil
}

// Restore does nothing: the static count reads no persisted state (see Static), so that the
// capacity policy's last trusted value stays as it was for a later roll-forward.
func (s *Static) Restore(context.Context) {}

// Run fixes the count at start: it looks the cloud up until a lookup succeeds (waiting 1s
// after the first failure, doubling up to 30s) or ctx ends, then returns nil, so that
// /debug/capacity and the metrics show the count before the kubelet's first NodeGetInfo. The
// driver runs it beside the gRPC server (CapacityReporter.Run).
func (s *Static) Run(ctx context.Context) error {
	// DelayFunc keeps returning the cap once reached, so this retries until ctx ends
	// (ExponentialBackoff would give up at the cap).
	retry := wait.Backoff{Duration: time.Second, Factor: 2, Cap: 30 * time.Second, Steps: math.MaxInt32}
	_ = retry.DelayFunc().Until(ctx, true, false, func(ctx context.Context) (bool, error) {
		_, err := s.MaxVolumesPerNode(ctx)
		return err == nil, nil
	})
	return nil
}

// StaticDebugInfo is the JSON-able state Static.DebugState returns.
type StaticDebugInfo struct {
	NodeID string `json:"nodeId"`
	// Mode is always "static".
	Mode string `json:"mode"`
	// Reason says why: the flag, or the cluster check's problems.
	Reason string `json:"reason,omitempty"`
	// Reported is the fixed count, 0 until the first successful lookup.
	Reported  int64           `json:"reported"`
	Inputs    *cloud.Capacity `json:"inputs,omitempty"`
	LastError string          `json:"lastError,omitempty"`
}

// DebugState returns a StaticDebugInfo (as any, for the node service's interface). It does
// not call the cloud.
func (s *Static) DebugState() any {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := StaticDebugInfo{NodeID: s.instanceID, Mode: "static", Reason: s.reason, Reported: s.value, Inputs: s.inputs}
	if s.err != nil {
		d.LastError = s.err.Error()
	}
	return d
}
