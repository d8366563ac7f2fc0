package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/faults"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/paging"
)

// TestOversizedIdentifiersAreRefused: every identifier, in the path, the query or the body,
// is refused over 128 bytes with InvalidArgument before it is used, and the message quotes at
// most a bounded prefix. Before, a fault rule's 200 KB instanceId was 201 and stored, and a
// 70 KB path ID came back in a 70 KB message.
func TestOversizedIdentifiersAreRefused(t *testing.T) {
	tc := startCloud(t, server.Config{})
	big := strings.Repeat("x", 200<<10)
	over := strings.Repeat("y", cloud.MaxIDBytes+1)
	before := tc.snapshot(t)
	tests := []struct{ name, method, path, body string }{
		{"fault instanceId", "POST", "/v1/faults", `{"operation":"AttachVolume","error":"Unavailable","instanceId":"` + big + `"}`},
		{"fault volumeId", "POST", "/v1/faults", `{"operation":"AttachVolume","error":"Unavailable","volumeId":"` + over + `"}`},
		{"fault volumeId with a control character", "POST", "/v1/faults", `{"operation":"AttachVolume","error":"Unavailable","volumeId":"a\u0007"}`},
		{"volume ID in the path", "GET", "/v1/volumes/" + big[:60<<10], ""},
		{"volume ID just over", "DELETE", "/v1/volumes/" + over, ""},
		{"instance ID in the path", "GET", "/v1/instances/" + over + "/capacity", ""},
		{"snapshot ID in the path", "GET", "/v1/snapshots/" + over, ""},
		{"fault ID in the path", "DELETE", "/v1/faults/" + over, ""},
		{"escaped path step", "GET", "/v1/volumes/%2E%2E", ""},
		{"attach instanceId", "POST", "/v1/volumes/vol-00000001/attach", `{"instanceId":"` + big + `"}`},
		{"detach instanceId", "POST", "/v1/volumes/vol-00000001/detach", `{"instanceId":"` + over + `"}`},
		{"snapshot source", "POST", "/v1/snapshots", `{"name":"s","sourceVolumeId":"` + big + `"}`},
		{"volume source snapshot", "POST", "/v1/volumes", `{"name":"v","sizeBytes":1,"sourceSnapshotId":"` + over + `"}`},
		{"volume zone", "POST", "/v1/volumes", `{"name":"v","sizeBytes":1,"zone":"` + big + `"}`},
		{"instance type", "POST", "/v1/instances", `{"id":"n","zone":"zone-a","instanceType":"` + big + `"}`},
		{"list page token", "GET", "/v1/volumes?pageToken=" + big[:60<<10], ""},
		{"snapshot filter", "GET", "/v1/snapshots?sourceVolumeId=" + over, ""},
		{"events page token", "GET", "/v1/events?pageToken=" + over, ""},
		{"faults page token", "GET", "/v1/faults?pageToken=" + over, ""},
		{"query number", "GET", "/v1/events?sinceSeq=" + big[:10000], ""},
		{"unknown JSON field", "POST", "/v1/faults", `{"` + big + `":1}`},
		{"If-Match", "PATCH", "/v1/quotas", `{"volumes":5}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var header []string
			if tt.name == "If-Match" {
				header = []string{"If-Match", big[:30000]}
			}
			r := tc.do(t, tt.method, tt.path, adminToken, tt.body, header...)
			e := r.errorBody(t)
			if r.status != http.StatusBadRequest || e.Code != cloud.CodeInvalidArgument {
				t.Fatalf("%s %.60s: %d %s %.200s, want 400 InvalidArgument", tt.method, tt.path, r.status, e.Code, e.Message)
			}
			if len(e.Message) > cloud.MaxMessageBytes || len(r.body) > 2*cloud.MaxMessageBytes {
				t.Fatalf("message of %d bytes (answer %d): %.200s", len(e.Message), len(r.body), e.Message)
			}
		})
	}
	if after := tc.snapshot(t); after.Revision != before.Revision {
		t.Fatalf("revision %d -> %d: a refused request changed the state", before.Revision, after.Revision)
	}
}

// TestFaultFiredEventHoldsNoUncheckedInput: under an outage rule, a driver's attach with a
// 200 KB instanceId is refused before the rules see it, so no event stores it. Before, each
// such attach wrote its instanceId into a FaultFired event.
func TestFaultFiredEventHoldsNoUncheckedInput(t *testing.T) {
	tc := startCloud(t, server.Config{})
	ctx := context.Background()
	must[*cloud.FaultRule](t)(tc.admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationAny, Error: cloud.CodeUnavailable}))
	big := strings.Repeat("i", 200<<10)
	for range 5 {
		r := tc.do(t, "POST", "/v1/volumes/vol-00000001/attach", driverToken, `{"instanceId":"`+big+`"}`)
		if r.status != http.StatusBadRequest {
			t.Fatalf("attach: %d %.200s, want 400", r.status, r.body)
		}
	}
	for _, ev := range must[[]cloud.Event](t)(tc.reader.ListEvents(ctx, 0)) {
		if len(ev.InstanceID) > cloud.MaxIDBytes || len(ev.VolumeID) > cloud.MaxIDBytes || ev.Type == "FaultFired" {
			t.Fatalf("event %d %s holds instanceId of %d bytes", ev.Seq, ev.Type, len(ev.InstanceID))
		}
	}
}

// TestPathIsNeverCleanedOrRedirected: "../../etc" as a volume ID stays one path segment
// (the client escapes '/'), so the cloud answers VolumeNotFound for it; a raw path with ".."
// steps is 404, never a 301 to another route. Before, the server answered 301 and the client
// followed it, turning POST .../attach into GET /etc/attach.
func TestPathIsNeverCleanedOrRedirected(t *testing.T) {
	tc := startCloud(t, server.Config{})
	ctx := context.Background()
	_, err := tc.driver.AttachVolume(ctx, "../../etc", "node-a")
	wantCode(t, err, cloud.CodeVolumeNotFound)
	_, err = tc.driver.GetVolume(ctx, "a/b")
	wantCode(t, err, cloud.CodeVolumeNotFound)
	_, err = tc.driver.GetVolume(ctx, "..")
	wantCode(t, err, cloud.CodeInvalidArgument) // refused by the client: a path step

	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, p := range []string{"/v1/volumes/../../etc/attach", "/v1/volumes/./vol-00000001", "/v1//volumes", "/v1/volumes/x/../../instances"} {
		req, err := http.NewRequest(http.MethodPost, tc.url+p, strings.NewReader(`{"instanceId":"node-a"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST %s: %d (Location %q), want 404 or 405 and no redirect", p, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
}

// TestBodylessRoutesRefuseABody: a GET, a DELETE or POST /v1/reset with a body is 400
// InvalidArgument and changes nothing (the documented choice: a body meant for another route
// is never silently ignored); an empty body is fine. Before, the body was ignored and the
// reset ran.
func TestBodylessRoutesRefuseABody(t *testing.T) {
	tc := startCloud(t, server.Config{})
	ctx := context.Background()
	must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "keep", SizeBytes: 1, Zone: "zone-a"}))
	before := tc.snapshot(t)
	for _, tt := range []struct{ method, path string }{
		{"POST", "/v1/reset"}, {"GET", "/v1/volumes"}, {"GET", "/v1/events"}, {"DELETE", "/v1/faults"},
		{"DELETE", "/v1/volumes/vol-00000001"}, {"GET", "/healthz"},
	} {
		r := tc.do(t, tt.method, tt.path, adminToken, `{"confirm":true}`)
		if e := r.errorBody(t); r.status != http.StatusBadRequest || e.Code != cloud.CodeInvalidArgument || !strings.Contains(e.Message, "takes no request body") {
			t.Errorf("%s %s with a body: %d %s %q, want 400 InvalidArgument", tt.method, tt.path, r.status, e.Code, e.Message)
		}
	}
	if after := tc.snapshot(t); after.Revision != before.Revision || len(after.Volumes) != 1 {
		t.Fatalf("a refused request changed the state: revision %d -> %d, %d volumes", before.Revision, after.Revision, len(after.Volumes))
	}
	// An explicitly empty body is no body.
	req, _ := http.NewRequest(http.MethodGet, tc.url+"/v1/volumes", strings.NewReader(""))
	req.Header.Set("Authorization", "Bearer "+readerToken)
	req.ContentLength = 0
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET with an empty body: %d, want 200", resp.StatusCode)
	}
}

// TestStackedLatencyIsCapped: three 60 s latency rules on one operation delay a request by
// the 60 s cap, not 180 s, and it then answers 503 Unavailable saying so. Before, the server
// slept 180 s, past its write timeout, and the client saw EOF with no status.
func TestStackedLatencyIsCapped(t *testing.T) {
	var (
		mu    sync.Mutex
		slept []time.Duration
	)
	sleep := func(_ context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		slept = append(slept, d)
		return nil
	}
	tc := startCloud(t, server.Config{Sleep: sleep})
	ctx := context.Background()
	for range 3 {
		must[*cloud.FaultRule](t)(tc.admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationListVolumes, LatencyMS: 60000}))
	}
	_, err := tc.reader.ListVolumes(ctx, 0, "")
	wantCode(t, err, cloud.CodeUnavailable)
	if !strings.Contains(err.Error(), "over the cap of 60000 ms") {
		t.Errorf("message %q does not name the cap", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(slept) != 1 || slept[0] != faults.MaxLatency {
		t.Fatalf("slept %v, want one wait of %v", slept, faults.MaxLatency)
	}
}

// TestFaultRuleCount: past MaxFaultRules a new rule is 409 ServerLimitExceeded; deleting
// one makes room. Before, there was no limit (20,000 rules were accepted).
func TestFaultRuleCount(t *testing.T) {
	tc := startCloud(t, server.Config{MaxFaultRules: 3})
	ctx := context.Background()
	var last *cloud.FaultRule
	for range 3 {
		last = must[*cloud.FaultRule](t)(tc.admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationGetVolume, Error: cloud.CodeThrottled, InstanceID: "x"}))
	}
	_, err := tc.admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationGetVolume, Error: cloud.CodeThrottled})
	wantCode(t, err, cloud.CodeServerLimitExceeded)
	var ce *cloud.Error
	if !errors.As(err, &ce) || ce.HTTPStatus != http.StatusConflict {
		t.Fatalf("err %v: want HTTP 409", err)
	}
	if err := tc.admin.DeleteFault(ctx, last.ID); err != nil {
		t.Fatal(err)
	}
	must[*cloud.FaultRule](t)(tc.admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationGetVolume, Error: cloud.CodeThrottled}))

	// The default holds faults.DefaultMaxRules.
	def := startCloud(t, server.Config{})
	for i := range faults.DefaultMaxRules {
		r := def.do(t, "POST", "/v1/faults", adminToken, fmt.Sprintf(`{"operation":"GetVolume","error":"Throttled","volumeId":"v-%d"}`, i))
		if r.status != http.StatusCreated {
			t.Fatalf("rule %d: %d %s", i, r.status, r.body)
		}
	}
	r := def.do(t, "POST", "/v1/faults", adminToken, `{"operation":"GetVolume","error":"Throttled"}`)
	if e := r.errorBody(t); r.status != http.StatusConflict || e.Code != cloud.CodeServerLimitExceeded {
		t.Fatalf("rule %d: %d %s, want 409 ServerLimitExceeded", faults.DefaultMaxRules+1, r.status, e.Code)
	}
}

// TestEventsAndFaultsArePaged: /v1/events and /v1/faults answer pages of maxResults (default
// 100, capped at 1000) with a nextPageToken, like /v1/volumes; walking the pages yields every
// item once, in order. Before, each answered everything in one body.
func TestEventsAndFaultsArePaged(t *testing.T) {
	tc := startCloud(t, server.Config{})
	ctx := context.Background()
	const rules = 250
	for i := range rules {
		must[*cloud.FaultRule](t)(tc.admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationGetVolume, Error: cloud.CodeThrottled, VolumeID: fmt.Sprint("v-", i)}))
	}
	// The default page is 100.
	var fl cloud.FaultList
	r := tc.do(t, "GET", "/v1/faults", readerToken, "")
	if err := json.Unmarshal(r.body, &fl); err != nil || len(fl.Faults) != paging.DefaultSize || fl.NextPageToken == "" {
		t.Fatalf("GET /v1/faults: %d rules, token %q, err %v; want %d and a token", len(fl.Faults), fl.NextPageToken, err, paging.DefaultSize)
	}
	// Small pages walk everything once; a deleted rule does not break a token.
	var seen []string
	token := ""
	for {
		page := must[*cloud.FaultList](t)(tc.reader.ListFaultsPage(ctx, 7, token))
		for _, f := range page.Faults {
			seen = append(seen, f.VolumeID)
		}
		if token = page.NextPageToken; token == "" {
			break
		}
		if len(seen) == 7 {
			if err := tc.admin.DeleteFault(ctx, page.Faults[6].ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(seen) != rules || seen[0] != "v-0" || seen[rules-1] != fmt.Sprint("v-", rules-1) {
		t.Fatalf("walked %d rules (%v ... ), want %d in creation order", len(seen), seen[:3], rules)
	}
	if all := must[[]cloud.FaultRule](t)(tc.admin.ListFaults(ctx)); len(all) != rules-1 {
		t.Fatalf("ListFaults: %d rules, want %d", len(all), rules-1)
	}

	// Events: 250 FaultCreated + 1 FaultDeleted, paged; maxResults above 1000 is capped.
	el := must[*cloud.EventList](t)(tc.reader.ListEventsPage(ctx, admin.EventQuery{MaxResults: 10}))
	if len(el.Events) != 10 || el.NextPageToken == "" {
		t.Fatalf("events page: %d, token %q", len(el.Events), el.NextPageToken)
	}
	next := must[*cloud.EventList](t)(tc.reader.ListEventsPage(ctx, admin.EventQuery{MaxResults: 10, PageToken: el.NextPageToken}))
	if next.Events[0].Seq != el.Events[9].Seq+1 {
		t.Fatalf("second page starts at seq %d, want %d", next.Events[0].Seq, el.Events[9].Seq+1)
	}
	bySeq := must[*cloud.EventList](t)(tc.reader.ListEventsPage(ctx, admin.EventQuery{UseSeq: true, SinceSeq: el.Events[4].Seq, MaxResults: 3}))
	if len(bySeq.Events) != 3 || bySeq.Events[0].Seq != el.Events[5].Seq {
		t.Fatalf("sinceSeq page: %+v", bySeq.Events)
	}
	all := must[[]cloud.Event](t)(tc.reader.ListEvents(ctx, 0))
	if len(all) < rules+1 {
		t.Fatalf("ListEvents walked %d events, want at least %d", len(all), rules+1)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Seq != all[i-1].Seq+1 {
			t.Fatalf("events out of order at %d: %d after %d", i, all[i].Seq, all[i-1].Seq)
		}
	}
	r = tc.do(t, "GET", "/v1/events?maxResults=5000", readerToken, "")
	var big cloud.EventList
	if err := json.Unmarshal(r.body, &big); err != nil || len(big.Events) != len(all) {
		t.Fatalf("maxResults=5000: %d events, %v", len(big.Events), err)
	}
	for _, bad := range []string{"maxResults=-1", "pageToken=bm9wZQ", "pageToken=" + paging.Token("seq-zz")} {
		for _, route := range []string{"/v1/events?", "/v1/faults?"} {
			if r := tc.do(t, "GET", route+bad, readerToken, ""); r.status != http.StatusBadRequest {
				t.Errorf("GET %s%s: %d, want 400", route, bad, r.status)
			}
		}
	}
}

// TestOversizedHeadersAre431: a request line or header block over 64 KiB is answered by
// net/http itself with 431 Request Header Fields Too Large (plain text), before any handler
// runs; the connection is then closed, so the client may see a reset instead when it is
// still sending.
func TestOversizedHeadersAre431(t *testing.T) {
	tc := startCloud(t, server.Config{})
	conn, err := net.Dial("tcp", strings.TrimPrefix(tc.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go func() {
		_, _ = fmt.Fprintf(conn, "GET /v1/volumes/%s HTTP/1.1\r\nHost: x\r\n\r\n", strings.Repeat("v", 70<<10))
	}()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	data, err := io.ReadAll(conn)
	if len(data) == 0 {
		t.Skipf("connection reset before the answer was read (%v); the status is Go's 431", err)
	}
	if !strings.HasPrefix(string(data), "HTTP/1.1 431") {
		t.Fatalf("answer %.100q, want 431", data)
	}
}

// TestSlowBodyIsCutOff: a body that stops arriving is cut off after ReadTimeout, not held
// for 30 s; the connection ends with a 400 or is closed. Before, the read deadline was 30 s.
func TestSlowBodyIsCutOff(t *testing.T) {
	tc := startCloud(t, server.Config{ReadHeaderTimeout: 200 * time.Millisecond, ReadTimeout: 500 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(tc.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST /v1/faults HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 1000\r\n\r\n{\"oper", adminToken)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	data, _ := io.ReadAll(conn)
	elapsed := time.Since(start)
	if elapsed > 5*time.Second {
		t.Fatalf("slow body held the connection for %v", elapsed)
	}
	if len(data) > 0 && !strings.HasPrefix(string(data), "HTTP/1.1 400") {
		t.Fatalf("answer %.200q, want 400 or a closed connection", data)
	}
}

// TestInstanceCount: past MaxInstances a new instance is 409 ServerLimitExceeded, and an
// auto-registering lookup stays InstanceNotFound, so GET /v1/instances (not paged) has a
// bound. Before, a driver token could register instances without end.
func TestInstanceCount(t *testing.T) {
	tc := startCloud(t, server.Config{MaxInstances: 3, AutoRegister: true, DefaultInstanceType: "small", DefaultZone: "zone-a"})
	ctx := context.Background()
	// node-a and node-b are seeded; one more fits.
	must[*cloud.Instance](t)(tc.driver.GetInstance(ctx, "auto-1"))
	_, err := tc.driver.GetInstance(ctx, "auto-2")
	wantCode(t, err, cloud.CodeInstanceNotFound)
	_, err = tc.admin.CreateInstance(ctx, cloud.CreateInstanceRequest{ID: "n4", Zone: "zone-a", InstanceType: "small"})
	wantCode(t, err, cloud.CodeServerLimitExceeded)
	// A retried create of an existing instance still answers.
	must[*cloud.Instance](t)(tc.admin.CreateInstance(ctx, cloud.CreateInstanceRequest{ID: "auto-1", Zone: "zone-a", InstanceType: "small"}))
	if n := len(must[[]cloud.Instance](t)(tc.reader.ListInstances(ctx))); n != 3 {
		t.Fatalf("%d instances, want 3", n)
	}
}
