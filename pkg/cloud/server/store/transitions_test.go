package store_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
)

// clock is a fake clock that only moves when a test says so.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// step is one action of a transition script: an attach or detach of volume vol (1-based,
// created by the script) to instance "n" or "m", moving the clock, completing what is due,
// or a check of the state. want* fields are checked after the action.
type step struct {
	op      string // attach, detach, advance, complete, release
	vol     int
	inst    string
	d       time.Duration
	plan    *store.TransitionPlan
	code    cloud.Code        // the error the action must fail with
	state   cloud.AttachState // the answer's state (attach, detach) and the volume's afterwards
	done    int               // complete: how many transitions it must complete
	held    int               // slots held on instance n afterwards, and quota used
	counts  [3]int            // attaching, detaching, failed on n afterwards (capacity reading)
	noCheck bool              // skip the held/counts checks
}

// TestTransitions runs attach/detach scripts against a store with 1 s attach and 2 s detach
// durations and a fake clock, checking each answer, the volume's state, the slots and quota
// held and the capacity reading's counts after every step.
func TestTransitions(t *testing.T) {
	ms := func(n int) *time.Duration { d := time.Duration(n) * time.Millisecond; return &d }
	tests := []struct {
		name  string
		vols  int
		steps []step
	}{
		{"attach, then detach, each completing when due", 1, []step{
			{op: "attach", vol: 1, inst: "n", state: cloud.StateAttaching, held: 1, counts: [3]int{1, 0, 0}},
			{op: "complete", done: 0, state: cloud.StateAttaching, vol: 1, held: 1, counts: [3]int{1, 0, 0}},
			{op: "advance", d: 999 * time.Millisecond, noCheck: true},
			{op: "complete", done: 0, vol: 1, state: cloud.StateAttaching, held: 1, counts: [3]int{1, 0, 0}},
			{op: "advance", d: time.Millisecond, noCheck: true},
			{op: "complete", done: 1, vol: 1, state: cloud.StateAttached, held: 1},
			{op: "attach", vol: 1, inst: "n", state: cloud.StateAttached, held: 1},
			{op: "detach", vol: 1, inst: "n", state: cloud.StateDetaching, held: 1, counts: [3]int{0, 1, 0}},
			{op: "detach", vol: 1, inst: "n", state: cloud.StateDetaching, held: 1, counts: [3]int{0, 1, 0}},
			{op: "attach", vol: 1, inst: "n", code: cloud.CodeIncorrectState, state: cloud.StateDetaching, held: 1, counts: [3]int{0, 1, 0}},
			{op: "advance", d: 2 * time.Second, noCheck: true},
			{op: "complete", done: 1, vol: 1, state: cloud.StateDetached, held: 0},
			{op: "detach", vol: 1, inst: "n", state: cloud.StateDetached, held: 0},
		}},
		{"a repeated attach joins the transition under way", 1, []step{
			{op: "attach", vol: 1, inst: "n", state: cloud.StateAttaching, held: 1, counts: [3]int{1, 0, 0}},
			{op: "attach", vol: 1, inst: "n", state: cloud.StateAttaching, held: 1, counts: [3]int{1, 0, 0}},
			{op: "attach", vol: 1, inst: "m", code: cloud.CodeVolumeInUse, state: cloud.StateAttaching, held: 1, counts: [3]int{1, 0, 0}},
			{op: "advance", d: time.Second, noCheck: true},
			{op: "complete", done: 1, vol: 1, state: cloud.StateAttached, held: 1},
		}},
		{"transient states hold slots: the limit counts them", 4, []step{
			{op: "attach", vol: 1, inst: "n", state: cloud.StateAttaching, held: 1, counts: [3]int{1, 0, 0}},
			{op: "attach", vol: 2, inst: "n", state: cloud.StateAttaching, held: 2, counts: [3]int{2, 0, 0}},
			{op: "advance", d: time.Second, noCheck: true},
			{op: "complete", done: 2, vol: 2, state: cloud.StateAttached, held: 2},
			{op: "attach", vol: 3, inst: "n", state: cloud.StateAttaching, held: 3, counts: [3]int{1, 0, 0}},
			{op: "detach", vol: 1, inst: "n", state: cloud.StateDetaching, held: 3, counts: [3]int{1, 1, 0}},
			{op: "attach", vol: 4, inst: "n", code: cloud.CodeAttachmentLimitExceeded, state: cloud.StateDetached, held: 3, counts: [3]int{1, 1, 0}},
			{op: "advance", d: 2 * time.Second, noCheck: true},
			{op: "complete", done: 2, vol: 1, state: cloud.StateDetached, held: 2},
			{op: "attach", vol: 4, inst: "n", state: cloud.StateAttaching, held: 3, counts: [3]int{1, 0, 0}},
		}},
		{"a detach of an attaching volume turns it to detaching", 1, []step{
			{op: "attach", vol: 1, inst: "n", state: cloud.StateAttaching, held: 1, counts: [3]int{1, 0, 0}},
			{op: "detach", vol: 1, inst: "n", state: cloud.StateDetaching, held: 1, counts: [3]int{0, 1, 0}},
			{op: "advance", d: time.Second, noCheck: true},
			{op: "complete", done: 0, vol: 1, state: cloud.StateDetaching, held: 1, counts: [3]int{0, 1, 0}},
			{op: "advance", d: time.Second, noCheck: true},
			{op: "complete", done: 1, vol: 1, state: cloud.StateDetached, held: 0},
		}},
		{"a failed attach releases its slot; the next attach starts afresh", 1, []step{
			{op: "attach", vol: 1, inst: "n", plan: &store.TransitionPlan{Fail: cloud.CodeInternalError, Rule: "fault-1"}, state: cloud.StateAttaching, held: 1, counts: [3]int{1, 0, 0}},
			{op: "advance", d: time.Second, noCheck: true},
			{op: "complete", done: 1, vol: 1, state: cloud.StateError, held: 0},
			{op: "detach", vol: 1, inst: "n", state: cloud.StateDetached, noCheck: true},
			{op: "attach", vol: 1, inst: "n", state: cloud.StateAttaching, held: 1, counts: [3]int{1, 0, 0}},
		}},
		{"a failed detach keeps the slot; a detach again detaches", 1, []step{
			{op: "attach", vol: 1, inst: "n", plan: &store.TransitionPlan{Duration: ms(0)}, state: cloud.StateAttached, held: 1},
			{op: "detach", vol: 1, inst: "n", plan: &store.TransitionPlan{Fail: cloud.CodeUnavailable, Rule: "fault-2"}, state: cloud.StateDetaching, held: 1, counts: [3]int{0, 1, 0}},
			{op: "advance", d: 2 * time.Second, noCheck: true},
			{op: "complete", done: 1, vol: 1, state: cloud.StateError, held: 1, counts: [3]int{0, 0, 1}},
			{op: "detach", vol: 1, inst: "n", state: cloud.StateDetaching, held: 1, counts: [3]int{0, 1, 0}},
			{op: "advance", d: 2 * time.Second, noCheck: true},
			{op: "complete", done: 1, vol: 1, state: cloud.StateDetached, held: 0},
		}},
		{"duration 0 completes within the request", 1, []step{
			{op: "attach", vol: 1, inst: "n", plan: &store.TransitionPlan{Duration: ms(0)}, state: cloud.StateAttached, held: 1},
			{op: "detach", vol: 1, inst: "n", plan: &store.TransitionPlan{Duration: ms(0)}, state: cloud.StateDetached, held: 0},
			{op: "attach", vol: 1, inst: "n", plan: &store.TransitionPlan{Duration: ms(0), Fail: cloud.CodeInternalError}, state: cloud.StateError, held: 0},
		}},
		{"a stuck transition waits for its rule, then completes", 1, []step{
			{op: "attach", vol: 1, inst: "n", plan: &store.TransitionPlan{Duration: ms(0)}, state: cloud.StateAttached, held: 1},
			{op: "detach", vol: 1, inst: "n", plan: &store.TransitionPlan{Stuck: true, Rule: "live"}, state: cloud.StateDetaching, held: 1, counts: [3]int{0, 1, 0}},
			{op: "advance", d: time.Hour, noCheck: true},
			{op: "complete", done: 0, vol: 1, state: cloud.StateDetaching, held: 1, counts: [3]int{0, 1, 0}},
			{op: "detach", vol: 1, inst: "n", plan: &store.TransitionPlan{Stuck: true, Rule: "gone"}, state: cloud.StateDetaching, held: 1, counts: [3]int{0, 1, 0}},
			{op: "release", done: 1, vol: 1, state: cloud.StateDetaching, held: 1, counts: [3]int{0, 1, 0}},
			{op: "complete", done: 1, vol: 1, state: cloud.StateDetached, held: 0},
		}},
		{"a slow rule's duration replaces the type's", 1, []step{
			{op: "attach", vol: 1, inst: "n", plan: &store.TransitionPlan{Duration: ms(5000)}, state: cloud.StateAttaching, held: 1, counts: [3]int{1, 0, 0}},
			{op: "advance", d: 4 * time.Second, noCheck: true},
			{op: "complete", done: 0, vol: 1, state: cloud.StateAttaching, held: 1, counts: [3]int{1, 0, 0}},
			{op: "advance", d: time.Second, noCheck: true},
			{op: "complete", done: 1, vol: 1, state: cloud.StateAttached, held: 1},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			s, err := store.Open("", store.Options{Now: clk.Now, AttachDuration: time.Second, DetachDuration: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			st := testState()
			st.InstanceTypes[0].MaxAttachments = 4
			st.Instances[0].OutOfBandSlots = 1 // 3 slots for volumes
			st.Instances = append(st.Instances, store.SeedInstance{CreateInstanceRequest: cloud.CreateInstanceRequest{ID: "m", Zone: "z", InstanceType: "small"}})
			if _, err := s.SeedIfEmpty(st); err != nil {
				t.Fatal(err)
			}
			var vols []string
			for i := range tc.vols {
				v, err := s.CreateVolume(cloud.CreateVolumeRequest{Name: fmt.Sprintf("v%d", i), SizeBytes: 1, Zone: "z"})
				if err != nil {
					t.Fatal(err)
				}
				vols = append(vols, v.ID)
			}
			live := func(id string) (bool, time.Time) { return id == "live", time.Time{} }
			for i, sp := range tc.steps {
				where := fmt.Sprintf("step %d (%s)", i, sp.op)
				var planner store.Planner
				if sp.plan != nil {
					p := *sp.plan
					planner = func() store.TransitionPlan { return p }
				}
				var (
					att *cloud.Attachment
					err error
					n   int
				)
				switch sp.op {
				case "attach":
					att, err = s.Attach(vols[sp.vol-1], sp.inst, nil, planner)
				case "detach":
					att, err = s.Detach(vols[sp.vol-1], sp.inst, planner)
				case "advance":
					clk.advance(sp.d)
				case "complete":
					n, _, err = s.CompleteDue(live)
				case "release":
					n, err = s.ReleaseStuck("test")
				}
				if cloud.CodeOf(err) != sp.code || (sp.code == "" && err != nil) {
					t.Fatalf("%s: err %v, want code %q", where, err, sp.code)
				}
				if (sp.op == "complete" || sp.op == "release") && n != sp.done {
					t.Fatalf("%s: %d done, want %d", where, n, sp.done)
				}
				if att != nil && att.State != sp.state {
					t.Fatalf("%s: answer %+v, want state %s", where, att, sp.state)
				}
				if sp.noCheck {
					continue
				}
				v, err := s.GetVolume(vols[sp.vol-1])
				if err != nil {
					t.Fatal(err)
				}
				if v.State != sp.state || v.StateSince == nil {
					t.Fatalf("%s: volume %+v, want state %s with a since", where, v, sp.state)
				}
				if v.State == cloud.StateError && (v.ErrorCode == "" || !strings.Contains(v.ErrorMessage, "failed")) {
					t.Fatalf("%s: volume in error without a code and message: %+v", where, v)
				}
				c, err := s.Capacity("n")
				if err != nil {
					t.Fatal(err)
				}
				q, err := s.Quotas()
				if err != nil {
					t.Fatal(err)
				}
				if got := [3]int{c.Attaching, c.Detaching, c.Failed}; c.Attached != sp.held || got != sp.counts || q.Attachments.Used != int64(sp.held) {
					t.Fatalf("%s: capacity %+v, quota used %d; want %d held, (attaching, detaching, failed) %v", where, c, q.Attachments.Used, sp.held, sp.counts)
				}
			}
		})
	}
}

// TestTransitionEvents: each transition is one event at its start and one at its end, the
// end's Attached counting the slots still held, and a synchronous transition only its end.
func TestTransitionEvents(t *testing.T) {
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s, err := store.Open("", store.Options{Now: clk.Now, AttachDuration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.SeedIfEmpty(testState()); err != nil {
		t.Fatal(err)
	}
	v, err := s.CreateVolume(cloud.CreateVolumeRequest{Name: "v", SizeBytes: 1, Zone: "z"})
	if err != nil {
		t.Fatal(err)
	}
	_, rev, err := s.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Attach(v.ID, "n", nil, nil); err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Second)
	if n, _, err := s.CompleteDue(nil); err != nil || n != 1 {
		t.Fatalf("complete: %d, %v", n, err)
	}
	if _, err := s.Detach(v.ID, "n", nil); err != nil { // detach duration 0: synchronous
		t.Fatal(err)
	}
	events, _, err := s.Events(rev)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range events {
		got = append(got, fmt.Sprintf("%s:%d", ev.Type, *ev.Attached))
	}
	if want := "VolumeAttaching:1 VolumeAttached:1 VolumeDetached:0"; strings.Join(got, " ") != want {
		t.Fatalf("events %v, want %s", got, want)
	}
}

// TestCompleteDueReportsNext: the next wake is the earliest due transition, or a live rule's
// expiry for one it holds, and nothing for one a rule holds without expiry.
func TestCompleteDueReportsNext(t *testing.T) {
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s, err := store.Open("", store.Options{Now: clk.Now, AttachDuration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.SeedIfEmpty(testState()); err != nil {
		t.Fatal(err)
	}
	start := clk.Now()
	expires := start.Add(time.Minute)
	rules := func(id string) (bool, time.Time) {
		switch id {
		case "ttl":
			return true, expires
		case "forever":
			return true, time.Time{}
		}
		return false, time.Time{}
	}
	for i, rule := range []string{"forever", "ttl"} {
		v, err := s.CreateVolume(cloud.CreateVolumeRequest{Name: fmt.Sprint(i), SizeBytes: 1, Zone: "z"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Attach(v.ID, "n", nil, func() store.TransitionPlan { return store.TransitionPlan{Stuck: true, Rule: rule} }); err != nil {
			t.Fatal(err)
		}
	}
	if n, next, err := s.CompleteDue(rules); err != nil || n != 0 || !next.Equal(expires) {
		t.Fatalf("CompleteDue: %d, next %v, %v; want 0 and the ttl rule's expiry %v", n, next, err, expires)
	}
	v, err := s.CreateVolume(cloud.CreateVolumeRequest{Name: "free", SizeBytes: 1, Zone: "z"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Attach(v.ID, "n", nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, next, err := s.CompleteDue(rules); err != nil || !next.Equal(start.Add(time.Second)) {
		t.Fatalf("CompleteDue: next %v, %v; want the free attach's due time", next, err)
	}
	clk.advance(time.Minute)
	if n, next, err := s.CompleteDue(rules); err != nil || n != 2 || !next.IsZero() {
		t.Fatalf("CompleteDue after the ttl: %d, next %v, %v; want 2 and no next (one held forever)", n, next, err)
	}
}

// TestTransitionsSurviveReopen: a transition under way is in the store, not in memory: a
// store reopened on the same directory completes it when due, once.
func TestTransitionsSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s, err := store.Open(dir, store.Options{Now: clk.Now, AttachDuration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SeedIfEmpty(testState()); err != nil {
		t.Fatal(err)
	}
	v, err := s.CreateVolume(cloud.CreateVolumeRequest{Name: "v", SizeBytes: 1, Zone: "z"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Attach(v.ID, "n", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Hour)
	s, err = store.Open(dir, store.Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 2 {
		if _, _, err := s.CompleteDue(nil); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.GetVolume(v.ID)
	if err != nil || got.State != cloud.StateAttached {
		t.Fatalf("after reopen: %+v, %v; want attached", got, err)
	}
	events, _, err := s.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, ev := range events {
		count[ev.Type]++
	}
	if count["VolumeAttaching"] != 1 || count["VolumeAttached"] != 1 {
		t.Fatalf("events %v: want one VolumeAttaching and one VolumeAttached", count)
	}
}

// TestInstanceTypeDurations: an instance type's own durations replace the store's, 0 making
// its transitions synchronous; out-of-range durations are refused with the seed.
func TestInstanceTypeDurations(t *testing.T) {
	zero, long := 0, 5000
	st := testState()
	st.InstanceTypes = append(st.InstanceTypes, cloud.InstanceType{Name: "instant", MaxAttachments: 4, AttachDurationMS: &zero, DetachDurationMS: &long})
	st.Instances = append(st.Instances, store.SeedInstance{CreateInstanceRequest: cloud.CreateInstanceRequest{ID: "i", Zone: "z", InstanceType: "instant"}})
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s, err := store.Open("", store.Options{Now: clk.Now, AttachDuration: time.Second, DetachDuration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.SeedIfEmpty(st); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		inst           string
		attach, detach cloud.AttachState
		detachDue      time.Duration
	}{
		{"n", cloud.StateAttaching, cloud.StateDetaching, time.Second},
		{"i", cloud.StateAttached, cloud.StateDetaching, 5 * time.Second},
	} {
		v, err := s.CreateVolume(cloud.CreateVolumeRequest{Name: "v-" + tc.inst, SizeBytes: 1, Zone: "z"})
		if err != nil {
			t.Fatal(err)
		}
		a, err := s.Attach(v.ID, tc.inst, nil, nil)
		if err != nil || a.State != tc.attach {
			t.Fatalf("attach on %s: %+v, %v; want %s", tc.inst, a, err, tc.attach)
		}
		if tc.attach == cloud.StateAttaching {
			clk.advance(time.Second)
			if _, _, err := s.CompleteDue(nil); err != nil {
				t.Fatal(err)
			}
		}
		d, err := s.Detach(v.ID, tc.inst, nil)
		if err != nil || d.State != tc.detach || d.Due == nil || d.Due.Sub(d.Since) != tc.detachDue {
			t.Fatalf("detach on %s: %+v, %v; want %s due after %v", tc.inst, d, err, tc.detach, tc.detachDue)
		}
	}
	bad := testState()
	neg, huge := -1, cloud.MaxTransitionMS+1
	bad.InstanceTypes[0].AttachDurationMS, bad.InstanceTypes[0].DetachDurationMS = &neg, &huge
	err = bad.Validate()
	if err == nil || !strings.Contains(err.Error(), "attachDurationMs") || !strings.Contains(err.Error(), "detachDurationMs") {
		t.Fatalf("Validate of bad durations: %v; want both named", err)
	}
}
