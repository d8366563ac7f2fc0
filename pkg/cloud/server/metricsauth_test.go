package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

// TestMetricsNeedsAReaderUnlessOpened: GET /metrics names every instance and grows with the
// fleet, so it needs a token of the reader role at least, as every read does (issue 24,
// item 9: it was open to anyone); --metrics-open (Config.MetricsOpen) opens it, and
// --auth=none serves it to everyone as every route.
func TestMetricsNeedsAReaderUnlessOpened(t *testing.T) {
	tc := startCloud(t, server.Config{})
	r := tc.do(t, http.MethodGet, "/metrics", "", "")
	if r.status != http.StatusUnauthorized {
		t.Fatalf("GET /metrics without a token: %d, want 401", r.status)
	}
	if e := r.errorBody(t); e.Code != cloud.CodeUnauthenticated {
		t.Fatalf("GET /metrics without a token: %+v, want Unauthenticated", e)
	}
	if r := tc.do(t, http.MethodGet, "/metrics", "unknown-token", ""); r.status != http.StatusUnauthorized {
		t.Fatalf("GET /metrics with an unknown token: %d, want 401", r.status)
	}
	for _, token := range []string{readerToken, driverToken, adminToken} {
		r := tc.do(t, http.MethodGet, "/metrics", token, "")
		if r.status != http.StatusOK || !strings.Contains(string(r.body), "fakecloud_revision") {
			t.Fatalf("GET /metrics as %s: %d %.200s", token, r.status, r.body)
		}
		if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
			t.Errorf("GET /metrics as %s: Content-Type %q, want the Prometheus text format", token, ct)
		}
	}
	for _, cfg := range []server.Config{{MetricsOpen: true}, {Auth: server.AuthNone}} {
		open := startCloud(t, cfg)
		if r := open.do(t, http.MethodGet, "/metrics", "", ""); r.status != http.StatusOK || !strings.Contains(string(r.body), "fakecloud_revision") {
			t.Fatalf("GET /metrics without a token, MetricsOpen %v auth %q: %d %.200s", cfg.MetricsOpen, cfg.Auth, r.status, r.body)
		}
	}
}
