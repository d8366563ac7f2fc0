package csi

import (
	"context"
	"sync"
	"time"

	"github.com/kubernetes-csi/csi-lib-utils/protosanitizer"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// Log verbosity ladder of the gRPC interceptor.
const (
	// logLevelMethod logs every call's method.
	logLevelMethod = 4
	// logLevelPayload logs requests and responses, secrets stripped.
	logLevelPayload = 5
)

// logInterceptor logs every call: the method at -v=4, the request and response with secrets
// stripped (protosanitizer) at -v=5, and every error. It puts a logger with the method into
// the context for the handlers (klog.FromContext).
func logInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "method", info.FullMethod)
	ctx = klog.NewContext(ctx, logger)
	logger.V(logLevelMethod).Info("GRPC call")
	// Checked first: the arguments would be built (and allocated) on every call otherwise,
	// also when -v is below 5; NodeGetInfo is called every kubelet period on every node.
	payload := logger.V(logLevelPayload)
	if payload.Enabled() {
		payload.Info("GRPC request", "request", protosanitizer.StripSecrets(req))
	}
	resp, err := handler(ctx, req)
	if err != nil {
		logger.Error(err, "GRPC error", "code", status.Code(err).String())
		return resp, err
	}
	if payload.Enabled() {
		payload.Info("GRPC response", "response", protosanitizer.StripSecrets(resp))
	}
	return resp, err
}

// rpcMetrics counts gRPC calls and their latency by method and gRPC code.
type rpcMetrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// ok holds each method's series for code OK (*okSeries by full method name), the answer
	// of almost every call: WithLabelValues hashed both labels on every call, the largest
	// part of the interceptors' cost on NodeGetInfo. The series are the vectors' own (the
	// same a WithLabelValues call returns), created at a method's first OK answer as before.
	ok sync.Map
}

// okSeries is one method's series for code OK.
type okSeries struct {
	calls    prometheus.Counter
	duration prometheus.Observer
}

// newRPCMetrics creates the per-RPC metrics and registers them on reg:
// fakecloud_csi_grpc_requests_total{method,code} and
// fakecloud_csi_grpc_request_duration_seconds{method,code}.
func newRPCMetrics(reg prometheus.Registerer) (*rpcMetrics, error) {
	m := &rpcMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "fakecloud_csi", Subsystem: "grpc", Name: "requests_total",
			Help: "CSI gRPC calls served, by full method name and gRPC status code.",
		}, []string{"method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "fakecloud_csi", Subsystem: "grpc", Name: "request_duration_seconds",
			Help:    "Latency of CSI gRPC calls in seconds, by full method name and gRPC status code.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9),
		}, []string{"method", "code"}),
	}
	for _, c := range []prometheus.Collector{m.calls, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// interceptor records one observation per call.
func (m *rpcMetrics) interceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	if err == nil {
		s := m.okSeries(info.FullMethod)
		s.calls.Inc()
		s.duration.Observe(time.Since(start).Seconds())
		return resp, nil
	}
	code := status.Code(err).String()
	m.calls.WithLabelValues(info.FullMethod, code).Inc()
	m.duration.WithLabelValues(info.FullMethod, code).Observe(time.Since(start).Seconds())
	return resp, err
}

// okSeries returns method's series for code OK, creating them at its first call. The methods
// are the server's registered ones (gRPC answers UNIMPLEMENTED to others before any
// interceptor), so the map is bounded.
func (m *rpcMetrics) okSeries(method string) *okSeries {
	if s, ok := m.ok.Load(method); ok {
		return s.(*okSeries)
	}
	code := codes.OK.String()
	s, _ := m.ok.LoadOrStore(method, &okSeries{
		calls:    m.calls.WithLabelValues(method, code),
		duration: m.duration.WithLabelValues(method, code),
	})
	return s.(*okSeries)
}
