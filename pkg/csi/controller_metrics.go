package csi

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/status"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/backoff"
)

// Attach operations, the "operation" label of fakecloud_csi_controller_attach_operations_total.
const (
	opPublish   = "publish"
	opUnpublish = "unpublish"
)

// Cloud classes of a publish or unpublish outcome, the "class" label: what the cloud said
// (docs/errors.md), or why it was not asked. A bounded set.
const (
	classNone       = "none"       // the cloud answered OK
	classCapacity   = "capacity"   // AttachmentLimitExceeded, AttachmentQuotaExceeded (and the other quotas)
	classPermission = "permission" // AccessDenied
	classAuth       = "auth"       // Unauthenticated
	classTopology   = "topology"   // ZoneMismatch
	classConflict   = "conflict"   // VolumeInUse, PreconditionFailed
	classNotFound   = "notFound"   // VolumeNotFound, InstanceNotFound, ...
	classThrottled  = "throttled"  // Throttled
	classServer     = "server"     // InternalError, Unavailable
	classHealth     = "health"     // InstanceImpaired, InstanceStopped
	classTimeout    = "timeout"    // deadline or transport timeout, no cloud answer
	classCanceled   = "canceled"   // the caller's context ended
	classNetwork    = "network"    // any other transport failure
	classOther      = "other"      // any other cloud code
	classBackoff    = "backoff"    // answered from the publish backoff, cloud not asked
	classNotAsked   = "notAsked"   // invalid request or operation in flight, cloud not asked
)

// cloudClass is the class label for err, an error straight from a cloud call (before it is
// turned into a status error, which keeps only the message): the Metric column of the row of
// its class (cloud.ClassOf, cloud.Class.Handling), one of the constants above.
func cloudClass(err error) string { return cloud.ClassOf(err).Handling().Metric }

// controllerMetrics are the controller's attach series (docs/metrics.md).
type controllerMetrics struct {
	ops      *prometheus.CounterVec
	refusals *prometheus.CounterVec
	windows  *prometheus.GaugeVec
	bo       *backoff.Backoff
	inflight prometheus.GaugeFunc
}

// newControllerMetrics creates the controller's series reading bo (nil: no backoff, its
// gauges stay 0) and in, and registers them on reg.
func newControllerMetrics(reg prometheus.Registerer, bo *backoff.Backoff, in *inflight) (*controllerMetrics, error) {
	const ns, sub = "fakecloud_csi", "controller"
	m := &controllerMetrics{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "attach_operations_total",
			Help: "ControllerPublishVolume (operation=publish) and ControllerUnpublishVolume (operation=unpublish) results, by gRPC code and the cloud's error class (none on success; backoff or notAsked when the cloud was not asked)."},
			[]string{"operation", "code", "class"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "backoff_refusals_total",
			Help: "Publishes answered from a backoff window without asking the cloud, by window class (capacity: node-wide, retryable: one volume)."},
			[]string{"class"}),
		windows: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "backoff_windows",
			Help: "Backoff windows in force at scrape time, by class (capacity: nodes, retryable: node/volume pairs)."},
			[]string{"class"}),
		bo: bo,
		inflight: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "inflight_operations",
			Help: "Controller operations running now (one per volume, volume name or snapshot name)."},
			func() float64 { return float64(in.len()) }),
	}
	for _, c := range []prometheus.Collector{m.ops, m.refusals, m, m.inflight} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register controller metrics: %w", err)
		}
	}
	return m, nil
}

// Describe and Collect make the backoff window gauges read the backoff at scrape time.
func (m *controllerMetrics) Describe(ch chan<- *prometheus.Desc) { m.windows.Describe(ch) }

func (m *controllerMetrics) Collect(ch chan<- prometheus.Metric) {
	var nodes, volumes int
	if m.bo != nil {
		nodes, volumes = m.bo.Open()
	}
	m.windows.WithLabelValues(string(backoff.ClassCapacity)).Set(float64(nodes))
	m.windows.WithLabelValues(string(backoff.ClassRetryable)).Set(float64(volumes))
	m.windows.Collect(ch)
}

// observe counts one publish or unpublish; nil m counts nothing.
func (m *controllerMetrics) observe(op string, err error, class string) {
	if m == nil {
		return
	}
	m.ops.WithLabelValues(op, status.Code(err).String(), class).Inc()
}

// refused counts a publish answered from a backoff window of class window.
func (m *controllerMetrics) refused(window backoff.Class) {
	if m == nil {
		return
	}
	m.refusals.WithLabelValues(string(window)).Inc()
}
