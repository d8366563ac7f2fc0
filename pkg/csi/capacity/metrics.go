package capacity

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// metrics are the node plugin's capacity series, all prefixed fakecloud_csi_capacity_
// (docs/metrics.md). Labels are bounded: mode and class take the values of Mode and
// ErrorClass, node_id is the one node this process serves.
type metrics struct {
	info          *prometheus.GaugeVec
	dynamic       prometheus.Gauge
	reported      prometheus.Gauge
	raw           prometheus.Gauge
	mode          *prometheus.GaugeVec
	goodAge       prometheus.GaugeFunc
	lookups       prometheus.Counter
	lookupErrors  *prometheus.CounterVec
	changes       prometheus.Counter
	persistErrors prometheus.Counter
	// The cloud truth of the last accepted reading (GET /v1/instances/{id}/capacity).
	cloudLimit     prometheus.Gauge
	cloudOutOfBand prometheus.Gauge
	cloudAttached  prometheus.Gauge
	cloudHeadroom  prometheus.Gauge
}

func newMetrics(age func() float64) *metrics {
	const ns, sub = "fakecloud_csi", "capacity"
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help})
	}
	return &metrics{
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "node_info",
			Help: "Always 1; node_id is the cloud instance ID this node plugin reports for (join key with fakecloud_instance_* series)."}, []string{"node_id"}),
		dynamic:  gauge("dynamic", "1 when the capacity policy drives the reported value (--dynamic-capacity), 0 when a static count read once at start is reported."),
		reported: gauge("reported", "Value last reported as NodeGetInfo.max_volumes_per_node, in attach slots."),
		raw:      gauge("raw", "Raw capacity min(slots, attached + quota share) of the last good reading, in slots; may be <= 0."),
		mode: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "mode",
			Help: "1 for the current policy mode (fresh, last-known-good, floor, ramping), 0 for the others."}, []string{"mode"}),
		goodAge: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "last_good_age_seconds",
			Help: "Age of the last good cloud reading in seconds; -1 when there is none."}, age),
		lookups: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "lookups_total",
			Help: "Cloud capacity lookups made (after caching and collapsing)."}),
		lookupErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "lookup_errors_total",
			Help: "Failed or rejected capacity lookups by error class."}, []string{"class"}),
		changes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "value_changes_total",
			Help: "Reports whose value differed from the previous report (each can become a CSINode write)."}),
		persistErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "persist_errors_total",
			Help: "Failed writes of the persisted capacity state."}),
		cloudLimit:     gauge("cloud_attach_limit", "Instance attach limit of the last accepted cloud reading, in slots."),
		cloudOutOfBand: gauge("cloud_out_of_band_slots", "Slots held by things other than API volumes in the last accepted cloud reading."),
		cloudAttached:  gauge("cloud_attached", "Volumes attached to the instance through the API in the last accepted cloud reading."),
		cloudHeadroom:  gauge("cloud_quota_headroom", "Account attachment-quota headroom of the last accepted cloud reading, in attachments."),
	}
}

// collectors are the series of the dynamic policy (Reporter).
func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.info, m.dynamic, m.reported, m.raw, m.mode, m.goodAge, m.lookups, m.lookupErrors, m.changes, m.persistErrors,
		m.cloudLimit, m.cloudOutOfBand, m.cloudAttached, m.cloudHeadroom}
}

// staticCollectors are the series of the static count (Static): no mode, age, raw value or
// persisted state, which would only say "stale" about a value that never changes on purpose.
func (m *metrics) staticCollectors() []prometheus.Collector {
	return []prometheus.Collector{m.info, m.dynamic, m.reported, m.lookups, m.lookupErrors,
		m.cloudLimit, m.cloudOutOfBand, m.cloudAttached, m.cloudHeadroom}
}

// register registers cs on reg, or none of them.
func register(reg prometheus.Registerer, cs []prometheus.Collector) error {
	var done []prometheus.Collector
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, d := range done {
				reg.Unregister(d)
			}
			return fmt.Errorf("register capacity metrics: %w", err)
		}
		done = append(done, c)
	}
	return nil
}

func (m *metrics) setMode(mode Mode) {
	for _, md := range AllModes() {
		v := 0.0
		if md == mode {
			v = 1
		}
		m.mode.WithLabelValues(string(md)).Set(v)
	}
}

// setCloud publishes the inputs of an accepted cloud reading.
func (m *metrics) setCloud(c cloud.Capacity) {
	m.cloudLimit.Set(float64(c.AttachLimit))
	m.cloudOutOfBand.Set(float64(c.OutOfBandSlots))
	m.cloudAttached.Set(float64(c.Attached))
	m.cloudHeadroom.Set(float64(c.QuotaHeadroom))
}
