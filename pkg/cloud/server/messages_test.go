package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

// TestErrorMessagesInTheAPIsWords: an error body speaks of the API's fields and states, never
// of Go's types, and is not HTML-escaped (issue 26, "the first hour"). Before: `json: cannot
// unmarshal string into Go struct field InstancePatch.outOfBandSlots of type int`,
// `attachLimit must be \u003e= 1`, an unknown field with no suggestion, and "attached on" for
// the state DELETE called "attached to".
func TestErrorMessagesInTheAPIsWords(t *testing.T) {
	tc := startCloud(t, server.Config{})
	ctx := context.Background()
	vol := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "v", SizeBytes: 10, Zone: "zone-a"}))
	must[*cloud.Attachment](t)(tc.driver.AttachVolume(ctx, vol.ID, "node-a"))
	attachedTo := `volume "` + vol.ID + `" is attached to "node-a"`
	tests := []struct {
		name, method, path, token, body string
		status                          int
		want                            string // the message, whole
	}{
		{"wrong JSON type", "PATCH", "/v1/instances/node-a", adminToken, `{"outOfBandSlots":"3"}`, 400,
			`invalid JSON body: field "outOfBandSlots": want a whole number, got a string`},
		{"fraction for a whole number", "POST", "/v1/volumes", driverToken, `{"name":"x","sizeBytes":4.5,"zone":"zone-a"}`, 400,
			`invalid JSON body: field "sizeBytes": want a whole number, got 4.5`},
		{"object for a number", "PATCH", "/v1/quotas", adminToken, `{"volumes":{}}`, 400,
			`invalid JSON body: field "volumes": want a whole number, got an object`},
		{"array for the body", "PATCH", "/v1/quotas", adminToken, `[1]`, 400,
			`invalid JSON body: the body: want an object, got an array`},
		{"unknown field near a known one", "PATCH", "/v1/instances/node-a", adminToken, `{"atachLimit":3}`, 400,
			`invalid JSON body: unknown field "atachLimit"; did you mean "attachLimit"?`},
		{"unknown field in another case", "POST", "/v1/volumes", driverToken, `{"Name":"x","sizeBytes":1,"zone":"zone-a"}`, 400,
			`invalid JSON body: unknown field "Name"; did you mean "name"?`},
		{"unknown field near none", "PATCH", "/v1/instances/node-a", adminToken, `{"color":"red"}`, 400,
			`invalid JSON body: unknown field "color"`},
		{"duplicate field", "PATCH", "/v1/instances/node-a", adminToken, `{"attachLimit":3,"attachLimit":4}`, 400,
			`invalid JSON body: duplicate field "attachLimit"`},
		{"a check with >=", "PATCH", "/v1/instances/node-a", adminToken, `{"attachLimit":0}`, 400,
			`attachLimit must be >= 1, got 0 (to leave no slot for volumes, set outOfBandSlots to the limit)`},
		{"attach elsewhere", "POST", "/v1/volumes/" + vol.ID + "/attach", driverToken, `{"instanceId":"node-b"}`, 409, attachedTo},
		{"delete attached", "DELETE", "/v1/volumes/" + vol.ID, driverToken, ``, 409, attachedTo},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tc.do(t, tt.method, tt.path, tt.token, tt.body)
			if r.status != tt.status {
				t.Fatalf("%d %s, want %d", r.status, r.body, tt.status)
			}
			if got := r.header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options %q, want nosniff: the body is not HTML-escaped", got)
			}
			for _, bad := range []string{`\u00`, "Go struct", "Go value", "of type "} {
				if strings.Contains(string(r.body), bad) {
					t.Errorf("body %s holds %q", r.body, bad)
				}
			}
			if e := r.errorBody(t); !strings.Contains(e.Message, tt.want) {
				t.Errorf("message %q\nwant it to hold %q", e.Message, tt.want)
			}
		})
	}
}
