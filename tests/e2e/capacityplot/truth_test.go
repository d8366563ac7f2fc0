package capacityplot

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

func TestTruth(t *testing.T) {
	tests := []struct {
		name            string
		slots, attached int
		headroom        int64
		instances       int
		share           QuotaShare
		want            int64
	}{
		{"slots bound", 7, 0, 40, 3, QuotaShareNone, 7},
		{"quota bound", 7, 2, 1, 3, QuotaShareNone, 3},
		{"quota full: current use", 7, 2, 0, 3, QuotaShareNone, 2},
		{"never 0", 0, 0, 0, 3, QuotaShareNone, 1},
		{"out of band above limit", -2, 0, 40, 3, QuotaShareNone, 1},
		{"negative headroom is 0", 7, 2, -3, 3, QuotaShareNone, 2},
		{"even share rounds up", 7, 1, 4, 3, QuotaShareEven, 3},
		{"even share with 0 instances", 7, 1, 4, 0, QuotaShareEven, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Truth(tc.slots, tc.attached, tc.headroom, tc.instances, tc.share); got != tc.want {
				t.Errorf("Truth(%d, %d, %d, %d, %s): expected %d, got %d", tc.slots, tc.attached, tc.headroom, tc.instances, tc.share, tc.want, got)
			}
		})
	}
}

func intp(v int) *int { return &v }

func TestReplay(t *testing.T) {
	b := Baseline{Revision: 10, At: at(0), QuotaLimit: 40, QuotaUsed: 1, InstanceCount: 3,
		Instances:  map[string]InstanceFacts{"node-1": {Slots: 7}, "node-2": {Slots: 3, Attached: 1}},
		TypeLimits: map[string]int{"small": 4}}
	events := []cloud.Event{
		{Seq: 1, Revision: 9, Time: at(-1), Type: "InstancePatched", InstanceID: "node-1", Attached: intp(0), Limit: intp(1)}, // before the baseline
		{Seq: 2, Revision: 11, Time: at(1), Type: "InstancePatched", InstanceID: "node-1", Attached: intp(0), Limit: intp(5)},
		{Seq: 3, Revision: 12, Time: at(2), Type: "VolumeAttached", InstanceID: "node-2", Attached: intp(2), Limit: intp(3)},
		{Seq: 4, Revision: 13, Time: at(3), Type: "QuotasChanged", Detail: "attachments=3 volumes=100 capacityBytes=1000"},
		{Seq: 5, Revision: 13, Time: at(3.5), Type: "FaultFired", InstanceID: "node-1", Detail: "GetCapacity Unavailable"},
		{Seq: 6, Revision: 14, Time: at(4), Type: "InstanceCreated", InstanceID: "other", Detail: "zone=z type=small outOfBandSlots=1"},
		{Seq: 7, Revision: 15, Time: at(5), Type: "VolumeAttached", InstanceID: "other", Attached: intp(1), Limit: intp(3)},
		{Seq: 8, Revision: 16, Time: at(6), Type: "VolumeDetached", InstanceID: "node-2", Attached: intp(1), Limit: intp(3)},
		{Seq: 9, Revision: 17, Time: at(7), Type: "Reset", Detail: "2 instance types, 3 instances"},
		{Seq: 10, Revision: 18, Time: at(8), Type: "InstancePatched", InstanceID: "node-1", Attached: intp(0), Limit: intp(7)},
	}
	got, notes := Replay(b, events, QuotaShareNone)
	type s struct {
		rev      uint64
		truth    int64
		attached int
	}
	want := map[string][]s{
		// Headroom: 39, 38 (attach), 1 (quota 3, used 2), 0 (other attaches), 1 (detach).
		// node-1 stays at the floor 1 from 13 on, so no further step.
		"node-1": {{10, 7, 0}, {11, 5, 0}, {13, 1, 0}},
		"node-2": {{10, 3, 1}, {12, 3, 2}, {15, 2, 2}, {16, 2, 1}},
	}
	for node, ws := range want {
		steps := got[node]
		if len(steps) != len(ws) {
			t.Fatalf("%s: expected %d steps %+v, got %+v", node, len(ws), ws, steps)
		}
		for i, w := range ws {
			if steps[i].Revision != w.rev || steps[i].Truth != w.truth || steps[i].Attached != w.attached {
				t.Errorf("%s step %d: expected rev %d truth %d attached %d, got %+v", node, i, w.rev, w.truth, w.attached, steps[i])
			}
		}
	}
	if _, ok := got["other"]; ok {
		t.Errorf("an instance outside the baseline got steps: %+v", got["other"])
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "Reset at revision 17") {
		t.Errorf("expected one note on the Reset, got %q", notes)
	}
}

func TestReplayEvenShareCountsNewInstances(t *testing.T) {
	b := Baseline{Revision: 1, At: at(0), QuotaLimit: 6, InstanceCount: 2,
		Instances: map[string]InstanceFacts{"n": {Slots: 10}}, TypeLimits: map[string]int{"t": 4}}
	events := []cloud.Event{{Seq: 1, Revision: 2, Time: at(1), Type: "InstanceCreated", InstanceID: "x", Detail: "zone=z type=t outOfBandSlots=0"}}
	got, _ := Replay(b, events, QuotaShareEven)
	steps := got["n"]
	if len(steps) != 2 || steps[0].Truth != 3 || steps[1].Truth != 2 {
		t.Fatalf("even share of 6 over 2 then 3 instances: expected truths 3 then 2, got %+v", steps)
	}
}

// TestReplayAsyncAttach: an asynchronous attach takes its slot and quota at VolumeAttaching
// and not again at VolumeAttached; a detach gives them back at VolumeDetached, a failed
// attach at VolumeAttachFailed.
func TestReplayAsyncAttach(t *testing.T) {
	b := Baseline{Revision: 10, At: at(0), QuotaLimit: 3, QuotaUsed: 1, InstanceCount: 1,
		Instances: map[string]InstanceFacts{"node-2": {Slots: 3, Attached: 1}}}
	ev := func(seq uint64, typ, vol string, attached int) cloud.Event {
		return cloud.Event{Seq: seq, Revision: 10 + seq, Time: at(float64(seq)), Type: typ, VolumeID: vol, InstanceID: "node-2",
			Attached: intp(attached), Limit: intp(3)}
	}
	events := []cloud.Event{
		ev(1, "VolumeAttaching", "v1", 2), ev(2, "VolumeAttached", "v1", 2),
		ev(3, "VolumeDetaching", "v1", 2), ev(4, "VolumeDetached", "v1", 1),
		ev(5, "VolumeAttaching", "v2", 2), ev(6, "VolumeAttachFailed", "v2", 1),
	}
	got, _ := Replay(b, events, QuotaShareNone)
	var headrooms []int64
	for _, st := range got["node-2"] {
		headrooms = append(headrooms, st.Headroom)
	}
	// Steps only where the truth or the count changes: baseline, attaching, detached,
	// attaching, failed.
	if want := []int64{2, 1, 2, 1, 2}; fmt.Sprint(headrooms) != fmt.Sprint(want) {
		t.Fatalf("headrooms %v, expected %v (steps %+v)", headrooms, want, got["node-2"])
	}
}
