package csi

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
)

// HTTPHandler serves the driver's HTTP endpoints:
//
//	GET /healthz          200 "ok" while the process serves (liveness)
//	GET /readyz           200 "ok" when Probe would say ready, else 503
//	GET /metrics          the Prometheus registry given in Deps
//	GET /debug/capacity   JSON of the capacity reporter's DebugState (404 without a node service),
//	                      with the capacity decision at start (Deps.CapacityDecision) under
//	                      "decision" when there is one
//	GET /debug/cluster    JSON of the newest cluster check, clustercheck.DebugInfo (404 when the
//	                      plugin does not check: no API access, dynamic capacity off, or
//	                      no answer within --cluster-check-timeout at start)
func (d *Driver) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !d.ready.Ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(d.deps.Registry, promhttp.HandlerOpts{Registry: d.deps.Registry}))
	mux.HandleFunc("GET /debug/capacity", func(w http.ResponseWriter, r *http.Request) {
		if d.node == nil || d.deps.Capacity == nil {
			http.Error(w, "no capacity reporter in mode "+d.opts.Mode, http.StatusNotFound)
			return
		}
		if d.deps.CapacityDecision == nil {
			writeDebugJSON(w, r, d.deps.Capacity)
			return
		}
		writeDebugJSON(w, r, withDecision{state: d.deps.Capacity, decision: d.deps.CapacityDecision})
	})
	mux.HandleFunc("GET /debug/cluster", func(w http.ResponseWriter, r *http.Request) {
		if d.deps.ClusterCheck == nil {
			http.Error(w, "no cluster check on this plugin: no Kubernetes API access, dynamic capacity is off, or the check got no answer at start (see the log)", http.StatusNotFound)
			return
		}
		writeDebugJSON(w, r, d.deps.ClusterCheck)
	})
	return mux
}

// withDecision is a capacity reporter's DebugState with the capacity decision added under
// "decision": the reporter's JSON object stays as it was (the console and tools read it).
type withDecision struct {
	state    DebugStater
	decision any
}

// DebugState returns the reporter's state as a JSON object with "decision" set; the state
// alone when it is not a JSON object.
func (w withDecision) DebugState() any {
	s := w.state.DebugState()
	b, err := json.Marshal(s)
	if err != nil {
		return s
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return s
	}
	dec, err := json.Marshal(w.decision)
	if err != nil {
		return s
	}
	m["decision"] = dec
	return m
}

// writeDebugJSON answers with s's DebugState as indented JSON.
func writeDebugJSON(w http.ResponseWriter, r *http.Request, s DebugStater) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s.DebugState()); err != nil {
		klog.FromContext(r.Context()).Error(err, "Cannot encode debug state")
	}
}
