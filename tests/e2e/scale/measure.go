package scale

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// maxMetricsBytes bounds one /metrics answer read.
const maxMetricsBytes = 32 << 20

// parseMetrics reads the Prometheus text format.
func parseMetrics(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mf, err := p.TextToMetricFamilies(io.LimitReader(r, maxMetricsBytes))
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return mf, nil
}

// sumCounter sums the counter (or untyped) family name over the series whose labels match
// every pair of match.
func sumCounter(mf map[string]*dto.MetricFamily, name string, match map[string]string) float64 {
	f := mf[name]
	if f == nil {
		return 0
	}
	var sum float64
	for _, m := range f.GetMetric() {
		if !labelsMatch(m, match) {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetUntyped() != nil:
			sum += m.GetUntyped().GetValue()
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		}
	}
	return sum
}

func labelsMatch(m *dto.Metric, match map[string]string) bool {
	for k, v := range match {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == k {
				found = l.GetValue() == v
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// RequestKey names API server requests by verb and resource, "GET csinodes" or
// "PATCH nodes/status".
type RequestKey string

// apiRequests sums apiserver_request_total by verb and resource (with its subresource).
func apiRequests(mf map[string]*dto.MetricFamily) map[RequestKey]float64 {
	out := map[RequestKey]float64{}
	f := mf["apiserver_request_total"]
	if f == nil {
		return out
	}
	for _, m := range f.GetMetric() {
		var verb, res, sub string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "verb":
				verb = l.GetValue()
			case "resource":
				res = l.GetValue()
			case "subresource":
				sub = l.GetValue()
			}
		}
		if res == "" {
			res = "(none)"
		}
		if sub != "" {
			res += "/" + sub
		}
		out[RequestKey(verb+" "+res)] += m.GetCounter().GetValue()
	}
	return out
}

// IsCapacityRequest reports whether requests of key k are the kubelets' capacity
// updates: every period each kubelet reads its CSINode and writes it (PUT) when
// NodeGetInfo's count changed (pkg/volume/csi/nodeinfomanager in v1.37.2). Lists and
// watches of CSINode are the scheduler's and observers'. apiserver_request_total names
// verbs as HTTP does (GET, PUT, PATCH), lists and watches as LIST and WATCH.
func IsCapacityRequest(k RequestKey) bool {
	switch k {
	case "GET csinodes", "PUT csinodes", "PATCH csinodes", "APPLY csinodes":
		return true
	}
	return false
}

// apiServerMetrics reads the API server's /metrics through cs (the admin's client).
func apiServerMetrics(ctx context.Context, cs kubernetes.Interface) (map[string]*dto.MetricFamily, error) {
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("API server /metrics: %w", err)
	}
	return parseMetrics(strings.NewReader(string(body)))
}

// httpMetrics reads base + "/metrics", with token as a bearer token when it is not empty
// (the fake cloud's /metrics needs a reader token; the driver's needs none).
func httpMetrics(ctx context.Context, hc *http.Client, base, token string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s/metrics: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", base, resp.Status)
	}
	return parseMetrics(resp.Body)
}

// ProcStat is one process's CPU time and resident memory.
type ProcStat struct {
	// CPU is user + system time since the process started.
	CPU time.Duration
	// RSS is the resident set size in bytes.
	RSS int64
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every Linux ABI Go
// supports.
const clockTicks = 100

// parseProcStat reads utime and stime (fields 14 and 15) of /proc/<pid>/stat; the command
// name (field 2) may hold spaces and parentheses, so fields count from its last ')'.
func parseProcStat(data string) (time.Duration, error) {
	i := strings.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("proc stat: no command name in %q", trim(data))
	}
	f := strings.Fields(data[i+1:])
	// f[0] is field 3 (state): utime is field 14, f[11].
	if len(f) < 13 {
		return 0, fmt.Errorf("proc stat: %d fields after the name, want ≥ 13", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proc stat: %w", err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// parseRSS reads VmRSS (kB) of /proc/<pid>/status, in bytes.
func parseRSS(data string) (int64, error) {
	for _, line := range strings.Split(data, "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("proc status: VmRSS %q", rest)
			}
			v, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("proc status: %w", err)
			}
			return v << 10, nil
		}
	}
	return 0, fmt.Errorf("proc status: no VmRSS")
}

func trim(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// procStats reads the stats of component name through its pid file in pidDir (the local
// cluster's <run>/pids/<name>.pid).
func procStats(pidDir, name string) (ProcStat, error) {
	data, err := os.ReadFile(filepath.Join(pidDir, name+".pid"))
	if err != nil {
		return ProcStat{}, fmt.Errorf("pid of %s: %w", name, err)
	}
	pid := strings.TrimSpace(string(data))
	if _, err := strconv.Atoi(pid); err != nil {
		return ProcStat{}, fmt.Errorf("pid file of %s: %q", name, pid)
	}
	stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return ProcStat{}, fmt.Errorf("stat of %s: %w", name, err)
	}
	cpu, err := parseProcStat(string(stat))
	if err != nil {
		return ProcStat{}, fmt.Errorf("%s: %w", name, err)
	}
	status, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		return ProcStat{}, fmt.Errorf("status of %s: %w", name, err)
	}
	rss, err := parseRSS(string(status))
	if err != nil {
		return ProcStat{}, fmt.Errorf("%s: %w", name, err)
	}
	return ProcStat{CPU: cpu, RSS: rss}, nil
}

// loadAvg is /proc/loadavg's 1-minute average.
func loadAvg() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}
