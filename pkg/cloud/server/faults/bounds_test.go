package faults_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/faults"
)

// TestRuleFieldsAreBounded: a rule's string fields are identifiers (at most 128 bytes, no
// control characters); the message quotes at most a prefix. Before, a 1 MB instanceId was
// stored.
func TestRuleFieldsAreBounded(t *testing.T) {
	e := faults.New(nil)
	big := strings.Repeat("x", 1<<20)
	for _, r := range []cloud.FaultRule{
		{Operation: cloud.OperationAttachVolume, Error: cloud.CodeUnavailable, InstanceID: big},
		{Operation: cloud.OperationAttachVolume, Error: cloud.CodeUnavailable, VolumeID: strings.Repeat("v", cloud.MaxIDBytes+1)},
		{Operation: cloud.OperationAttachVolume, Error: cloud.CodeUnavailable, InstanceID: "a\nb"},
		{Operation: cloud.Operation(big), Error: cloud.CodeUnavailable},
		{Operation: cloud.OperationAny, Error: cloud.Code(big)},
	} {
		_, err := e.Add(r)
		if cloud.CodeOf(err) != cloud.CodeInvalidArgument || len(err.Error()) > cloud.MaxMessageBytes+100 {
			t.Errorf("Add: %.200v (%d bytes), want a short InvalidArgument", err, len(err.Error()))
		}
	}
	if _, err := e.Add(cloud.FaultRule{Operation: cloud.OperationAttachVolume, Error: cloud.CodeUnavailable, InstanceID: strings.Repeat("n", cloud.MaxIDBytes)}); err != nil {
		t.Fatalf("an instanceId of exactly %d bytes: %v", cloud.MaxIDBytes, err)
	}
	if err := e.Reset([]cloud.FaultRule{{ID: strings.Repeat("s", 200), Operation: cloud.OperationAny, Error: cloud.CodeUnavailable}}); cloud.CodeOf(err) != cloud.CodeInvalidArgument {
		t.Fatalf("seeded rule with a 200-byte ID: %v, want InvalidArgument", err)
	}
}

// TestRuleCountIsCapped: Add past the limit is ServerLimitExceeded and changes nothing;
// an expired rule makes room; a seed over the limit is refused.
func TestRuleCountIsCapped(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	e := faults.NewWithLimit(clock.now, 3)
	for i := range 3 {
		r := cloud.FaultRule{Operation: cloud.OperationGetVolume, Error: cloud.CodeThrottled}
		if i == 0 {
			r.TTLSeconds = 10
		}
		if _, err := e.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Add(cloud.FaultRule{Operation: cloud.OperationGetVolume, Error: cloud.CodeThrottled}); cloud.CodeOf(err) != cloud.CodeServerLimitExceeded {
		t.Fatalf("fourth rule: %v, want ServerLimitExceeded", err)
	}
	if n := len(e.List()); n != 3 {
		t.Fatalf("%d rules after a refused Add, want 3", n)
	}
	clock.t = clock.t.Add(11 * time.Second)
	if _, err := e.Add(cloud.FaultRule{Operation: cloud.OperationGetVolume, Error: cloud.CodeThrottled}); err != nil {
		t.Fatalf("after the TTL rule expired: %v", err)
	}
	seed := make([]cloud.FaultRule, 4)
	for i := range seed {
		seed[i] = cloud.FaultRule{Operation: cloud.OperationAny, LatencyMS: 1}
	}
	if err := e.Reset(seed); cloud.CodeOf(err) != cloud.CodeInvalidArgument {
		t.Fatalf("seed of 4 rules over a limit of 3: %v", err)
	}
}

// TestEvaluationOrderAcrossTheIndex: rules of the call's operation and of "*" run in
// creation order however they interleave, so the first error created wins; rules of other
// operations are never counted.
func TestEvaluationOrderAcrossTheIndex(t *testing.T) {
	e := faults.New(nil)
	add := func(op cloud.Operation, code cloud.Code, latency int) string {
		r, err := e.Add(cloud.FaultRule{Operation: op, Error: code, LatencyMS: latency})
		if err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	add(cloud.OperationAttachVolume, "", 5)
	add(cloud.OperationAny, "", 7)
	add(cloud.OperationGetVolume, cloud.CodeInternalError, 0)
	want := add(cloud.OperationAny, cloud.CodeThrottled, 0)
	add(cloud.OperationAttachVolume, cloud.CodeUnavailable, 0)
	out := e.Evaluate(attach)
	if out.Err == nil || out.Err.Code != cloud.CodeThrottled || !strings.Contains(out.Err.Message, want) {
		t.Fatalf("error %v, want Throttled from %s (created before the Unavailable rule)", out.Err, want)
	}
	if out.Delay != 12*time.Millisecond || len(out.Fired) != 3 {
		t.Fatalf("delay %v from %d rules, want 12ms from 3", out.Delay, len(out.Fired))
	}
	for _, r := range e.List() {
		if r.Operation == cloud.OperationGetVolume && r.Fired != 0 {
			t.Fatalf("a GetVolume rule fired for an attach")
		}
	}
}

// TestTotalLatencyIsCapped: the fired latency of one call adds up to at most MaxLatency;
// beyond it the outcome is MaxLatency and Unavailable. Before, three 60 s rules gave 180 s.
func TestTotalLatencyIsCapped(t *testing.T) {
	e := faults.New(nil)
	for range 3 {
		if _, err := e.Add(cloud.FaultRule{Operation: cloud.OperationAttachVolume, LatencyMS: 60000}); err != nil {
			t.Fatal(err)
		}
	}
	out := e.Evaluate(attach)
	if out.Delay != faults.MaxLatency || !out.Capped || out.Err == nil || out.Err.Code != cloud.CodeUnavailable {
		t.Fatalf("outcome %+v, want %v, capped, Unavailable", out, faults.MaxLatency)
	}
	// Exactly the cap is not over it.
	e = faults.New(nil)
	for range 2 {
		if _, err := e.Add(cloud.FaultRule{Operation: cloud.OperationAttachVolume, LatencyMS: 30000}); err != nil {
			t.Fatal(err)
		}
	}
	if out := e.Evaluate(attach); out.Delay != faults.MaxLatency || out.Capped || out.Err != nil {
		t.Fatalf("two 30 s rules: %+v, want 60 s and no error", out)
	}
}

// TestPage walks the rules in pages; a token survives the deletion of its rule.
func TestPage(t *testing.T) {
	e := faults.New(nil)
	var ids []string
	for i := range 10 {
		r, err := e.Add(cloud.FaultRule{Operation: cloud.OperationGetVolume, Error: cloud.CodeThrottled, VolumeID: fmt.Sprint("v", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	p1, err := e.Page(4, "")
	if err != nil || len(p1.Faults) != 4 || p1.NextPageToken == "" {
		t.Fatalf("page 1: %+v %v", p1, err)
	}
	if err := e.Delete(ids[3]); err != nil {
		t.Fatal(err)
	}
	p2, err := e.Page(4, p1.NextPageToken)
	if err != nil || len(p2.Faults) != 4 || p2.Faults[0].ID != ids[4] {
		t.Fatalf("page 2: %+v %v", p2, err)
	}
	p3, err := e.Page(4, p2.NextPageToken)
	if err != nil || len(p3.Faults) != 2 || p3.NextPageToken != "" {
		t.Fatalf("page 3: %+v %v", p3, err)
	}
	if _, err := e.Page(-1, ""); cloud.CodeOf(err) != cloud.CodeInvalidArgument {
		t.Fatalf("negative size: %v", err)
	}
	if _, err := e.Page(0, "garbage"); cloud.CodeOf(err) != cloud.CodeInvalidArgument {
		t.Fatalf("bad token: %v", err)
	}
}

// BenchmarkEvaluateManyRulesOtherOperations: 1,000 rules on other operations cost an
// attach nothing (the index skips them).
func BenchmarkEvaluateManyRulesOtherOperations(b *testing.B) {
	e := faults.New(nil)
	for i := range faults.DefaultMaxRules {
		if _, err := e.Add(cloud.FaultRule{Operation: cloud.OperationGetVolume, Error: cloud.CodeThrottled, VolumeID: fmt.Sprint("v", i)}); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		e.Evaluate(attach)
	}
}
