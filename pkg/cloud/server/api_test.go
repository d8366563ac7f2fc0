package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

func TestBadInputChangesNothing(t *testing.T) {
	tc := startCloud(t, server.Config{MaxBodyBytes: 4096})
	ctx := context.Background()
	vol := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "v", SizeBytes: 10, Zone: "zone-a"}))
	must[*cloud.Attachment](t)(tc.driver.AttachVolume(ctx, vol.ID, "node-a"))
	snap := must[*cloud.Snapshot](t)(tc.driver.CreateSnapshot(ctx, cloud.CreateSnapshotRequest{Name: "s", SourceVolumeID: vol.ID}))
	other := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "other", SizeBytes: 10, Zone: "zone-b"}))
	quotasRev := must[*cloud.Quotas](t)(tc.reader.GetQuotas(ctx)).Revision
	nodeARev := must[*cloud.Instance](t)(tc.reader.GetInstance(ctx, "node-a")).Revision

	tests := []struct {
		name, method, path, body string
		header                   []string
		status                   int
		code                     cloud.Code
	}{
		{"unknown field", "POST", "/v1/volumes", `{"name":"x","sizeBytes":1,"zone":"zone-a","color":"red"}`, nil, 400, cloud.CodeInvalidArgument},
		{"field name in another case", "POST", "/v1/volumes", `{"Name":"x","sizeBytes":1,"zone":"zone-a"}`, nil, 400, cloud.CodeInvalidArgument},
		{"duplicate field", "POST", "/v1/volumes", `{"name":"x","sizeBytes":-1,"sizeBytes":1,"zone":"zone-a"}`, nil, 400, cloud.CodeInvalidArgument},
		{"trailing data", "POST", "/v1/volumes", `{"name":"x","sizeBytes":1,"zone":"zone-a"} {}`, nil, 400, cloud.CodeInvalidArgument},
		{"empty body", "POST", "/v1/volumes", ``, nil, 400, cloud.CodeInvalidArgument},
		{"bad JSON", "POST", "/v1/volumes", `{"name":`, nil, 400, cloud.CodeInvalidArgument},
		{"wrong JSON type", "POST", "/v1/volumes", `{"name":"x","sizeBytes":"big","zone":"zone-a"}`, nil, 400, cloud.CodeInvalidArgument},
		{"trailing data", "POST", "/v1/volumes", `{"name":"x","sizeBytes":1,"zone":"zone-a"} {}`, nil, 400, cloud.CodeInvalidArgument},
		{"empty body", "POST", "/v1/volumes", ``, nil, 400, cloud.CodeInvalidArgument},
		{"oversize body", "POST", "/v1/volumes", `{"name":"` + strings.Repeat("x", 5000) + `","sizeBytes":1,"zone":"zone-a"}`, nil, 413, cloud.CodePayloadTooLarge},
		{"oversize trailing data", "POST", "/v1/volumes", `{"name":"x","sizeBytes":1,"zone":"zone-a"}` + strings.Repeat(" ", 5000) + `x`, nil, 413, cloud.CodePayloadTooLarge},
		{"missing volume name", "POST", "/v1/volumes", `{"sizeBytes":1,"zone":"zone-a"}`, nil, 400, cloud.CodeInvalidArgument},
		{"zero size", "POST", "/v1/volumes", `{"name":"x","sizeBytes":0,"zone":"zone-a"}`, nil, 400, cloud.CodeInvalidArgument},
		{"volume name taken", "POST", "/v1/volumes", `{"name":"v","sizeBytes":11,"zone":"zone-a"}`, nil, 409, cloud.CodeAlreadyExists},
		{"unknown source snapshot", "POST", "/v1/volumes", `{"name":"x","sizeBytes":10,"zone":"zone-a","sourceSnapshotId":"snap-nope"}`, nil, 404, cloud.CodeSnapshotNotFound},
		{"smaller than snapshot", "POST", "/v1/volumes", `{"name":"x","sizeBytes":9,"zone":"zone-a","sourceSnapshotId":"` + snap.ID + `"}`, nil, 400, cloud.CodeInvalidArgument},
		{"negative quota", "PATCH", "/v1/quotas", `{"attachments":-1}`, nil, 400, cloud.CodeInvalidArgument},
		{"negative quota among good ones", "PATCH", "/v1/quotas", `{"volumes":5,"capacityBytes":-5}`, nil, 400, cloud.CodeInvalidArgument},
		{"empty quota patch", "PATCH", "/v1/quotas", `{}`, nil, 400, cloud.CodeInvalidArgument},
		{"stale If-Match quotas", "PATCH", "/v1/quotas", `{"volumes":5}`, []string{"If-Match", `"1"`}, 412, cloud.CodePreconditionFailed},
		{"garbage If-Match", "PATCH", "/v1/quotas", `{"volumes":5}`, []string{"If-Match", `"abc"`}, 400, cloud.CodeInvalidArgument},
		// If-Match compares strongly (RFC 9110 §13.1.1): a weak tag, even of the current
		// revision, never matches; an unquoted revision is no entity tag at all.
		{"weak If-Match of the current revision", "PATCH", "/v1/quotas", `{"volumes":5}`, []string{"If-Match", `W/"` + fmt.Sprint(quotasRev) + `"`}, 412, cloud.CodePreconditionFailed},
		{"weak If-Match on an instance", "PATCH", "/v1/instances/node-a", `{"outOfBandSlots":2}`, []string{"If-Match", `W/"` + fmt.Sprint(nodeARev) + `"`}, 412, cloud.CodePreconditionFailed},
		{"unquoted If-Match of the current revision", "PATCH", "/v1/quotas", `{"volumes":5}`, []string{"If-Match", fmt.Sprint(quotasRev)}, 400, cloud.CodeInvalidArgument},
		{"half-quoted If-Match", "PATCH", "/v1/quotas", `{"volumes":5}`, []string{"If-Match", `"` + fmt.Sprint(quotasRev)}, 400, cloud.CodeInvalidArgument},
		{"weak garbage If-Match", "PATCH", "/v1/quotas", `{"volumes":5}`, []string{"If-Match", `W/"x"`}, 400, cloud.CodeInvalidArgument},
		{"negative slots", "PATCH", "/v1/instances/node-a", `{"outOfBandSlots":-1}`, nil, 400, cloud.CodeInvalidArgument},
		{"negative limit", "PATCH", "/v1/instances/node-a", `{"attachLimit":-3}`, nil, 400, cloud.CodeInvalidArgument},
		{"unknown type patch", "PATCH", "/v1/instances/node-a", `{"instanceType":"huge"}`, nil, 400, cloud.CodeInvalidArgument},
		{"patch missing instance", "PATCH", "/v1/instances/nope", `{"outOfBandSlots":1}`, nil, 404, cloud.CodeInstanceNotFound},
		{"missing instance id", "POST", "/v1/instances", `{"zone":"zone-a","instanceType":"small"}`, nil, 400, cloud.CodeInvalidArgument},
		{"unknown instance type", "POST", "/v1/instances", `{"id":"n","zone":"zone-a","instanceType":"huge"}`, nil, 400, cloud.CodeInvalidArgument},
		{"negative instance slots", "POST", "/v1/instances", `{"id":"n","zone":"zone-a","instanceType":"small","outOfBandSlots":-1}`, nil, 400, cloud.CodeInvalidArgument},
		{"instance id taken", "POST", "/v1/instances", `{"id":"node-a","zone":"zone-b","instanceType":"small","outOfBandSlots":1}`, nil, 409, cloud.CodeAlreadyExists},
		{"bad page token", "GET", "/v1/volumes?pageToken=garbage", ``, nil, 400, cloud.CodeInvalidArgument},
		{"forged page token", "GET", "/v1/volumes?pageToken=djE6c25hcC0wMDAwMDAwMQ", ``, nil, 400, cloud.CodeInvalidArgument},
		{"negative maxResults", "GET", "/v1/volumes?maxResults=-1", ``, nil, 400, cloud.CodeInvalidArgument},
		{"bad snapshot page token", "GET", "/v1/snapshots?pageToken=not-base64!", ``, nil, 400, cloud.CodeInvalidArgument},
		{"fault unknown operation", "POST", "/v1/faults", `{"operation":"Explode","error":"Unavailable"}`, nil, 400, cloud.CodeInvalidArgument},
		{"fault unknown code", "POST", "/v1/faults", `{"operation":"*","error":"Oops"}`, nil, 400, cloud.CodeInvalidArgument},
		{"fault probability above 1", "POST", "/v1/faults", `{"operation":"*","error":"Unavailable","probability":1.5}`, nil, 400, cloud.CodeInvalidArgument},
		{"fault probability 0", "POST", "/v1/faults", `{"operation":"*","error":"Unavailable","probability":0}`, nil, 400, cloud.CodeInvalidArgument},
		{"fault negative count", "POST", "/v1/faults", `{"operation":"*","error":"Unavailable","count":-1}`, nil, 400, cloud.CodeInvalidArgument},
		{"fault does nothing", "POST", "/v1/faults", `{"operation":"*"}`, nil, 400, cloud.CodeInvalidArgument},
		{"fault with id", "POST", "/v1/faults", `{"id":"mine","operation":"*","error":"Unavailable"}`, nil, 400, cloud.CodeInvalidArgument},
		{"delete unknown fault", "DELETE", "/v1/faults/fault-99", ``, nil, 404, cloud.CodeFaultNotFound},
		{"attach without instance", "POST", "/v1/volumes/" + other.ID + "/attach", `{}`, nil, 400, cloud.CodeInvalidArgument},
		{"attach to missing instance", "POST", "/v1/volumes/" + other.ID + "/attach", `{"instanceId":"nope"}`, nil, 404, cloud.CodeInstanceNotFound},
		{"attach missing volume", "POST", "/v1/volumes/vol-nope/attach", `{"instanceId":"node-a"}`, nil, 404, cloud.CodeVolumeNotFound},
		{"attach across zones", "POST", "/v1/volumes/" + other.ID + "/attach", `{"instanceId":"node-a"}`, nil, 400, cloud.CodeZoneMismatch},
		{"attach elsewhere", "POST", "/v1/volumes/" + vol.ID + "/attach", `{"instanceId":"node-b"}`, nil, 409, cloud.CodeVolumeInUse},
		{"delete attached", "DELETE", "/v1/volumes/" + vol.ID, ``, nil, 409, cloud.CodeVolumeInUse},
		{"shrink", "POST", "/v1/volumes/" + vol.ID + "/resize", `{"sizeBytes":5}`, nil, 400, cloud.CodeInvalidArgument},
		{"resize past quota", "POST", "/v1/volumes/" + vol.ID + "/resize", `{"sizeBytes":1099511627777}`, nil, 409, cloud.CodeCapacityQuotaExceeded},
		{"snapshot without source", "POST", "/v1/snapshots", `{"name":"s2"}`, nil, 400, cloud.CodeInvalidArgument},
		{"snapshot name taken", "POST", "/v1/snapshots", `{"name":"s","sourceVolumeId":"` + other.ID + `"}`, nil, 409, cloud.CodeAlreadyExists},
		{"get missing snapshot", "GET", "/v1/snapshots/snap-nope", ``, nil, 404, cloud.CodeSnapshotNotFound},
		{"bad sinceRevision", "GET", "/v1/events?sinceRevision=-1", ``, nil, 400, cloud.CodeInvalidArgument},
		{"unknown route", "GET", "/v2/volumes", ``, nil, 404, cloud.CodeNotFound},
		{"wrong method", "PUT", "/v1/volumes", `{}`, nil, 405, cloud.CodeMethodNotAllowed},
	}
	before := tc.snapshot(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tc.do(t, tt.method, tt.path, adminToken, tt.body, tt.header...)
			e := r.errorBody(t)
			if r.status != tt.status || e.Code != tt.code {
				t.Fatalf("got %d %s (%s), want %d %s", r.status, e.Code, e.Message, tt.status, tt.code)
			}
			if r.status != tt.code.HTTPStatus() {
				t.Errorf("status %d is not the code's status %d", r.status, tt.code.HTTPStatus())
			}
			if e.Message == "" || e.Retryable != tt.code.Retryable() {
				t.Errorf("message %q retryable %v: want a message and retryable=%v", e.Message, e.Retryable, tt.code.Retryable())
			}
			if after := tc.snapshot(t); !reflect.DeepEqual(before, after) {
				t.Errorf("state changed:\nbefore %s\nafter  %s", mustJSON(t, before), mustJSON(t, after))
			}
		})
	}
}

// TestEveryRouteIsDocumented walks the router and checks each route and method is in
// /openapi.json.
func TestEveryRouteIsDocumented(t *testing.T) {
	tc := startCloud(t, server.Config{})
	r := tc.do(t, http.MethodGet, "/openapi.json", "", "")
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi.json: %v (openapi %q)", err, doc.OpenAPI)
	}
	routes := server.Routes(tc.srv)
	if len(routes) < 25 {
		t.Fatalf("only %d routes walked", len(routes))
	}
	documented := 0
	for _, rt := range routes {
		ops, ok := doc.Paths[rt.Path]
		if !ok {
			t.Errorf("route %s %s missing from openapi.json", rt.Method, rt.Path)
			continue
		}
		if _, ok := ops[strings.ToLower(rt.Method)]; !ok {
			t.Errorf("method %s of %s missing from openapi.json", rt.Method, rt.Path)
			continue
		}
		documented++
	}
	total := 0
	for _, ops := range doc.Paths {
		total += len(ops)
	}
	if total != documented {
		t.Errorf("openapi.json documents %d operations, the router serves %d", total, documented)
	}
}

// An If-Match without its quotes is named as sent: quoting it in the message made `4` look
// like the valid `"4"` (a newcomer's finding).
func TestIfMatchMessages(t *testing.T) {
	tc := startCloud(t, server.Config{})
	for _, tt := range []struct{ header, want string }{
		{`4`, `If-Match 4 lacks the quotes of an ETag: send "4" (quotes included), as the ETag header gave it`},
		{`W/4`, `If-Match 4 lacks the quotes of an ETag: send "4" (quotes included), as the ETag header gave it`},
		{`"abc"`, `If-Match "\"abc\"" is not a revision ETag like "12" (quotes included)`},
		{`-4`, `If-Match "-4" is not a revision ETag like "12" (quotes included)`},
	} {
		t.Run(tt.header, func(t *testing.T) {
			r := tc.do(t, "PATCH", "/v1/quotas", adminToken, `{"volumes":5}`, "If-Match", tt.header)
			if e := r.errorBody(t); r.status != 400 || e.Message != tt.want {
				t.Errorf("got %d %q, want 400 %q", r.status, e.Message, tt.want)
			}
		})
	}
}

// A route that does not compare If-Match refuses it and changes nothing: a PUT of an
// instance's health with a stale If-Match used to apply (a newcomer's finding).
func TestIfMatchOnlyWhereHonoured(t *testing.T) {
	tc := startCloud(t, server.Config{})
	before := tc.snapshot(t)
	for _, rt := range []struct{ method, path, body string }{
		{"PUT", "/v1/instances/node-a/health", `{"state":"impaired"}`},
		{"POST", "/v1/faults", `{"operation":"*","error":"Unavailable"}`},
		{"POST", "/v1/reset", ``},
		{"GET", "/v1/quotas", ``},
	} {
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			r := tc.do(t, rt.method, rt.path, adminToken, rt.body, "If-Match", `"999"`)
			if e := r.errorBody(t); r.status != 400 || !strings.Contains(e.Message, "does not take If-Match") {
				t.Errorf("got %d %q, want 400 saying the route does not take If-Match", r.status, e.Message)
			}
		})
	}
	if after := tc.snapshot(t); !reflect.DeepEqual(before, after) {
		t.Errorf("state changed:\nbefore %s\nafter  %s", mustJSON(t, before), mustJSON(t, after))
	}
	// The two routes that honour it still do.
	r := tc.do(t, "PATCH", "/v1/quotas", adminToken, `{"volumes":5}`, "If-Match", `"999"`)
	if e := r.errorBody(t); r.status != 412 {
		t.Errorf("PATCH /v1/quotas with a stale If-Match: %d %q, want 412", r.status, e.Message)
	}
}

// TestQueryParametersAreDocumented: the query parameters each route takes (the route table's
// declaration, which the server enforces) are the ones /openapi.json lists for it.
func TestQueryParametersAreDocumented(t *testing.T) {
	tc := startCloud(t, server.Config{})
	r := tc.do(t, http.MethodGet, "/openapi.json", "", "")
	type param struct {
		Ref  string `json:"$ref"`
		Name string `json:"name"`
		In   string `json:"in"`
	}
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Parameters map[string]param `json:"parameters"`
		} `json:"components"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatal(err)
	}
	declared := 0
	for _, rt := range server.Routes(tc.srv) {
		var op struct {
			Parameters []param `json:"parameters"`
		}
		if raw, ok := doc.Paths[rt.Path][strings.ToLower(rt.Method)]; !ok || json.Unmarshal(raw, &op) != nil {
			continue // TestEveryRouteIsDocumented names it
		}
		var documented []string
		for _, p := range op.Parameters {
			if p.Ref != "" {
				p = doc.Components.Parameters[p.Ref[strings.LastIndexByte(p.Ref, '/')+1:]]
			}
			if p.In == "query" {
				documented = append(documented, p.Name)
			}
		}
		slices.Sort(documented)
		got := slices.Sorted(slices.Values(rt.Query))
		if !slices.Equal(got, documented) {
			t.Errorf("%s %s takes query %v, openapi.json lists %v", rt.Method, rt.Path, got, documented)
		}
		declared += len(got)
	}
	if declared < 10 {
		t.Errorf("only %d query parameters declared in all; the route table's declarations were not found", declared)
	}
}
