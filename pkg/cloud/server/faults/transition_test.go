package faults_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/faults"
)

// TestTransitionRules: transition rules decide a transition's plan and never act on the
// request (Evaluate), request rules never on the transition; the first rule of each kind
// decides it; counts and targeting work as for request rules.
func TestTransitionRules(t *testing.T) {
	detach := faults.Call{Operation: cloud.OperationDetachVolume, InstanceID: "node-a", VolumeID: "vol-1"}
	tests := []struct {
		name  string
		rules []cloud.FaultRule
		call  faults.Call
		want  faults.TransitionOutcome // Fired is compared by length only
		fired int
	}{
		{"no rule", nil, attach, faults.TransitionOutcome{}, 0},
		{"a request rule is not a transition rule", []cloud.FaultRule{{Operation: cloud.OperationAttachVolume, Error: cloud.CodeThrottled}},
			attach, faults.TransitionOutcome{}, 0},
		{"slow", []cloud.FaultRule{{Operation: cloud.OperationAttachVolume, Transition: cloud.TransitionSlow, DurationMS: 1500}},
			attach, faults.TransitionOutcome{HasDuration: true, Duration: 1500 * time.Millisecond}, 1},
		{"stick, targeted at the volume", []cloud.FaultRule{{Operation: cloud.OperationDetachVolume, VolumeID: "vol-1", Transition: cloud.TransitionStick}},
			detach, faults.TransitionOutcome{Stuck: true, StuckRule: "fault-1"}, 1},
		{"stick on another volume", []cloud.FaultRule{{Operation: cloud.OperationDetachVolume, VolumeID: "vol-2", Transition: cloud.TransitionStick}},
			detach, faults.TransitionOutcome{}, 0},
		{"fail defaults to InternalError", []cloud.FaultRule{{Operation: cloud.OperationAttachVolume, Transition: cloud.TransitionFail}},
			attach, faults.TransitionOutcome{Fail: cloud.CodeInternalError, FailRule: "fault-1"}, 1},
		{"fail with a code and a duration", []cloud.FaultRule{{Operation: cloud.OperationAttachVolume, InstanceID: "node-a",
			Transition: cloud.TransitionFail, Error: cloud.CodeAttachmentLimitExceeded, DurationMS: 30000}},
			attach, faults.TransitionOutcome{Fail: cloud.CodeAttachmentLimitExceeded, FailRule: "fault-1", HasDuration: true, Duration: 30 * time.Second}, 1},
		{"the first rule of each kind decides", []cloud.FaultRule{
			{Operation: cloud.OperationAttachVolume, Transition: cloud.TransitionSlow, DurationMS: 100},
			{Operation: cloud.OperationAttachVolume, Transition: cloud.TransitionSlow, DurationMS: 200},
			{Operation: cloud.OperationAttachVolume, Transition: cloud.TransitionFail, Error: cloud.CodeUnavailable},
			{Operation: cloud.OperationAttachVolume, Transition: cloud.TransitionFail, Error: cloud.CodeInternalError}},
			attach, faults.TransitionOutcome{HasDuration: true, Duration: 100 * time.Millisecond, Fail: cloud.CodeUnavailable, FailRule: "fault-3"}, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, &fakeClock{t: time.Unix(0, 0)}, tc.rules...)
			if out := e.Evaluate(tc.call); len(out.Fired) != 0 && tc.rules[0].Transition != "" {
				t.Fatalf("Evaluate fired transition rules: %+v", out)
			}
			got := e.EvaluateTransition(tc.call)
			if len(got.Fired) != tc.fired {
				t.Errorf("fired %d rules, want %d", len(got.Fired), tc.fired)
			}
			got.Fired = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("outcome %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestLive: a rule is live until deleted or expired; Live reports its expiry.
func TestLive(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	e := newEngine(t, clock,
		cloud.FaultRule{Operation: cloud.OperationDetachVolume, Transition: cloud.TransitionStick},
		cloud.FaultRule{Operation: cloud.OperationDetachVolume, Transition: cloud.TransitionStick, TTLSeconds: 60})
	if live, exp := e.Live("fault-1"); !live || !exp.IsZero() {
		t.Errorf("fault-1: %v, %v; want live without expiry", live, exp)
	}
	if live, exp := e.Live("fault-2"); !live || !exp.Equal(time.Unix(1060, 0)) {
		t.Errorf("fault-2: %v, %v; want live until 1060", live, exp)
	}
	clock.t = time.Unix(1060, 0)
	if live, _ := e.Live("fault-2"); live {
		t.Error("fault-2 live after its TTL")
	}
	if err := e.Delete("fault-1"); err != nil {
		t.Fatal(err)
	}
	if live, _ := e.Live("fault-1"); live {
		t.Error("fault-1 live after delete")
	}
}
