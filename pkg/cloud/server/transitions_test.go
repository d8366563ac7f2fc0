package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

// waitVolume polls GET /v1/volumes/{id} until the volume is in state want: an explicit wait
// on state, bounded by time (not by a count of polls, which a loaded machine stretches or
// shrinks), generously so that a slow machine only waits longer.
func waitVolume(t *testing.T, c *admin.Client, id string, want cloud.AttachState) *cloud.Volume {
	t.Helper()
	const bound = 30 * time.Second
	for deadline := time.Now().Add(bound); ; time.Sleep(5 * time.Millisecond) {
		v, err := c.GetVolume(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if v.State == want {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("volume %s not %s within %v; last %+v", id, want, bound, v)
		}
	}
}

func attachment(t *testing.T, r rawResponse) cloud.Attachment {
	t.Helper()
	var a cloud.Attachment
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatalf("attachment %q: %v", r.body, err)
	}
	return a
}

// TestAttachIsAsynchronous walks one volume through attaching → attached → detaching →
// detached over HTTP: 202 while a transition runs (a repeat joins it), 200 once over, the
// state and its start time on GET, the slot held throughout, one event per transition.
func TestAttachIsAsynchronous(t *testing.T) {
	tc := startCloud(t, server.Config{AttachDuration: 100 * time.Millisecond, DetachDuration: 100 * time.Millisecond})
	ctx := context.Background()
	v := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "v", SizeBytes: 1, Zone: "zone-a"}))
	path := "/v1/volumes/" + v.ID
	body := `{"instanceId":"node-a"}`
	steps := []struct {
		action string
		status int
		state  cloud.AttachState
	}{
		{"attach", http.StatusAccepted, cloud.StateAttaching},
		{"attach", http.StatusAccepted, cloud.StateAttaching},
		{"wait", 0, cloud.StateAttached},
		{"attach", http.StatusOK, cloud.StateAttached},
		{"detach", http.StatusAccepted, cloud.StateDetaching},
		{"detach", http.StatusAccepted, cloud.StateDetaching},
		{"attach", http.StatusConflict, cloud.StateDetaching},
		{"wait", 0, cloud.StateDetached},
		{"detach", http.StatusOK, cloud.StateDetached},
	}
	for i, st := range steps {
		if st.action == "wait" {
			got := waitVolume(t, tc.reader, v.ID, st.state)
			if got.StateSince == nil || got.StateSince.Before(v.CreatedAt) {
				t.Fatalf("step %d: %+v: want stateSince", i, got)
			}
			continue
		}
		r := tc.do(t, http.MethodPost, path+"/"+st.action, driverToken, body)
		if r.status != st.status {
			t.Fatalf("step %d: %s answered %d %s, want %d", i, st.action, r.status, r.body, st.status)
		}
		if r.status == http.StatusConflict {
			if e := r.errorBody(t); e.Code != cloud.CodeIncorrectState || !e.Retryable {
				t.Fatalf("step %d: %+v, want retryable IncorrectState", i, e)
			}
		} else if a := attachment(t, r); a.State != st.state || a.Since.IsZero() {
			t.Fatalf("step %d: %s answered %+v, want state %s with since", i, st.action, a, st.state)
		}
		c := must[*cloud.Capacity](t)(tc.reader.GetCapacity(ctx, "node-a"))
		held := 1
		if st.state == cloud.StateDetached {
			held = 0
		}
		if c.Attached != held {
			t.Fatalf("step %d: capacity %+v, want %d slot held", i, c, held)
		}
	}
	var types []string
	for _, ev := range must[[]cloud.Event](t)(tc.reader.ListEvents(ctx, 0)) {
		if ev.VolumeID == v.ID {
			types = append(types, ev.Type)
		}
	}
	if want := []string{"VolumeCreated", "VolumeAttaching", "VolumeAttached", "VolumeDetaching", "VolumeDetached"}; !equal(types, want) {
		t.Fatalf("events %v, want %v", types, want)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestTransitionFaults: a stick rule holds a detach (its slot stays held) until the rule is
// deleted or expires; a fail rule ends an attach in error, releasing the slot; targeting by
// volume leaves the others alone; a joining repeat fires no rule.
func TestTransitionFaults(t *testing.T) {
	tc := startCloud(t, server.Config{DetachDuration: 10 * time.Millisecond})
	ctx := context.Background()
	var vols []string
	for _, name := range []string{"a", "b", "c"} {
		v := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: name, SizeBytes: 1, Zone: "zone-a"}))
		must[*cloud.Attachment](t)(tc.driver.AttachVolume(ctx, v.ID, "node-a"))
		vols = append(vols, v.ID)
	}
	stuck := must[*cloud.FaultRule](t)(tc.admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationDetachVolume, VolumeID: vols[0], Transition: cloud.TransitionStick}))
	expiring := must[*cloud.FaultRule](t)(tc.admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationDetachVolume, VolumeID: vols[1],
		Transition: cloud.TransitionStick, TTLSeconds: 1}))
	for _, id := range vols {
		if a := must[*cloud.Attachment](t)(tc.driver.DetachVolume(ctx, id, "node-a")); a.State != cloud.StateDetaching {
			t.Fatalf("detach %s: %+v", id, a)
		}
	}
	must[*cloud.Attachment](t)(tc.driver.DetachVolume(ctx, vols[0], "node-a")) // joins: fires nothing
	waitVolume(t, tc.reader, vols[2], cloud.StateDetached)                     // not targeted
	if c := must[*cloud.Capacity](t)(tc.reader.GetCapacity(ctx, "node-a")); c.Attached != 2 || c.Detaching != 2 {
		t.Fatalf("capacity %+v: want the 2 held detaches counted", c)
	}
	// GET /v1/instances counts them as the capacity route does (the console draws them).
	for _, in := range must[[]cloud.Instance](t)(tc.reader.ListInstances(ctx)) {
		want := [3]int{}
		if in.ID == "node-a" {
			want = [3]int{0, 2, 0}
		}
		if got := [3]int{in.Attaching, in.Detaching, in.Failed}; got != want {
			t.Fatalf("instance %s: attaching, detaching, failed %v, want %v", in.ID, got, want)
		}
	}
	if m := string(tc.do(t, http.MethodGet, "/metrics", readerToken, "").body); !strings.Contains(m, "\nfakecloud_transitions_pending 2\n") {
		t.Fatalf("metrics lack fakecloud_transitions_pending 2 for the 2 held detaches")
	}
	waitVolume(t, tc.reader, vols[1], cloud.StateDetached) // the TTL ends the hold
	if v := must[*cloud.Volume](t)(tc.reader.GetVolume(ctx, vols[0])); v.State != cloud.StateDetaching {
		t.Fatalf("volume %+v: want still detaching while its rule lives", v)
	}
	for _, r := range must[[]cloud.FaultRule](t)(tc.admin.ListFaults(ctx)) {
		if r.ID == stuck.ID && r.Fired != 1 {
			t.Fatalf("rule %+v fired %d times, want 1 (the joining repeat fires none)", r, r.Fired)
		}
	}
	if err := tc.admin.DeleteFault(ctx, stuck.ID); err != nil {
		t.Fatal(err)
	}
	waitVolume(t, tc.reader, vols[0], cloud.StateDetached)
	_ = expiring

	fail := must[*cloud.FaultRule](t)(tc.admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationAttachVolume, InstanceID: "node-a",
		Transition: cloud.TransitionFail, Error: cloud.CodeAttachmentLimitExceeded, DurationMS: 20, Count: 1}))
	if a := must[*cloud.Attachment](t)(tc.driver.AttachVolume(ctx, vols[0], "node-a")); a.State != cloud.StateAttaching {
		t.Fatalf("attach: %+v", a)
	}
	v := waitVolume(t, tc.reader, vols[0], cloud.StateError)
	if v.ErrorCode != cloud.CodeAttachmentLimitExceeded || v.AttachedTo != "" {
		t.Fatalf("failed attach %+v: want the rule's code and no instance", v)
	}
	if c := must[*cloud.Capacity](t)(tc.reader.GetCapacity(ctx, "node-a")); c.Attached != 0 {
		t.Fatalf("capacity %+v: a failed attach holds no slot", c)
	}
	// The rule fired its one time: the next attach succeeds.
	tc.driver.AttachVolume(ctx, vols[0], "node-a") //nolint:errcheck // checked through the state
	waitVolume(t, tc.reader, vols[0], cloud.StateAttached)
	_ = fail
}

// TestTransitionRulesAreValidated: transition fields are checked with the rest of a rule.
func TestTransitionRulesAreValidated(t *testing.T) {
	tc := startCloud(t, server.Config{})
	ctx := context.Background()
	for _, r := range []cloud.FaultRule{
		{Operation: cloud.OperationGetVolume, Transition: cloud.TransitionStick},
		{Operation: cloud.OperationAttachVolume, Transition: "sometimes"},
		{Operation: cloud.OperationAttachVolume, Transition: cloud.TransitionSlow},
		{Operation: cloud.OperationAttachVolume, Transition: cloud.TransitionSlow, DurationMS: cloud.MaxTransitionMS + 1},
		{Operation: cloud.OperationAttachVolume, Transition: cloud.TransitionStick, DurationMS: 5},
		{Operation: cloud.OperationAttachVolume, Transition: cloud.TransitionFail, LatencyMS: 5},
		{Operation: cloud.OperationAttachVolume, Error: cloud.CodeThrottled, DurationMS: 5},
	} {
		if _, err := tc.admin.CreateFault(ctx, r); cloud.CodeOf(err) != cloud.CodeInvalidArgument {
			t.Errorf("rule %+v: %v, want InvalidArgument", r, err)
		}
	}
}

// TestAttachOutlivesItsCaller: an attach whose caller gives up during injected latency is
// still carried out, as a real cloud carries out a request that arrived.
func TestAttachOutlivesItsCaller(t *testing.T) {
	tc := startCloud(t, server.Config{})
	ctx := context.Background()
	v := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "v", SizeBytes: 1, Zone: "zone-a"}))
	must[*cloud.FaultRule](t)(tc.admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationAttachVolume, LatencyMS: 300}))
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := tc.driver.AttachVolume(short, v.ID, "node-a"); err == nil {
		t.Fatal("the attach answered within 50 ms despite 300 ms of latency")
	}
	waitVolume(t, tc.reader, v.ID, cloud.StateAttached)
}

// TestSeedDurations: a seed file's instance types carry their own durations.
func TestSeedDurations(t *testing.T) {
	path := t.TempDir() + "/seed.yaml"
	if err := os.WriteFile(path, []byte("instanceTypes: [{name: t, maxAttachments: 4, attachDurationMs: 0, detachDurationMs: 2500}]\n"+
		"instances: [{id: node-x, zone: zone-a, instanceType: t}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	seed, err := server.LoadSeed(path)
	if err != nil {
		t.Fatal(err)
	}
	it := seed.InstanceTypes[0]
	if it.AttachDurationMS == nil || *it.AttachDurationMS != 0 || it.DetachDurationMS == nil || *it.DetachDurationMS != 2500 {
		t.Fatalf("instance type %+v: want attach 0 (set, not absent) and detach 2500", it)
	}
}

// TestReadOnlyAttachThroughTransitions: a read-only attach keeps its mode from attaching to
// attached (completed by the transition worker) and while detaching; the other mode is
// AlreadyExists while attaching too; a detach body with readOnly is refused and changes
// nothing.
func TestReadOnlyAttachThroughTransitions(t *testing.T) {
	tc := startCloud(t, server.Config{AttachDuration: 50 * time.Millisecond, DetachDuration: 50 * time.Millisecond})
	ctx := context.Background()
	v := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "ro", SizeBytes: 1, Zone: "zone-a"}))
	a := must[*cloud.Attachment](t)(tc.driver.Attach(ctx, v.ID, cloud.AttachRequest{InstanceID: "node-a", ReadOnly: true}))
	if a.State != cloud.StateAttaching || !a.ReadOnly {
		t.Fatalf("attach = %+v, want attaching read-only", a)
	}
	_, err := tc.driver.AttachVolume(ctx, v.ID, "node-a")
	wantCode(t, err, cloud.CodeAlreadyExists)
	if got := waitVolume(t, tc.reader, v.ID, cloud.StateAttached); !got.ReadOnly {
		t.Errorf("attached volume %+v lost its read-only mode", got)
	}
	r := tc.do(t, http.MethodPost, "/v1/volumes/"+v.ID+"/detach", driverToken, `{"instanceId":"node-a","readOnly":true}`)
	if r.status != http.StatusBadRequest {
		t.Errorf("detach with readOnly: status %d %s, want 400", r.status, r.body)
	}
	d := must[*cloud.Attachment](t)(tc.driver.DetachVolume(ctx, v.ID, "node-a"))
	if d.State != cloud.StateDetaching || !d.ReadOnly {
		t.Errorf("detach = %+v, want detaching, still read-only", d)
	}
	if got := waitVolume(t, tc.reader, v.ID, cloud.StateDetached); got.ReadOnly {
		t.Errorf("detached volume %+v still says read-only", got)
	}
}
