package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

// TestNotFoundQuotesABoundedPrefix: a "not found" answer about a 128-byte ID (the longest
// one accepted) quotes at most cloud.MaxQuotedBytes of it, as docs/limits.md's table says
// of every error message. Before, VolumeNotFound and InstanceNotFound quoted all 128 bytes.
func TestNotFoundQuotesABoundedPrefix(t *testing.T) {
	tc := startCloud(t, server.Config{})
	id := strings.Repeat("v", cloud.MaxIDBytes)
	vol := mustJSON(t, map[string]any{"name": "nf", "sizeBytes": 1 << 30, "zone": "zone-a"})
	r := tc.do(t, http.MethodPost, "/v1/volumes", driverToken, vol)
	if r.status != http.StatusCreated {
		t.Fatalf("create volume: %d %s", r.status, r.body)
	}
	var v cloud.Volume
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("create volume: %v", err)
	}
	tests := []struct {
		name, method, path, body string
		code                     cloud.Code
	}{
		{"volume", http.MethodGet, "/v1/volumes/" + id, "", cloud.CodeVolumeNotFound},
		{"volume delete", http.MethodDelete, "/v1/volumes/" + id, "", cloud.CodeVolumeNotFound},
		{"volume attach", http.MethodPost, "/v1/volumes/" + id + "/attach", `{"instanceId":"node-a"}`, cloud.CodeVolumeNotFound},
		{"instance", http.MethodGet, "/v1/instances/" + id, "", cloud.CodeInstanceNotFound},
		{"instance of an attach", http.MethodPost, "/v1/volumes/" + v.ID + "/attach", `{"instanceId":"` + id + `"}`, cloud.CodeInstanceNotFound},
		{"snapshot", http.MethodGet, "/v1/snapshots/" + id, "", cloud.CodeSnapshotNotFound},
		{"snapshot source", http.MethodPost, "/v1/snapshots", `{"name":"s","sourceVolumeId":"` + id + `"}`, cloud.CodeVolumeNotFound},
		{"group snapshot", http.MethodGet, "/v1/group-snapshots/" + id, "", cloud.CodeGroupSnapshotNotFound},
		{"fault rule", http.MethodGet, "/v1/faults/" + id, "", cloud.CodeFaultNotFound},
		{"fault rule delete", http.MethodDelete, "/v1/faults/" + id, "", cloud.CodeFaultNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tc.do(t, tt.method, tt.path, adminToken, tt.body)
			e := r.errorBody(t)
			if e.Code != tt.code {
				t.Fatalf("%d %s %s, want %s", r.status, e.Code, e.Message, tt.code)
			}
			if strings.Contains(e.Message, id[:cloud.MaxQuotedBytes+1]) {
				t.Fatalf("message quotes more than %d bytes of the ID: %s", cloud.MaxQuotedBytes, e.Message)
			}
		})
	}
}
