package server

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/faults"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
)

// metrics are the server's Prometheus metrics, in a registry of its own (no global state).
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// newMetrics builds the server's metrics; waits is the server's token channel of open waits
// (Server.waits), read at scrape time.
func newMetrics(st *store.Store, fe *faults.Engine, waits chan struct{}) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fakecloud_requests_total",
			Help: "HTTP requests by route, HTTP status and cloud error code (\"\" on success).",
		}, []string{"route", "status", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fakecloud_request_duration_seconds",
			Help:    "HTTP request latency by route, in seconds, including injected fault latency.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"route"}),
	}
	// The open waits, read at scrape time: how close the cloud is to answering waits 429
	// busy (drivers then poll instead), and what a test waits on before it asks for one more.
	openWaits := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fakecloud_waits_open",
		Help: "Waits of GET /v1/volumes/{id}?waitFor= open now; at fakecloud_waits_limit one more is answered 429 with X-Wait: busy.",
	}, func() float64 { return float64(len(waits)) })
	waitsLimit := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fakecloud_waits_limit",
		Help: "The most waits of GET /v1/volumes/{id}?waitFor= open at once (--max-waits).",
	}, func() float64 { return float64(cap(waits)) })
	m.registry.MustRegister(m.requests, m.latency, openWaits, waitsLimit, newStateCollector(st), newFaultsCollector(fe), newHealthCollector(st, fe),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) observe(route string, status int, code cloud.Code, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status), string(code)).Inc()
	m.latency.WithLabelValues(route).Observe(d.Seconds())
}

// stateCollector reads attachments per instance and quota use from the store at scrape time,
// so the gauges can never drift from the truth.
type stateCollector struct {
	store                                                                          *store.Store
	descAttachments, descAttachLimit, descOutOfBand, descQuotaUsed, descQuotaLimit *prometheus.Desc
	descRevision, descPending                                                      *prometheus.Desc
}

func newStateCollector(st *store.Store) *stateCollector {
	return &stateCollector{
		store: st,
		descAttachments: prometheus.NewDesc("fakecloud_instance_attachments",
			"Slots of an instance held by volumes through the API (attaching, attached, detaching, failed detach).", []string{"instance_id"}, nil),
		descAttachLimit: prometheus.NewDesc("fakecloud_instance_attach_limit",
			"Effective attach limit of an instance, in slots.", []string{"instance_id"}, nil),
		descOutOfBand: prometheus.NewDesc("fakecloud_instance_out_of_band_slots",
			"Slots of an instance held by things other than API volumes.", []string{"instance_id"}, nil),
		descQuotaUsed: prometheus.NewDesc("fakecloud_quota_used",
			"Account quota use (attachments and volumes are counts, capacityBytes bytes).", []string{"quota"}, nil),
		descQuotaLimit: prometheus.NewDesc("fakecloud_quota_limit",
			"Account quota limit (attachments and volumes are counts, capacityBytes bytes).", []string{"quota"}, nil),
		descRevision: prometheus.NewDesc("fakecloud_revision", "Current global revision.", nil, nil),
		descPending: prometheus.NewDesc("fakecloud_transitions_pending",
			"Attaches and detaches under way (attaching or detaching, held by a fault rule or not).", nil, nil),
	}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.descAttachments, c.descAttachLimit, c.descOutOfBand, c.descQuotaUsed, c.descQuotaLimit, c.descRevision, c.descPending} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	instances, err := c.store.ListInstances()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.descAttachments, err)
		return
	}
	for _, in := range instances {
		ch <- prometheus.MustNewConstMetric(c.descAttachments, prometheus.GaugeValue, float64(len(in.Attachments)), in.ID)
		ch <- prometheus.MustNewConstMetric(c.descAttachLimit, prometheus.GaugeValue, float64(in.AttachLimit), in.ID)
		ch <- prometheus.MustNewConstMetric(c.descOutOfBand, prometheus.GaugeValue, float64(in.OutOfBandSlots), in.ID)
	}
	q, err := c.store.Quotas()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.descQuotaUsed, err)
		return
	}
	for name, v := range map[string]cloud.Quota{"attachments": q.Attachments, "volumes": q.Volumes, "capacityBytes": q.CapacityBytes} {
		ch <- prometheus.MustNewConstMetric(c.descQuotaUsed, prometheus.GaugeValue, float64(v.Used), name)
		ch <- prometheus.MustNewConstMetric(c.descQuotaLimit, prometheus.GaugeValue, float64(v.Limit), name)
	}
	if rev, err := c.store.Revision(); err == nil {
		ch <- prometheus.MustNewConstMetric(c.descRevision, prometheus.GaugeValue, float64(rev))
	}
	if pending, err := c.store.Pending(); err == nil {
		ch <- prometheus.MustNewConstMetric(c.descPending, prometheus.GaugeValue, float64(len(pending)))
	}
}

// faultsCollector reads the fault engine's firing counts at scrape time: a rule's series
// exist exactly as long as the rule, so a rule that is deleted, cleared, reset or expired
// (its TTL passed, whether or not anyone listed the rules since) leaves none behind.
type faultsCollector struct {
	engine *faults.Engine
	desc   *prometheus.Desc
}

func newFaultsCollector(fe *faults.Engine) *faultsCollector {
	return &faultsCollector{engine: fe, desc: prometheus.NewDesc("fakecloud_faults_fired_total",
		"Fault rules that fired, by rule ID and operation.", []string{"rule", "operation"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *faultsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector: one counter per live rule and operation it fired for.
func (c *faultsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, f := range c.engine.FiredCounts() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(f.Count), f.RuleID, string(f.Operation))
	}
}

// healthCollector reads the fault engine's health at scrape time (what was set and the live
// health rules), so a health rule's effect goes from /metrics when its TTL passes.
type healthCollector struct {
	store                    *store.Store
	engine                   *faults.Engine
	descInstance, descVolume *prometheus.Desc
}

func newHealthCollector(st *store.Store, fe *faults.Engine) *healthCollector {
	return &healthCollector{store: st, engine: fe,
		descInstance: prometheus.NewDesc("fakecloud_instance_health",
			"Health of an instance, by its rank: 0 ok, 1 impaired, 2 stopped.", []string{"instance_id"}, nil),
		descVolume: prometheus.NewDesc("fakecloud_volumes_unhealthy",
			"Volumes whose health is not ok, by health (degraded, failed).", []string{"health"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *healthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.descInstance
	ch <- c.descVolume
}

// Collect implements prometheus.Collector: every instance's health rank, and the volume
// counts, 0 included, so that an alert can read them.
func (c *healthCollector) Collect(ch chan<- prometheus.Metric) {
	h := c.engine.Health()
	instances, err := c.store.ListInstances()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.descInstance, err)
		return
	}
	for _, inst := range instances {
		ih, _ := h.Instance(inst.ID)
		ch <- prometheus.MustNewConstMetric(c.descInstance, prometheus.GaugeValue, float64(ih.Rank()), inst.ID)
	}
	counts := map[cloud.VolumeHealth]int{}
	for _, s := range h.Volumes {
		counts[cloud.VolumeHealth(s.Health)]++
	}
	for _, vh := range cloud.VolumeHealths()[1:] {
		ch <- prometheus.MustNewConstMetric(c.descVolume, prometheus.GaugeValue, float64(counts[vh]), string(vh))
	}
}
