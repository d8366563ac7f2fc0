package csi

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestRPCMetricsInterceptor asserts the series each call lands in, by method and code: the
// OK answers (kept per method, not looked up per call) as the errors, and no other series.
func TestRPCMetricsInterceptor(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newRPCMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	const info, publish = "/csi.v1.Node/NodeGetInfo", "/csi.v1.Controller/ControllerPublishVolume"
	call := func(method string, err error) {
		t.Helper()
		h := func(context.Context, any) (any, error) { return "resp", err }
		resp, got := m.interceptor(context.Background(), "req", &grpc.UnaryServerInfo{FullMethod: method}, h)
		if got != err || (err == nil && resp != "resp") { //nolint:errorlint // identity: the handler's very error
			t.Fatalf("interceptor(%s) = %v, %v; want the handler's answer", method, resp, got)
		}
	}
	for range 3 {
		call(info, nil)
	}
	call(publish, nil)
	call(publish, status.Error(codes.Unavailable, "down"))
	call(publish, status.Error(codes.Unavailable, "down"))
	want := map[[2]string]float64{
		{info, "OK"}: 3, {publish, "OK"}: 1, {publish, "Unavailable"}: 2,
	}
	for k, n := range want {
		if got := testutil.ToFloat64(m.calls.WithLabelValues(k[0], k[1])); got != n {
			t.Errorf("requests_total{method=%s,code=%s} = %v, want %v", k[0], k[1], got, n)
		}
	}
	// One series per (method, code) in each vector, and the histograms count the same calls.
	if n := testutil.CollectAndCount(m.calls); n != len(want) {
		t.Errorf("requests_total has %d series, want %d", n, len(want))
	}
	if n := testutil.CollectAndCount(m.duration); n != len(want) {
		t.Errorf("request_duration_seconds has %d series, want %d", n, len(want))
	}
	hist := func(method, code string) uint64 {
		mf, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range mf {
			if f.GetName() != "fakecloud_csi_grpc_request_duration_seconds" {
				continue
			}
			for _, s := range f.GetMetric() {
				l := map[string]string{}
				for _, p := range s.GetLabel() {
					l[p.GetName()] = p.GetValue()
				}
				if l["method"] == method && l["code"] == code {
					return s.GetHistogram().GetSampleCount()
				}
			}
		}
		return 0
	}
	for k, n := range want {
		if got := hist(k[0], k[1]); got != uint64(n) {
			t.Errorf("request_duration_seconds_count{method=%s,code=%s} = %d, want %v", k[0], k[1], got, n)
		}
	}
}

// BenchmarkInterceptors is the driver's own per-call cost around a handler that does
// nothing: the log interceptor (at the default verbosity) and the metrics interceptor.
func BenchmarkInterceptors(b *testing.B) {
	m, err := newRPCMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	info := &grpc.UnaryServerInfo{FullMethod: "/csi.v1.Node/NodeGetInfo"}
	h := func(context.Context, any) (any, error) { return "resp", nil }
	ctx := context.Background()
	b.Run("log", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = logInterceptor(ctx, "req", info, h)
		}
	})
	b.Run("metrics", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = m.interceptor(ctx, "req", info, h)
		}
	})
}
