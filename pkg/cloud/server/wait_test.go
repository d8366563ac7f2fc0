package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

// waitPath is the wait of volume id for want on node-a, bounded by ms.
func waitPath(id string, want cloud.AttachState, ms int) string {
	return fmt.Sprintf("/v1/volumes/%s?waitFor=%s&instanceId=node-a&timeoutMs=%d", id, want, ms)
}

// waitAnswer checks a wait's answer: 200, X-Wait outcome, the volume in state.
func waitAnswer(t *testing.T, r rawResponse, outcome string, state cloud.AttachState) {
	t.Helper()
	if r.status != http.StatusOK || r.header.Get(cloud.WaitHeader) != outcome {
		t.Fatalf("wait answered %d %s: %s, want 200 with %s: %s", r.status, cloud.WaitHeader, r.header.Get(cloud.WaitHeader), cloud.WaitHeader, outcome)
	}
	var v cloud.Volume
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("wait body %q: %v", r.body, err)
	}
	if v.State != state {
		t.Fatalf("wait answered volume %+v, want state %s", v, state)
	}
}

// stuckVolume creates a volume and starts its attach to node-a (and, with detach, its
// detach after the attach completed), held by a stick rule; it returns the volume and the
// rule, whose deletion lets the transition complete.
func stuckVolume(t *testing.T, tc *testCloud, op cloud.Operation) (vol, rule string) {
	t.Helper()
	ctx := context.Background()
	v := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "v-" + string(op), SizeBytes: 1, Zone: "zone-a"}))
	if op == cloud.OperationDetachVolume {
		must[*cloud.Attachment](t)(tc.driver.AttachVolume(ctx, v.ID, "node-a"))
		waitVolume(t, tc.reader, v.ID, cloud.StateAttached)
	}
	r := must[*cloud.FaultRule](t)(tc.admin.CreateFault(ctx, cloud.FaultRule{Operation: op, VolumeID: v.ID, Transition: cloud.TransitionStick}))
	if op == cloud.OperationDetachVolume {
		must[*cloud.Attachment](t)(tc.driver.DetachVolume(ctx, v.ID, "node-a"))
	} else {
		must[*cloud.Attachment](t)(tc.driver.AttachVolume(ctx, v.ID, "node-a"))
	}
	return v.ID, r.ID
}

// TestWaitEndsWithTheTransition: a wait for attached (detached) answers the volume still
// attaching (detaching) with X-Wait: timeout when its bound comes first, not before the
// bound, and answers it attached (detached) with X-Wait: changed once the transition ends;
// a wait for what is already over answers at once.
func TestWaitEndsWithTheTransition(t *testing.T) {
	for _, tc := range []struct {
		op         cloud.Operation
		want, from cloud.AttachState
	}{
		{cloud.OperationAttachVolume, cloud.StateAttached, cloud.StateAttaching},
		{cloud.OperationDetachVolume, cloud.StateDetached, cloud.StateDetaching},
	} {
		t.Run(string(tc.want), func(t *testing.T) {
			c := startCloud(t, server.Config{AttachDuration: 20 * time.Millisecond, DetachDuration: 20 * time.Millisecond})
			id, rule := stuckVolume(t, c, tc.op)
			start := time.Now()
			r := c.do(t, http.MethodGet, waitPath(id, tc.want, 50), readerToken, "")
			waitAnswer(t, r, cloud.WaitTimeout, tc.from)
			if took := time.Since(start); took < 50*time.Millisecond {
				t.Fatalf("a wait bounded by 50 ms answered after %v with the transition still under way", took)
			}
			done := make(chan rawResponse, 1)
			go func() { done <- c.do(t, http.MethodGet, waitPath(id, tc.want, cloud.MaxWaitMS), readerToken, "") }()
			if err := c.admin.DeleteFault(context.Background(), rule); err != nil {
				t.Fatal(err)
			}
			waitAnswer(t, <-done, cloud.WaitChanged, tc.want)
			waitAnswer(t, c.do(t, http.MethodGet, waitPath(id, tc.want, cloud.MaxWaitMS), readerToken, ""), cloud.WaitChanged, tc.want)
		})
	}
}

// TestWaitEndsOnFailure: an attach a fail rule ends in error ends the wait with the volume
// in state error, its code and message.
func TestWaitEndsOnFailure(t *testing.T) {
	c := startCloud(t, server.Config{AttachDuration: 20 * time.Millisecond})
	ctx := context.Background()
	v := must[*cloud.Volume](t)(c.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "v", SizeBytes: 1, Zone: "zone-a"}))
	must[*cloud.FaultRule](t)(c.admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationAttachVolume, VolumeID: v.ID,
		Transition: cloud.TransitionFail, Error: cloud.CodeAttachmentLimitExceeded, DurationMS: 100}))
	must[*cloud.Attachment](t)(c.driver.AttachVolume(ctx, v.ID, "node-a"))
	got := must[*cloud.Volume](t)(c.reader.WaitVolume(ctx, v.ID, cloud.VolumeWait{For: cloud.StateAttached, InstanceID: "node-a", Timeout: cloud.MaxWaitMS * time.Millisecond}))
	if got.State != cloud.StateError || got.ErrorCode != cloud.CodeAttachmentLimitExceeded {
		t.Fatalf("wait answered %+v, want state error with AttachmentLimitExceeded", got)
	}
}

// TestWaitEndsOnReset: a volume that goes during the wait (a reset drops every volume) ends
// the wait with 404 VolumeNotFound, as a read of it would; a wait on a volume that does not
// exist is the same.
func TestWaitEndsOnReset(t *testing.T) {
	c := startCloud(t, server.Config{AttachDuration: 20 * time.Millisecond})
	id, _ := stuckVolume(t, c, cloud.OperationAttachVolume)
	done := make(chan error, 1)
	go func() {
		_, err := c.reader.WaitVolume(context.Background(), id, cloud.VolumeWait{For: cloud.StateAttached, InstanceID: "node-a", Timeout: cloud.MaxWaitMS * time.Millisecond})
		done <- err
	}()
	if err := c.admin.Reset(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantCode(t, <-done, cloud.CodeVolumeNotFound)
	_, err := c.reader.WaitVolume(context.Background(), "vol-missing", cloud.VolumeWait{For: cloud.StateDetached, InstanceID: "node-a"})
	wantCode(t, err, cloud.CodeVolumeNotFound)
}

// TestWaitRefusesBadQueries: every malformed query of GET /v1/volumes/{id} is 400
// InvalidArgument naming the parameter (with what it was likely meant to be), before any
// wait, and changes nothing.
func TestWaitRefusesBadQueries(t *testing.T) {
	c := startCloud(t, server.Config{})
	v := must[*cloud.Volume](t)(c.driver.CreateVolume(context.Background(), cloud.CreateVolumeRequest{Name: "v", SizeBytes: 1, Zone: "zone-a"}))
	before := c.snapshot(t)
	for _, tc := range []struct{ query, want string }{
		{"waitfor=attached&instanceId=node-a", `unknown query parameter "waitfor"; did you mean "waitFor"?`},
		{"waitFor=attached&instanceID=node-a", `unknown query parameter "instanceID"; did you mean "instanceId"?`},
		{"waitFor=attached&instanceId=node-a&timeout=5", `unknown query parameter "timeout"; did you mean "timeoutMs"?`},
		{"maxResults=1", `unknown query parameter "maxResults"`},
		{"waitFor=attach&instanceId=node-a", `waitFor must be attached or detached, got "attach"; did you mean "attached"?`},
		{"waitFor=Detached&instanceId=node-a", `did you mean "detached"?`},
		{"waitFor=attaching&instanceId=node-a", `waitFor must be attached or detached, got "attaching"`},
		{"waitFor=&instanceId=node-a", `waitFor must be attached or detached, got ""`},
		{"waitFor=attached", "waitFor needs instanceId"},
		{"waitFor=attached&instanceId=", "instanceId"},
		{"waitFor=attached&instanceId=..", "instanceId"},
		{"waitFor=attached&instanceId=" + strings.Repeat("x", cloud.MaxIDBytes+1), "instanceId"},
		{"instanceId=node-a", "instanceId and timeoutMs go with waitFor"},
		{"timeoutMs=5", "instanceId and timeoutMs go with waitFor"},
		{"waitFor=attached&instanceId=node-a&timeoutMs=-1", "timeoutMs must be a whole number of milliseconds in [0, 20000]"},
		{"waitFor=attached&instanceId=node-a&timeoutMs=20001", "timeoutMs must be a whole number of milliseconds in [0, 20000]"},
		{"waitFor=attached&instanceId=node-a&timeoutMs=1.5", "timeoutMs must be a whole number"},
		{"waitFor=attached&instanceId=node-a&timeoutMs=", "timeoutMs must be a whole number"},
		{"waitFor=attached&waitFor=detached&instanceId=node-a", "query parameter waitFor given 2 times"},
		// URL.Query dropped these pairs without a word: a plain read, or the default bound.
		{"waitFor=attached;instanceId=node-a", "separate parameters with &, not ;"},
		{"waitFor=attached&instanceId=node-a&timeoutMs=5;x", "separate parameters with &, not ;"},
	} {
		r := c.do(t, http.MethodGet, "/v1/volumes/"+v.ID+"?"+tc.query, readerToken, "")
		if r.status != http.StatusBadRequest {
			t.Errorf("?%s: %d %s, want 400", tc.query, r.status, r.body)
			continue
		}
		if e := r.errorBody(t); e.Code != cloud.CodeInvalidArgument || !strings.Contains(e.Message, tc.want) {
			t.Errorf("?%s: %s %q, want InvalidArgument saying %q", tc.query, e.Code, e.Message, tc.want)
		}
	}
	if after := c.snapshot(t); after.Revision != before.Revision {
		t.Errorf("refused queries changed the revision: %d -> %d", before.Revision, after.Revision)
	}
}

// TestWaitsAreBounded: past Config.MaxWaits open waits, one more is 429 Throttled with
// X-Wait: busy and Retry-After at once, and the client reports it as ErrWaitBusy; once the
// waits end (their callers left), a wait is served again.
func TestWaitsAreBounded(t *testing.T) {
	c := startCloud(t, server.Config{AttachDuration: 20 * time.Millisecond, MaxWaits: 2})
	id, _ := stuckVolume(t, c, cloud.OperationAttachVolume)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Two waits that hold both slots until the test leaves them; each says how it ended.
	ended := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := c.reader.WaitVolume(ctx, id, cloud.VolumeWait{For: cloud.StateAttached, InstanceID: "node-a", Timeout: cloud.MaxWaitMS * time.Millisecond})
			ended <- err
		}()
	}
	// The third wait is asked for only once the cloud says both are open: asked earlier, it
	// takes a slot itself while it is answered, and one of the two is refused instead (a
	// loaded machine did that, and the test then saw the third served).
	untilOpenWaits(t, c, 2, ended)
	busy := c.do(t, http.MethodGet, waitPath(id, cloud.StateAttached, 0), readerToken, "")
	if busy.status != http.StatusTooManyRequests || busy.header.Get(cloud.WaitHeader) != cloud.WaitBusy || busy.header.Get("Retry-After") == "" {
		t.Fatalf("third wait: %d %v %s, want 429 with X-Wait: busy and Retry-After", busy.status, busy.header, busy.body)
	}
	if e := busy.errorBody(t); e.Code != cloud.CodeThrottled || !strings.Contains(e.Message, "2 waits") {
		t.Errorf("third wait: %s %q, want Throttled naming the bound", e.Code, e.Message)
	}
	_, err := c.reader.WaitVolume(context.Background(), id, cloud.VolumeWait{For: cloud.StateAttached, InstanceID: "node-a"})
	if !errors.Is(err, cloud.ErrWaitBusy) || cloud.CodeOf(err) != cloud.CodeThrottled {
		t.Errorf("client: %v, want ErrWaitBusy with code Throttled", err)
	}
	cancel()
	for range 2 {
		if err := <-ended; !errors.Is(err, context.Canceled) {
			t.Errorf("a held wait ended with %v, want its caller's cancellation", err)
		}
	}
	// The server sees the callers leave a little after they did.
	untilOpenWaits(t, c, 0, nil)
	waitAnswer(t, c.do(t, http.MethodGet, waitPath(id, cloud.StateAttached, 0), readerToken, ""), cloud.WaitTimeout, cloud.StateAttaching)
}

// openWaitsDeadline bounds untilOpenWaits: opening or ending a wait takes milliseconds, and
// seconds on a machine loaded tenfold; a wait the test holds ends by itself after
// cloud.MaxWaitMS, so waiting longer than that for it to open says nothing more.
const openWaitsDeadline = 30 * time.Second

// untilOpenWaits scrapes /metrics until fakecloud_waits_open is n. A wait that ends on
// ended meanwhile (it was to stay open) fails the test with its error.
func untilOpenWaits(t *testing.T, c *testCloud, n int, ended <-chan error) {
	t.Helper()
	want := fmt.Sprintf("\nfakecloud_waits_open %d\n", n)
	deadline := time.Now().Add(openWaitsDeadline)
	for {
		r := c.do(t, http.MethodGet, "/metrics", readerToken, "")
		if r.status != http.StatusOK {
			t.Fatalf("GET /metrics: %d %s", r.status, r.body)
		}
		if strings.Contains(string(r.body), want) {
			return
		}
		select {
		case err := <-ended:
			t.Fatalf("a wait meant to stay open ended before %d were open: %v", n, err)
		default:
		}
		if time.Now().After(deadline) {
			i := strings.Index(string(r.body), "\nfakecloud_waits_open ")
			t.Fatalf("fakecloud_waits_open not %d within %v; last scrape: %.40s", n, openWaitsDeadline, string(r.body[i+1:]))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWaitsLeaveNoGoroutines: waits that time out and waits whose callers leave end their
// goroutines (the server's and the store's watch): none is left behind.
func TestWaitsLeaveNoGoroutines(t *testing.T) {
	c := startCloud(t, server.Config{AttachDuration: 20 * time.Millisecond})
	id, _ := stuckVolume(t, c, cloud.OperationAttachVolume)
	// No keep-alive: an idle connection's goroutines would count as left behind.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	cl, err := admin.NewClient(c.url, cloud.WithToken(readerToken), cloud.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	wait := func(ctx context.Context, d time.Duration) error {
		_, err := cl.WaitVolume(ctx, id, cloud.VolumeWait{For: cloud.StateAttached, InstanceID: "node-a", Timeout: d})
		return err
	}
	if err := wait(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	base := runtime.NumGoroutine()
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			if i%2 == 0 {
				if err := wait(context.Background(), 20*time.Millisecond); err != nil {
					t.Errorf("timed-out wait: %v", err)
				}
				return
			}
			// Cancelled, not a deadline: the client would bound the wait by a deadline.
			ctx, cancel := context.WithCancel(context.Background())
			stop := time.AfterFunc(30*time.Millisecond, cancel)
			defer stop.Stop()
			if err := wait(ctx, cloud.MaxWaitMS*time.Millisecond); !errors.Is(err, context.Canceled) {
				t.Errorf("abandoned wait: %v, want the caller's cancellation", err)
			}
		})
	}
	wg.Wait()
	// The server's goroutines end a little after their callers got their answers: on a
	// loaded machine, seconds after. (Not untilOpenWaits: its keep-alive connection would
	// count as goroutines left behind.)
	n := 0
	for deadline := time.Now().Add(openWaitsDeadline); ; time.Sleep(5 * time.Millisecond) {
		if n = runtime.NumGoroutine(); n <= base || time.Now().After(deadline) {
			break
		}
	}
	if n > base {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after 64 waits ended, %d before:\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}

// TestWaitMeetsGetVolumeFaults: a fault rule on GetVolume acts on a wait as on a read, before
// any wait: its error is the wait's answer, and the next wait, the rule spent, waits.
func TestWaitMeetsGetVolumeFaults(t *testing.T) {
	c := startCloud(t, server.Config{AttachDuration: 20 * time.Millisecond})
	id, _ := stuckVolume(t, c, cloud.OperationAttachVolume)
	ctx := context.Background()
	must[*cloud.FaultRule](t)(c.admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationGetVolume, VolumeID: id, Error: cloud.CodeUnavailable, Count: 1}))
	w := cloud.VolumeWait{For: cloud.StateAttached, InstanceID: "node-a", Timeout: 10 * time.Millisecond}
	_, err := c.reader.WaitVolume(ctx, id, w)
	wantCode(t, err, cloud.CodeUnavailable)
	v := must[*cloud.Volume](t)(c.reader.WaitVolume(ctx, id, w))
	if v.State != cloud.StateAttaching {
		t.Fatalf("wait after the rule: %+v, want still attaching", v)
	}
}
