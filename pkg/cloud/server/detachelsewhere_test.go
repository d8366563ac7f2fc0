package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

// TestDetachFromAnotherInstance: a detach from an instance the volume is not bound to is the
// idempotent 200 {"state":"detached"} of docs/attach.md, about the attachment to that
// instance: it names that instance, leaves the volume bound where it is, and has no "since"
// when no such attachment ever was. Before, it said "since":"0001-01-01T00:00:00Z".
func TestDetachFromAnotherInstance(t *testing.T) {
	tc := startCloud(t, server.Config{})
	ctx := context.Background()
	bound := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "bound", SizeBytes: 1, Zone: "zone-a"}))
	must[*cloud.Attachment](t)(tc.driver.AttachVolume(ctx, bound.ID, "node-a"))
	free := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "free", SizeBytes: 1, Zone: "zone-a"}))
	tests := []struct {
		name, volume, instance string
		wantSince              bool
		wantAttachedTo         string
	}{
		{"unknown instance, volume bound elsewhere", bound.ID, "nope", false, "node-a"},
		{"other instance, volume bound elsewhere", bound.ID, "node-b", false, "node-a"},
		{"volume bound nowhere", free.ID, "node-a", true, ""},
		{"unknown instance, volume bound nowhere", free.ID, "nope", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tc.snapshot(t)
			r := tc.do(t, http.MethodPost, "/v1/volumes/"+tt.volume+"/detach", driverToken, `{"instanceId":"`+tt.instance+`"}`)
			if r.status != http.StatusOK {
				t.Fatalf("detach: %d %s, want 200", r.status, r.body)
			}
			var body map[string]any
			if err := json.Unmarshal(r.body, &body); err != nil {
				t.Fatal(err)
			}
			if body["state"] != string(cloud.StateDetached) || body["instanceId"] != tt.instance || body["volumeId"] != tt.volume {
				t.Fatalf("answer %s, want the detached attachment of %s to %s", r.body, tt.volume, tt.instance)
			}
			if _, has := body["since"]; has != tt.wantSince {
				t.Fatalf("answer %s: since present %v, want %v", r.body, has, tt.wantSince)
			}
			if v := must[*cloud.Volume](t)(tc.reader.GetVolume(ctx, tt.volume)); v.AttachedTo != tt.wantAttachedTo {
				t.Fatalf("volume attachedTo %q, want %q", v.AttachedTo, tt.wantAttachedTo)
			}
			if after := tc.snapshot(t); after.Revision != before.Revision {
				t.Fatalf("revision %d -> %d: an idempotent detach changed the state", before.Revision, after.Revision)
			}
		})
	}
}
