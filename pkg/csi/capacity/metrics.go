package capacity

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the reporter's Prometheus series, all prefixed fakecloud_csi_capacity_.
type metrics struct {
	reported      prometheus.Gauge
	raw           prometheus.Gauge
	mode          *prometheus.GaugeVec
	goodAge       prometheus.GaugeFunc
	lookups       prometheus.Counter
	lookupErrors  *prometheus.CounterVec
	changes       prometheus.Counter
	persistErrors prometheus.Counter
}

func newMetrics(age func() float64) *metrics {
	const ns, sub = "fakecloud_csi", "capacity"
	return &metrics{
		reported: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "reported",
			Help: "Value last reported as NodeGetInfo.max_volumes_per_node, in attach slots."}),
		raw: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "raw",
			Help: "Raw capacity min(slots, attached + quota share) of the last good reading, in slots; may be <= 0."}),
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
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.reported, m.raw, m.mode, m.goodAge, m.lookups, m.lookupErrors, m.changes, m.persistErrors}
}

// register registers every series on reg, or none of them.
func (m *metrics) register(reg prometheus.Registerer) error {
	var done []prometheus.Collector
	for _, c := range m.collectors() {
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
