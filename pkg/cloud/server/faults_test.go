package server_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

// recordingSleeper records requested delays instead of sleeping.
type recordingSleeper struct {
	mu     sync.Mutex
	delays []time.Duration
}

func (s *recordingSleeper) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delays = append(s.delays, d)
	return ctx.Err()
}

func TestFaultsOverHTTP(t *testing.T) {
	sleeper := &recordingSleeper{}
	tc := startCloud(t, server.Config{Sleep: sleeper.sleep})
	ctx := context.Background()
	v := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "v", SizeBytes: 1, Zone: "zone-a"}))

	rule := must[*cloud.FaultRule](t)(tc.admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationAttachVolume, InstanceID: "node-a", Error: cloud.CodeThrottled, Count: 1}))
	latency := must[*cloud.FaultRule](t)(tc.admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationGetCapacity, LatencyMS: 3}))
	startRev := tc.snapshot(t).Revision

	_, err := tc.driver.AttachVolume(ctx, v.ID, "node-a")
	if !errors.Is(err, cloud.ErrThrottled) {
		t.Fatalf("attach under Throttled rule: %v", err)
	}
	var ce *cloud.Error
	if !errors.As(err, &ce) || ce.RetryAfter != time.Second || ce.HTTPStatus != 429 || !ce.Retryable {
		t.Fatalf("throttled error %+v", ce)
	}
	if inst := must[*cloud.Instance](t)(tc.reader.GetInstance(ctx, "node-a")); len(inst.Attachments) != 0 {
		t.Fatalf("a faulted attach attached: %v", inst.Attachments)
	}
	// Count 1: the retry goes through.
	must[*cloud.Attachment](t)(tc.driver.AttachVolume(ctx, v.ID, "node-a"))
	if c := must[*cloud.Capacity](t)(tc.driver.GetCapacity(ctx, "node-a")); c.Attached != 1 {
		t.Fatalf("capacity %+v", c)
	}
	if len(sleeper.delays) != 1 || sleeper.delays[0] != 3*time.Millisecond {
		t.Fatalf("latency rule slept %v, want [3ms]", sleeper.delays)
	}

	events := must[[]cloud.Event](t)(tc.reader.ListEvents(ctx, startRev-1))
	var fired []string
	for _, ev := range events {
		if ev.Type == "FaultFired" {
			fired = append(fired, ev.Detail)
		}
	}
	if len(fired) != 2 || !strings.Contains(fired[0], "rule="+rule.ID) || !strings.Contains(fired[1], "rule="+latency.ID) {
		t.Fatalf("FaultFired events %q", fired)
	}
	metrics := string(tc.do(t, "GET", "/metrics", readerToken, "").body)
	for _, want := range []string{
		`fakecloud_faults_fired_total{operation="AttachVolume",rule="` + rule.ID + `"} 1`,
		`fakecloud_faults_fired_total{operation="GetCapacity",rule="` + latency.ID + `"} 1`,
		`fakecloud_instance_attachments{instance_id="node-a"} 1`,
		`fakecloud_quota_used{quota="attachments"} 1`,
		`fakecloud_requests_total{code="Throttled",route="attachVolume",status="429"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if rules := must[[]cloud.FaultRule](t)(tc.admin.ListFaults(ctx)); len(rules) != 2 || rules[0].Fired != 1 {
		t.Fatalf("rules %+v", rules)
	}
	if err := tc.admin.DeleteFault(ctx, rule.ID); err != nil {
		t.Fatal(err)
	}
	// A deleted rule's series goes with it; the others stay until the rules are cleared.
	metrics = string(tc.do(t, "GET", "/metrics", readerToken, "").body)
	if strings.Contains(metrics, `rule="`+rule.ID+`"`) || !strings.Contains(metrics, `rule="`+latency.ID+`"`) {
		t.Errorf("after deleting rule %s, fakecloud_faults_fired_total is:\n%s", rule.ID, grepLines(metrics, "fakecloud_faults_fired_total"))
	}
	if err := tc.admin.ClearFaults(ctx); err != nil {
		t.Fatal(err)
	}
	if metrics = string(tc.do(t, "GET", "/metrics", readerToken, "").body); strings.Contains(metrics, "fakecloud_faults_fired_total{") {
		t.Errorf("after clearing the rules, fakecloud_faults_fired_total is:\n%s", grepLines(metrics, "fakecloud_faults_fired_total"))
	}
	if rules := must[[]cloud.FaultRule](t)(tc.admin.ListFaults(ctx)); len(rules) != 0 {
		t.Fatalf("rules after clear %+v", rules)
	}
}

func TestFaultLatencyHonoursContext(t *testing.T) {
	// The real sleeper with a long latency: the client's deadline ends the wait.
	tc := startCloud(t, server.Config{})
	ctx := context.Background()
	must[*cloud.FaultRule](t)(tc.admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationGetCapacity, LatencyMS: 60000}))
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := tc.driver.GetCapacity(short, "node-a")
	if !errors.Is(err, context.DeadlineExceeded) || cloud.CodeOf(err) != "" {
		t.Fatalf("GetCapacity under a 60s latency rule with a 50ms deadline: %v", err)
	}
}

func TestOutageSparesAdminRoutes(t *testing.T) {
	tc := startCloud(t, server.Config{})
	ctx := context.Background()
	must[*cloud.FaultRule](t)(tc.admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationAny, Error: cloud.CodeUnavailable}))
	_, err := tc.driver.GetCapacity(ctx, "node-a")
	wantCode(t, err, cloud.CodeUnavailable)
	_, err = tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "v", SizeBytes: 1, Zone: "zone-a"})
	wantCode(t, err, cloud.CodeUnavailable)
	if err := tc.admin.ClearFaults(ctx); err != nil {
		t.Fatalf("clearing an outage: %v", err)
	}
	must[*cloud.Capacity](t)(tc.driver.GetCapacity(ctx, "node-a"))
}

// TestShutdownEndsInjectedLatency: a request waiting out a long latency rule must not hold a
// graceful shutdown; it is answered Unavailable and Serve returns cleanly.
func TestShutdownEndsInjectedLatency(t *testing.T) {
	sleeping := make(chan struct{}, 1)
	sleep := func(ctx context.Context, d time.Duration) error {
		sleeping <- struct{}{}
		select {
		case <-time.After(d):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	tc := startCloud(t, server.Config{Sleep: sleep})
	ctx := context.Background()
	must[*cloud.FaultRule](t)(tc.admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationGetCapacity, LatencyMS: 60000}))
	errc := make(chan error, 1)
	go func() {
		_, err := tc.driver.GetCapacity(ctx, "node-a")
		errc <- err
	}()
	<-sleeping
	tc.stop() // fails the test if Serve returns an error (a shutdown timeout would be one)
	if err := <-errc; cloud.CodeOf(err) != cloud.CodeUnavailable {
		t.Fatalf("in-flight request during shutdown: %v, want Unavailable", err)
	}
}

// grepLines returns the lines of text that contain substr.
func grepLines(text, substr string) string {
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestGetFault: a reader gets one rule as the list shows it, with its fired count; an
// unknown or deleted ID is 404 FaultNotFound.
func TestGetFault(t *testing.T) {
	tc := startCloud(t, server.Config{})
	ctx := context.Background()
	rule := must[*cloud.FaultRule](t)(tc.admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationGetCapacity, Error: cloud.CodeThrottled, Count: 5}))
	_, err := tc.driver.GetCapacity(ctx, "node-a")
	wantCode(t, err, cloud.CodeThrottled)

	got := must[*cloud.FaultRule](t)(tc.reader.GetFault(ctx, rule.ID))
	list := must[[]cloud.FaultRule](t)(tc.reader.ListFaults(ctx))
	if len(list) != 1 || mustJSON(t, got) != mustJSON(t, list[0]) {
		t.Fatalf("GET /v1/faults/%s = %s, want the listed rule %s", rule.ID, mustJSON(t, got), mustJSON(t, list))
	}
	if got.Fired != 1 || got.Count != 5 || got.Error != cloud.CodeThrottled {
		t.Errorf("rule %+v, want fired 1 of count 5, Throttled", got)
	}

	if err := tc.admin.DeleteFault(ctx, rule.ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{rule.ID, "fault-999"} {
		r := tc.do(t, "GET", "/v1/faults/"+id, readerToken, "")
		if r.status != 404 {
			t.Fatalf("GET /v1/faults/%s: status %d, want 404 (body %s)", id, r.status, r.body)
		}
		if e := r.errorBody(t); e.Code != cloud.CodeFaultNotFound || !strings.Contains(e.Message, id) {
			t.Errorf("GET /v1/faults/%s: %+v, want FaultNotFound naming the ID", id, e)
		}
	}
	_, err = tc.reader.GetFault(ctx, rule.ID)
	if !errors.Is(err, cloud.ErrFaultNotFound) {
		t.Errorf("client GetFault of a deleted rule: %v, want ErrFaultNotFound", err)
	}
}

// TestUnknownFaultErrorCode: POST /v1/faults with an error code the cloud does not have is
// 400 InvalidArgument listing every valid code, and adds no rule.
func TestUnknownFaultErrorCode(t *testing.T) {
	tc := startCloud(t, server.Config{})
	before := tc.snapshot(t)
	r := tc.do(t, "POST", "/v1/faults", adminToken, `{"operation":"AttachVolume","error":"Nope"}`)
	if r.status != 400 {
		t.Fatalf("status %d, want 400 (body %s)", r.status, r.body)
	}
	e := r.errorBody(t)
	if e.Code != cloud.CodeInvalidArgument || !strings.Contains(e.Message, `"Nope"`) {
		t.Fatalf("error %+v, want InvalidArgument naming \"Nope\"", e)
	}
	for _, c := range cloud.Codes() {
		if !strings.Contains(e.Message, string(c)) {
			t.Errorf("message %q does not list valid code %s", e.Message, c)
		}
	}
	if rules := must[[]cloud.FaultRule](t)(tc.admin.ListFaults(context.Background())); len(rules) != 0 {
		t.Errorf("a refused rule was added: %+v", rules)
	}
	if after := tc.snapshot(t); after.Revision != before.Revision {
		t.Errorf("revision %d → %d after a refused rule", before.Revision, after.Revision)
	}
}
