package capacityplot

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
)

// memCloud is a one-instance fake cloud serving what the recorder reads:
// instance types, capacity, quotas and the event log.
type memCloud struct {
	mu            sync.Mutex
	rev           uint64
	limit, oob    int
	quota, used   int64
	events        []cloud.Event
	capacityCalls int
}

func (m *memCloud) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var body any
	switch r.URL.Path {
	case "/v1/instance-types":
		body = cloud.InstanceTypeList{InstanceTypes: []cloud.InstanceType{{Name: "t", MaxAttachments: 8}}}
	case "/v1/instances/i-n1/capacity":
		m.capacityCalls++
		body = cloud.Capacity{InstanceID: "i-n1", AttachLimit: m.limit, OutOfBandSlots: m.oob, QuotaHeadroom: m.quota - m.used,
			Instances: 1, Revision: m.rev, ObservedAt: time.Now()}
	case "/v1/quotas":
		body = cloud.Quotas{Attachments: cloud.Quota{Limit: m.quota, Used: m.used}, Revision: m.rev}
	case "/v1/events":
		since, _ := strconv.ParseUint(r.URL.Query().Get("sinceRevision"), 10, 64)
		var out []cloud.Event
		for _, e := range m.events {
			if e.Revision > since {
				out = append(out, e)
			}
		}
		body = cloud.EventList{Events: out, Revision: m.rev}
	default:
		w.WriteHeader(http.StatusNotFound)
		body = map[string]string{"code": "NotFound", "message": r.URL.Path}
	}
	_ = json.NewEncoder(w).Encode(body)
}

// patchOOB changes the out-of-band slots and logs it as the real cloud does.
func (m *memCloud) patchOOB(oob int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rev++
	m.oob = oob
	attached, limit := 0, m.limit-oob
	m.events = append(m.events, cloud.Event{Seq: uint64(len(m.events) + 1), Revision: m.rev, Time: time.Now(), Type: "InstancePatched",
		InstanceID: "i-n1", Attached: &attached, Limit: &limit})
}

func TestRecorderEndToEnd(t *testing.T) {
	mc := &memCloud{rev: 5, limit: 8, oob: 1, quota: 40}
	srv := httptest.NewServer(mc)
	defer srv.Close()
	cc, err := admin.NewClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	cs := fake.NewClientset(csiNode("n1", "1", i32(7)))
	rec, err := NewRecorder(cs, cc, Options{Driver: drv, Interval: 100 * time.Millisecond, Title: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := rec.Start(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(250 * time.Millisecond)
	mc.patchOOB(3) // truth 7 → 5
	time.Sleep(250 * time.Millisecond)
	if _, err := cs.StorageV1().CSINodes().Update(ctx, csiNode("n1", "2", i32(5)), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(250 * time.Millisecond)
	r := rec.Stop(context.Background())

	if strings.Join(r.Nodes, ",") != "n1" || r.NodeIDs["n1"] != "i-n1" {
		t.Fatalf("expected node n1 (instance i-n1), got %v %v", r.Nodes, r.NodeIDs)
	}
	if len(r.Notes) != 0 {
		t.Errorf("expected no notes (the replay must agree with every sample), got %q", r.Notes)
	}
	steps := r.Truth["n1"]
	if len(steps) != 2 || steps[0].Truth != 7 || steps[1].Truth != 5 || steps[1].Revision != 6 {
		t.Fatalf("expected truth 7 then 5 at revision 6, got %+v", steps)
	}
	lags := r.Lags["n1"]
	if len(lags) != 1 || !lags[0].Matched || lags[0].Cloud.Revision != 6 || lags[0].Lag < 200*time.Millisecond || lags[0].Lag > 5*time.Second {
		t.Fatalf("expected one change matched to revision 6 about 250ms later, got %+v", lags)
	}
	if r.Writes["n1"] != 1 {
		t.Errorf("expected 1 CSINode write, got %d", r.Writes["n1"])
	}
	var before, after int
	for _, s := range r.Samples {
		switch {
		case s.Cloud == nil:
			t.Errorf("sample at %s: cloud read failed: %s", s.At, s.CloudErr)
		case s.Cloud.Revision == 5 && s.Truth == 7:
			before++
		case s.Cloud.Revision == 6 && s.Truth == 5:
			after++
		default:
			t.Errorf("sample with revision %d truth %d", s.Cloud.Revision, s.Truth)
		}
	}
	if before == 0 || after == 0 {
		t.Errorf("expected samples before and after the change, got %d and %d", before, after)
	}
	dir := t.TempDir()
	plot, summary, err := WriteFiles(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(plot, PlotFile) || !strings.HasSuffix(summary, SummaryFile) {
		t.Errorf("unexpected file names %s %s", plot, summary)
	}
	mc.mu.Lock()
	calls := mc.capacityCalls
	mc.mu.Unlock()
	time.Sleep(250 * time.Millisecond)
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if mc.capacityCalls != calls {
		t.Errorf("sampling went on after Stop: %d capacity calls, then %d", calls, mc.capacityCalls)
	}
}

func TestNewRecorderValidates(t *testing.T) {
	_, err := NewRecorder(nil, nil, Options{Interval: time.Millisecond, Share: "half"})
	if err == nil {
		t.Fatal("expected an error")
	}
	for _, w := range []string{"driver name is required", "interval must be ≥ 100ms", "quota share must be none or even", "a Kubernetes client and a cloud client are required"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}
