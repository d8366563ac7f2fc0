package cloud_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// TestWaitVolume: WaitVolume sends the wait's query with its bound clamped to the most the
// cloud takes and to the context's deadline, returns the volume when the cloud waited
// (X-Wait: changed or timeout), ErrWaitUnsupported when it answered without waiting (a cloud
// from before waits ignores the query), ErrWaitBusy with the Throttled error when it holds
// all the waits it may, and the cloud's error otherwise; a bad wait is refused unsent.
func TestWaitVolume(t *testing.T) {
	const vol = `{"id":"vol-1","state":"attached","attachedTo":"node-1"}`
	for _, tc := range []struct {
		name     string
		status   int
		header   string // X-Wait
		body     string
		w        cloud.VolumeWait
		deadline time.Duration // 0: none
		query    string        // the query the cloud must get; "" when nothing is sent
		wantErr  error
		wantCode cloud.Code
	}{
		{name: "changed", status: 200, header: cloud.WaitChanged, body: vol,
			w:     cloud.VolumeWait{For: cloud.StateAttached, InstanceID: "node-1", Timeout: 5 * time.Second},
			query: "instanceId=node-1&timeoutMs=5000&waitFor=attached"},
		{name: "timeout", status: 200, header: cloud.WaitTimeout, body: vol,
			w:     cloud.VolumeWait{For: cloud.StateDetached, InstanceID: "node-1", Timeout: time.Hour},
			query: "instanceId=node-1&timeoutMs=20000&waitFor=detached"},
		{name: "negative bound", status: 200, header: cloud.WaitTimeout, body: vol,
			w:     cloud.VolumeWait{For: cloud.StateDetached, InstanceID: "node-1", Timeout: -time.Second},
			query: "instanceId=node-1&timeoutMs=0&waitFor=detached"},
		{name: "bounded by the deadline", status: 200, header: cloud.WaitChanged, body: vol, deadline: 3 * time.Second,
			w:     cloud.VolumeWait{For: cloud.StateAttached, InstanceID: "node-1", Timeout: 10 * time.Second},
			query: "instanceId=node-1&timeoutMs=29"}, // 29xx ms, a moment under 3 s: checked by prefix
		{name: "a cloud without waits", status: 200, body: vol,
			w:       cloud.VolumeWait{For: cloud.StateAttached, InstanceID: "node-1", Timeout: time.Second},
			query:   "instanceId=node-1&timeoutMs=1000&waitFor=attached",
			wantErr: cloud.ErrWaitUnsupported},
		{name: "busy", status: 429, header: cloud.WaitBusy, body: `{"code":"Throttled","message":"2 waits","retryable":true}`,
			w:       cloud.VolumeWait{For: cloud.StateAttached, InstanceID: "node-1", Timeout: time.Second},
			query:   "instanceId=node-1&timeoutMs=1000&waitFor=attached",
			wantErr: cloud.ErrWaitBusy, wantCode: cloud.CodeThrottled},
		{name: "throttled by a fault, not busy", status: 429, body: `{"code":"Throttled","message":"fault","retryable":true}`,
			w:        cloud.VolumeWait{For: cloud.StateAttached, InstanceID: "node-1", Timeout: time.Second},
			query:    "instanceId=node-1&timeoutMs=1000&waitFor=attached",
			wantCode: cloud.CodeThrottled},
		{name: "gone", status: 404, body: `{"code":"VolumeNotFound","message":"gone","retryable":false}`,
			w:        cloud.VolumeWait{For: cloud.StateAttached, InstanceID: "node-1", Timeout: time.Second},
			query:    "instanceId=node-1&timeoutMs=1000&waitFor=attached",
			wantCode: cloud.CodeVolumeNotFound},
		{name: "a transient state is no end", w: cloud.VolumeWait{For: cloud.StateAttaching, InstanceID: "node-1"}, wantCode: cloud.CodeInvalidArgument},
		{name: "no instance", w: cloud.VolumeWait{For: cloud.StateAttached}, wantCode: cloud.CodeInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = append(got, r.URL.Path+"?"+r.URL.RawQuery)
				if tc.header != "" {
					w.Header().Set(cloud.WaitHeader, tc.header)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.deadline)
				defer cancel()
			}
			v, err := newClient(t, srv.URL).WaitVolume(ctx, "vol-1", tc.w)
			switch {
			case tc.query == "" && len(got) != 0:
				t.Fatalf("sent %v, want nothing sent", got)
			case tc.query != "" && (len(got) != 1 || !strings.HasPrefix(got[0], "/v1/volumes/vol-1?"+tc.query)):
				t.Fatalf("sent %v, want one GET /v1/volumes/vol-1?%s", got, tc.query)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if cloud.CodeOf(err) != tc.wantCode {
				t.Fatalf("err %v, want code %q", err, tc.wantCode)
			}
			if tc.wantErr == nil && tc.wantCode == "" && (v == nil || v.State != cloud.StateAttached || v.AttachedTo != "node-1") {
				t.Fatalf("volume %+v, err %v, want the answer's", v, err)
			}
		})
	}
}
