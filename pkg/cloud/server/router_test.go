package server_test

import (
	"net/http"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

// TestMethodNotAllowedHasAllow checks that a 405 names the methods the path does serve
// (RFC 9110 §15.5.6), taken from the router, and that other answers carry no Allow.
func TestMethodNotAllowedHasAllow(t *testing.T) {
	tc := startCloud(t, server.Config{})
	tests := []struct {
		method, path string
		status       int
		allow        string
	}{
		{http.MethodPut, "/v1/volumes", http.StatusMethodNotAllowed, "GET, POST"},
		{http.MethodPost, "/v1/volumes/vol-1", http.StatusMethodNotAllowed, "DELETE, GET"},
		{http.MethodGet, "/v1/volumes/vol-1/attach", http.StatusMethodNotAllowed, "POST"},
		{http.MethodPut, "/v1/instances/node-a", http.StatusMethodNotAllowed, "GET, PATCH"},
		{http.MethodDelete, "/v1/quotas", http.StatusMethodNotAllowed, "GET, PATCH"},
		{http.MethodDelete, "/healthz", http.StatusMethodNotAllowed, "GET"},
		{http.MethodPost, "/metrics", http.StatusMethodNotAllowed, "GET"},
		{http.MethodGet, "/v2/volumes", http.StatusNotFound, ""},
		{http.MethodGet, "/v1/quotas", http.StatusOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			r := tc.do(t, tt.method, tt.path, adminToken, "")
			if r.status != tt.status {
				t.Fatalf("status %d, want %d (body %s)", r.status, tt.status, r.body)
			}
			if got := r.header.Get("Allow"); got != tt.allow {
				t.Errorf("Allow = %q, want %q", got, tt.allow)
			}
			if tt.status == http.StatusMethodNotAllowed {
				if e := r.errorBody(t); e.Code != cloud.CodeMethodNotAllowed {
					t.Errorf("code %s, want %s", e.Code, cloud.CodeMethodNotAllowed)
				}
			}
		})
	}
}
