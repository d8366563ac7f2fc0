package server_test

import (
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

// serveIn sends one request straight to h and returns the recorded answer.
func serveIn(ctx context.Context, h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequestWithContext(ctx, method, path, strings.NewReader(body))
	if body == "" {
		req = httptest.NewRequestWithContext(ctx, method, path, nil)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestAbandonedRequestDoesNotUndoALaterOne: an attach or detach whose caller gave up during
// injected latency, and that a later request on the same volume overtook (answered OK
// meanwhile), is dropped when its latency ends instead of undoing the later one: the volume
// ends as the last answered request left it, a RequestSuperseded event says what was
// dropped, and the dropped request is answered Unavailable (issue 24, item 10: before, an
// attachment nothing tracked stayed after ControllerUnpublishVolume answered OK, and a
// volume was detached under a pod after ControllerPublishVolume answered OK).
func TestAbandonedRequestDoesNotUndoALaterOne(t *testing.T) {
	tests := []struct {
		name string
		// attached: the volume is attached to node-a before the slow request.
		attached bool
		slow     cloud.Operation
		slowPath string
		// then is the request answered while the slow one waits.
		thenPath string
		want     cloud.AttachState
	}{
		{"abandoned attach, then a detach", false, cloud.OperationAttachVolume, "attach", "detach", cloud.StateDetached},
		{"abandoned detach, then an attach", true, cloud.OperationDetachVolume, "detach", "attach", cloud.StateAttached},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, entered, release := gatedServer(t)
			ctx := context.Background()
			v := createVolume(t, h)
			body := `{"instanceId":"node-a"}`
			if tt.attached {
				if rec := serveIn(ctx, h, http.MethodPost, "/v1/volumes/"+v.ID+"/attach", body); rec.Code != http.StatusOK {
					t.Fatalf("attach: %d %s", rec.Code, rec.Body)
				}
			}
			addLatency(t, h, tt.slow, v.ID)

			// The slow request: its caller gives up during the latency.
			callerCtx, giveUp := context.WithCancel(ctx)
			slowDone := make(chan *httptest.ResponseRecorder, 1)
			go func() { slowDone <- serveIn(callerCtx, h, http.MethodPost, "/v1/volumes/"+v.ID+"/"+tt.slowPath, body) }()
			<-entered
			giveUp()
			// A later request on the same volume, answered OK.
			if rec := serveIn(ctx, h, http.MethodPost, "/v1/volumes/"+v.ID+"/"+tt.thenPath, body); rec.Code != http.StatusOK {
				t.Fatalf("%s while the %s waits: %d %s", tt.thenPath, tt.slowPath, rec.Code, rec.Body)
			}
			close(release) // the latency is over
			slow := <-slowDone

			rec := serveIn(ctx, h, http.MethodGet, "/v1/volumes/"+v.ID, "")
			var got cloud.Volume
			if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &got) != nil {
				t.Fatalf("get volume: %d %s", rec.Code, rec.Body)
			}
			if got.State != tt.want {
				t.Fatalf("volume %s after the abandoned %s ran out its latency, the last answered request being a %s: state %s, want %s",
					v.ID, tt.slowPath, tt.thenPath, got.State, tt.want)
			}
			var e cloud.Error
			if slow.Code != http.StatusServiceUnavailable || json.Unmarshal(slow.Body.Bytes(), &e) != nil || !strings.Contains(e.Message, "superseded") {
				t.Errorf("the abandoned %s: %d %s, want 503 Unavailable saying it was superseded", tt.slowPath, slow.Code, slow.Body)
			}
			rec = serveIn(ctx, h, http.MethodGet, "/v1/events?sinceSeq=0&maxResults=1000", "")
			if !strings.Contains(rec.Body.String(), `"type":"RequestSuperseded"`) {
				t.Errorf("events lack RequestSuperseded: %s", rec.Body)
			}
		})
	}
}

// TestSlowAttachNotOvertakenStillRuns: an attach whose caller gave up during injected latency
// and that no later request on the volume overtook is still carried out (docs/attach.md):
// the order rule drops only a request a later one overtook.
func TestSlowAttachNotOvertakenStillRuns(t *testing.T) {
	h, entered, release := gatedServer(t)
	ctx := context.Background()
	v := createVolume(t, h)
	addLatency(t, h, cloud.OperationAttachVolume, v.ID)
	callerCtx, giveUp := context.WithCancel(ctx)
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		done <- serveIn(callerCtx, h, http.MethodPost, "/v1/volumes/"+v.ID+"/attach", `{"instanceId":"node-a"}`)
	}()
	<-entered
	giveUp() // the caller leaves; nothing overtakes the attach
	close(release)
	if rec := <-done; rec.Code != http.StatusOK {
		t.Fatalf("abandoned attach not overtaken: %d %s, want it carried out (200)", rec.Code, rec.Body)
	}
	rec := serveIn(ctx, h, http.MethodGet, "/v1/volumes/"+v.ID, "")
	var got cloud.Volume
	if json.Unmarshal(rec.Body.Bytes(), &got) != nil || got.State != cloud.StateAttached {
		t.Fatalf("volume after the abandoned attach: %s, want attached", rec.Body)
	}
}

// gatedServer is a fake cloud (no auth, testSeed) whose injected latency waits until the test
// closes release (or the request's context ends); entered receives once per request that
// starts waiting. The server is closed when the test ends.
func gatedServer(t *testing.T) (h http.Handler, entered <-chan struct{}, release chan struct{}) {
	t.Helper()
	in := make(chan struct{}, 1)
	release = make(chan struct{})
	sleep := func(ctx context.Context, _ time.Duration) error {
		in <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	srv, err := server.New(server.Config{Auth: server.AuthNone, Seed: testSeed(), Sleep: sleep})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv.Handler(), in, release
}

// createVolume creates a 1-byte volume in zone-a through h.
func createVolume(t *testing.T, h http.Handler) cloud.Volume {
	t.Helper()
	rec := serveIn(context.Background(), h, http.MethodPost, "/v1/volumes", `{"name":"v","sizeBytes":1,"zone":"zone-a"}`)
	var v cloud.Volume
	if rec.Code != http.StatusCreated || json.Unmarshal(rec.Body.Bytes(), &v) != nil {
		t.Fatalf("create volume: %d %s", rec.Code, rec.Body)
	}
	return v
}

// addLatency adds a fault rule that delays op on volume volID by 30 s (the gate decides).
func addLatency(t *testing.T, h http.Handler, op cloud.Operation, volID string) {
	t.Helper()
	rule := mustJSON(t, cloud.FaultRule{Operation: op, VolumeID: volID, LatencyMS: 30000})
	if rec := serveIn(context.Background(), h, http.MethodPost, "/v1/faults", rule); rec.Code != http.StatusCreated {
		t.Fatalf("create fault: %d %s", rec.Code, rec.Body)
	}
}

// TestRepeatOvertakenByItsTwinRuns: an attach or detach overtaken by its twin (the same
// operation, instance and mode, arriving later and carried out first) is not dropped: it
// cannot undo its twin, so it runs as the idempotent repeat it is and answers OK with the
// attachment its twin left, and no RequestSuperseded is recorded. Before, it was answered 503
// superseded: the driver's retries of one publish, sent together, overtook one another on a
// loaded machine and the CO got UNAVAILABLE for an attach under way exactly as it asked
// (TestPublishSlowerThanDeadline, tests/sanity). A request overtaken by one that asks
// something else (here the same attach in the other mode) is still dropped.
func TestRepeatOvertakenByItsTwinRuns(t *testing.T) {
	tests := []struct {
		name string
		// attached: the volume is attached to node-a before the slow request.
		attached           bool
		slow               cloud.Operation
		slowPath, slowBody string
		// twinBody is the body of the request, to slowPath, that overtakes the slow one.
		twinBody string
		// superseded: the slow request is dropped (503); else it runs (200).
		superseded bool
		want       cloud.AttachState
	}{
		{"attach overtaken by its twin", false, cloud.OperationAttachVolume, "attach", `{"instanceId":"node-a"}`, `{"instanceId":"node-a"}`, false, cloud.StateAttached},
		{"read-only attach overtaken by its twin", false, cloud.OperationAttachVolume, "attach", `{"instanceId":"node-a","readOnly":true}`, `{"instanceId":"node-a","readOnly":true}`, false, cloud.StateAttached},
		{"detach overtaken by its twin", true, cloud.OperationDetachVolume, "detach", `{"instanceId":"node-a"}`, `{"instanceId":"node-a"}`, false, cloud.StateDetached},
		{"attach overtaken by the attach in the other mode", false, cloud.OperationAttachVolume, "attach", `{"instanceId":"node-a"}`, `{"instanceId":"node-a","readOnly":true}`, true, cloud.StateAttached},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, entered, release := gatedServer(t)
			ctx := context.Background()
			v := createVolume(t, h)
			if tt.attached {
				if rec := serveIn(ctx, h, http.MethodPost, "/v1/volumes/"+v.ID+"/attach", `{"instanceId":"node-a"}`); rec.Code != http.StatusOK {
					t.Fatalf("attach: %d %s", rec.Code, rec.Body)
				}
			}
			// Latency for the first request only: the twin is carried out at once.
			rule := mustJSON(t, cloud.FaultRule{Operation: tt.slow, VolumeID: v.ID, LatencyMS: 30000, Count: 1})
			if rec := serveIn(ctx, h, http.MethodPost, "/v1/faults", rule); rec.Code != http.StatusCreated {
				t.Fatalf("create fault: %d %s", rec.Code, rec.Body)
			}
			// The first request, its caller waiting for the answer, waits out its latency ...
			slowDone := make(chan *httptest.ResponseRecorder, 1)
			go func() { slowDone <- serveIn(ctx, h, http.MethodPost, "/v1/volumes/"+v.ID+"/"+tt.slowPath, tt.slowBody) }()
			<-entered
			// ... while its twin, arriving later, is carried out.
			twin := serveIn(ctx, h, http.MethodPost, "/v1/volumes/"+v.ID+"/"+tt.slowPath, tt.twinBody)
			if twin.Code != http.StatusOK {
				t.Fatalf("the later %s: %d %s", tt.slowPath, twin.Code, twin.Body)
			}
			close(release)
			slow := <-slowDone
			events := serveIn(ctx, h, http.MethodGet, "/v1/events?sinceSeq=0&maxResults=1000", "").Body.String()
			if tt.superseded {
				if slow.Code != http.StatusServiceUnavailable || !strings.Contains(slow.Body.String(), "superseded") {
					t.Errorf("the overtaken %s: %d %s, want 503 superseded", tt.slowPath, slow.Code, slow.Body)
				}
				if !strings.Contains(events, `"type":"RequestSuperseded"`) {
					t.Errorf("events lack RequestSuperseded: %s", events)
				}
			} else {
				var got, want cloud.Attachment
				if slow.Code != http.StatusOK || json.Unmarshal(slow.Body.Bytes(), &got) != nil || json.Unmarshal(twin.Body.Bytes(), &want) != nil {
					t.Fatalf("the %s its twin overtook: %d %s, want 200 with its twin's attachment %s", tt.slowPath, slow.Code, slow.Body, twin.Body)
				}
				type seen struct {
					instance, device string
					state            cloud.AttachState
					readOnly         bool
					since            time.Time
				}
				if g, w := (seen{got.InstanceID, got.Device, got.State, got.ReadOnly, got.Since}), (seen{want.InstanceID, want.Device, want.State, want.ReadOnly, want.Since}); g != w {
					t.Errorf("the %s its twin overtook answered %+v, want its twin's %+v", tt.slowPath, got, want)
				}
				if strings.Contains(events, `"type":"RequestSuperseded"`) {
					t.Errorf("a repeat was recorded as superseded: %s", events)
				}
			}
			rec := serveIn(ctx, h, http.MethodGet, "/v1/volumes/"+v.ID, "")
			var got cloud.Volume
			if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &got) != nil {
				t.Fatalf("get volume: %d %s", rec.Code, rec.Body)
			}
			if got.State != tt.want {
				t.Fatalf("volume %s after the twins: state %s, want %s", v.ID, got.State, tt.want)
			}
		})
	}
}
