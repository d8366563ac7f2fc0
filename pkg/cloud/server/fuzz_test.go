package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

// documentedStatus is every status the API documents (openapi.json, docs/limits.md).
var documentedStatus = map[int]bool{200: true, 201: true, 202: true, 400: true, 401: true, 403: true, 404: true, 405: true,
	409: true, 412: true, 413: true, 429: true, 500: true, 503: true}

// maxAnswerBytes bounds any answer in these tests: a full page of 1000 events or rules of
// bounded size is far below it.
const maxAnswerBytes = 4 << 20

// FuzzHandler sends arbitrary requests (method, path, query, body, role) to the handler in
// process: every answer has a documented status, a bounded size, the JSON error shape for
// errors, and a 500 only from an injected fault; nothing panics. The seeds cover every route
// and the inputs that once went through unbounded.
func FuzzHandler(f *testing.F) {
	srv, err := server.New(server.Config{Tokens: testTokens(), Seed: testSeed(), AutoRegister: true, DefaultInstanceType: "small",
		DefaultZone: "zone-a", MaxFaultRules: 50, MaxEvents: 500, Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = srv.Close() })
	h := srv.Handler()
	for _, s := range []struct {
		method, path, body string
		role               uint8
	}{
		{"GET", "/v1/volumes?maxResults=2", "", 2},
		{"POST", "/v1/volumes", `{"name":"v","sizeBytes":1,"zone":"zone-a"}`, 1},
		{"POST", "/v1/volumes/vol-00000001/attach", `{"instanceId":"node-a"}`, 1},
		{"POST", "/v1/volumes/vol-00000001/detach", `{"instanceId":"node-a"}`, 1},
		{"POST", "/v1/volumes/vol-00000001/resize", `{"sizeBytes":5}`, 1},
		{"POST", "/v1/volumes/..%2F..%2Fetc/attach", `{"instanceId":"node-a"}`, 1},
		{"POST", "/v1/volumes/../../etc/attach", `{"instanceId":"node-a"}`, 1},
		{"POST", "/v1/snapshots", `{"name":"s","sourceVolumeId":"vol-00000001"}`, 1},
		{"GET", "/v1/snapshots?sourceVolumeId=vol-00000001&pageToken=x", "", 2},
		{"POST", "/v1/faults", `{"operation":"AttachVolume","error":"Unavailable","instanceId":"` + strings.Repeat("x", 300) + `"}`, 0},
		{"POST", "/v1/faults", `{"operation":"*","latencyMs":60000}`, 0},
		{"GET", "/v1/faults?maxResults=1", "", 2},
		{"GET", "/v1/faults/fault-1", "", 2},
		{"POST", "/v1/faults", `{"operation":"AttachVolume","error":"Nope"}`, 0},
		{"DELETE", "/v1/faults/fault-1", "", 0},
		{"GET", "/v1/events?sinceRevision=0&maxResults=1000", "", 2},
		{"GET", "/v1/events?sinceSeq=3&pageToken=djE6c2VxLTAwMDAwMDAwMDAwMDAwMDE", "", 2},
		{"PATCH", "/v1/quotas", `{"volumes":3}`, 0},
		{"PATCH", "/v1/instances/node-a", `{"attachLimit":2}`, 0},
		{"POST", "/v1/instances", `{"id":"n2","zone":"zone-a","instanceType":"small"}`, 0},
		{"GET", "/v1/instances/auto-1/capacity", "", 1},
		{"POST", "/v1/reset", `{"x":1}`, 0},
		{"GET", "/v1/instances/" + strings.Repeat("%41", 200), "", 2},
		{"PUT", "/v1/volumes", "{}", 1},
		{"GET", "/ui", "", 3},
		{"GET", "/ui/nodes/node-a/capacity", "", 2},
		{"POST", "/v1/scenarios", "name: x\nsteps:\n  - at: 1h\n    reset: true\n", 0},
		{"POST", "/v1/scenarios", "name: x\nsteps:\n  - at: 0s\n    quotaNoise: {quota: volumes, base: 1, amplitude: 1, every: 1s, for: 1s}\n", 0},
		{"DELETE", "/v1/scenarios/scenario-1", "", 0},
	} {
		f.Add(s.method, s.path, s.body, s.role)
	}
	tokens := []string{adminToken, driverToken, readerToken, "", "bogus"}
	f.Fuzz(func(t *testing.T, method, target, body string, role uint8) {
		if !strings.HasPrefix(target, "/") {
			target = "/" + target
		}
		req, err := http.NewRequest(method, "http://fakecloud"+target, strings.NewReader(body))
		if err != nil {
			return // not a request a client can send
		}
		if tok := tokens[int(role)%len(tokens)]; tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		status, answer := rec.Code, rec.Body.Bytes()
		if !documentedStatus[status] {
			t.Fatalf("%s %.80q: undocumented status %d", method, target, status)
		}
		if len(answer) > maxAnswerBytes {
			t.Fatalf("%s %.80q: answer of %d bytes", method, target, len(answer))
		}
		if status < 300 || req.URL.Path == "/metrics" || req.URL.Path == "/openapi.json" {
			return
		}
		var e cloud.Error
		dec := json.NewDecoder(bytes.NewReader(answer))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil || e.Code == "" || !e.Code.Known() || e.Code.HTTPStatus() != status {
			t.Fatalf("%s %.80q: %d with body %.200q (%v): not the error shape", method, target, status, answer, err)
		}
		if len(e.Message) > cloud.MaxMessageBytes {
			t.Fatalf("%s %.80q: message of %d bytes", method, target, len(e.Message))
		}
		if status == 500 && !strings.Contains(e.Message, "injected by fault rule") {
			t.Fatalf("%s %.80q: 500 %s", method, target, e.Message)
		}
	})
}
