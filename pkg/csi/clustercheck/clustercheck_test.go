package clustercheck

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/fakecloud/fakecloud-csi/internal/kubeapi"
	"github.com/fakecloud/fakecloud-csi/internal/kubeapi/kubeapitest"
)

const driver = "disk.fakecloud.dev"

// cluster is a fake API server with the given versions; period nil leaves the CSIDriver's
// field unset, noDriver leaves the CSIDriver out, kubelet "" leaves the Node out.
func cluster(t testing.TB, server string, period *int64, noDriver bool, kubelet string) *kubeapitest.Server {
	t.Helper()
	var objs []runtime.Object
	if !noDriver {
		objs = append(objs, &storagev1.CSIDriver{
			ObjectMeta: metav1.ObjectMeta{Name: driver, UID: "uid-1"},
			Spec:       storagev1.CSIDriverSpec{NodeAllocatableUpdatePeriodSeconds: period},
		})
	}
	if kubelet != "" {
		objs = append(objs, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
			Status:     corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: kubelet}},
		})
	}
	cs := kubeapitest.New(t, objs...)
	cs.SetServerVersion(server)
	return cs
}

// client is the check's client of the fake API server s (NewClientForConfig), nil for nil.
func client(t testing.TB, s *kubeapitest.Server) *kubeapi.Client {
	t.Helper()
	if s == nil {
		return nil
	}
	c, err := NewClientForConfig(s.Config())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// events are the events.k8s.io Events s holds.
func events(s *kubeapitest.Server) []*eventsv1.Event {
	var evs []*eventsv1.Event
	for _, o := range s.List(eventsv1.SchemeGroupVersion, "events") {
		evs = append(evs, o.(*eventsv1.Event))
	}
	return evs
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name         string
		client       *kubeapitest.Server
		nodeName     string
		wantErr      string
		wantProblems []string // substrings, one per problem, in order
	}{
		{name: "v1.37 with a period and a new kubelet", client: cluster(t, "v1.37.2", ptr.To[int64](10), false, "v1.37.2"), nodeName: "node-1"},
		{name: "v1.35 is the minimum", client: cluster(t, "v1.35.0", ptr.To[int64](60), false, "v1.35.0"), nodeName: "node-1"},
		{name: "provider suffixes parse", client: cluster(t, "v1.36.4-gke.1200", ptr.To[int64](10), false, "v1.36.4-eks-abc"), nodeName: "node-1"},
		{name: "no node name: kubelet not checked", client: cluster(t, "v1.37.2", ptr.To[int64](10), false, ""), nodeName: ""},
		{name: "old API server", client: cluster(t, "v1.34.3", ptr.To[int64](10), false, "v1.37.2"), nodeName: "node-1",
			wantProblems: []string{"API server is v1.34.3, older than v1.35"}},
		{name: "period unset", client: cluster(t, "v1.37.2", nil, false, "v1.37.2"), nodeName: "node-1",
			wantProblems: []string{"does not set spec.nodeAllocatableUpdatePeriodSeconds"}},
		{name: "no CSIDriver object", client: cluster(t, "v1.37.2", nil, true, "v1.37.2"), nodeName: "node-1",
			wantProblems: []string{"CSIDriver object disk.fakecloud.dev does not exist"}},
		{name: "old kubelet", client: cluster(t, "v1.37.2", ptr.To[int64](10), false, "v1.34.0"), nodeName: "node-1",
			wantProblems: []string{"kubelet of node-1 is v1.34.0"}},
		{name: "everything wrong, all listed", client: cluster(t, "v1.33.1", nil, false, "v1.32.0"), nodeName: "node-1",
			wantProblems: []string{"API server", "nodeAllocatableUpdatePeriodSeconds", "kubelet"}},
		{name: "node missing is an error", client: cluster(t, "v1.37.2", ptr.To[int64](10), false, ""), nodeName: "node-1",
			wantErr: `read Node node-1`},
		{name: "unparsable server version", client: cluster(t, "banana", ptr.To[int64](10), false, ""),
			wantErr: `parse the API server version "banana"`},
		{name: "unparsable kubelet version", client: cluster(t, "v1.37.2", ptr.To[int64](10), false, "x"), nodeName: "node-1",
			wantErr: `parse the kubelet of node-1 version "x"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Checker{Client: client(t, tc.client), DriverName: driver, NodeName: tc.nodeName, NodeID: "node-1"}.Check(context.Background())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Check error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Problems) != len(tc.wantProblems) {
				t.Fatalf("problems = %q, want %d like %q", res.Problems, len(tc.wantProblems), tc.wantProblems)
			}
			for i, want := range tc.wantProblems {
				if !strings.Contains(res.Problems[i], want) {
					t.Errorf("problem %d = %q, want it to contain %q", i, res.Problems[i], want)
				}
			}
			if res.Supported != (len(tc.wantProblems) == 0) {
				t.Errorf("Supported = %v with problems %q", res.Supported, res.Problems)
			}
			if tc.nodeName == "" && res.KubeletVersion != "" {
				t.Errorf("KubeletVersion = %q without a node name", res.KubeletVersion)
			}
		})
	}
}

func TestCheckReadErrorsAreErrorsNotProblems(t *testing.T) {
	for _, resource := range []string{"csidrivers", "nodes"} {
		t.Run(resource, func(t *testing.T) {
			cs := cluster(t, "v1.37.2", ptr.To[int64](10), false, "v1.37.2")
			cs.PrependReactor("get", resource, func(kubeapitest.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "x", errors.New("RBAC"))
			})
			res, err := Checker{Client: client(t, cs), DriverName: driver, NodeName: "node-1"}.Check(context.Background())
			if !apierrors.IsForbidden(err) {
				t.Fatalf("Check = %+v, %v; want a Forbidden error", res, err)
			}
		})
	}
}

func TestCheckUntilRetriesUntilAnAnswer(t *testing.T) {
	cs := cluster(t, "v1.37.2", nil, false, "")
	calls := 0
	cs.PrependReactor("get", "csidrivers", func(kubeapitest.Action) (bool, runtime.Object, error) {
		calls++
		if calls < 3 {
			return true, nil, apierrors.NewServiceUnavailable("starting")
		}
		return false, nil, nil
	})
	res, err := Checker{Client: client(t, cs), DriverName: driver}.CheckUntil(context.Background(), time.Millisecond, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if calls != 3 || res.Supported || len(res.Problems) != 1 {
		t.Errorf("after %d calls: %+v; want the third call's answer (period unset)", calls, res)
	}
}

func TestCheckUntilGivesUpWithTheLastError(t *testing.T) {
	cs := cluster(t, "v1.37.2", ptr.To[int64](10), false, "")
	// The check gives up when its context ends; here the test ends it after the second refusal,
	// so every answer before is a whole one however slow the machine (a 20 ms budget failed
	// under load: the first round trip itself was cut short, leaving only the deadline).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var refusals atomic.Int32
	cs.PrependReactor("get", "csidrivers", func(kubeapitest.Action) (bool, runtime.Object, error) {
		if refusals.Add(1) == 2 {
			cancel()
		}
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "storage.k8s.io", Resource: "csidrivers"}, driver, errors.New("no RBAC"))
	})
	_, err := Checker{Client: client(t, cs), DriverName: driver}.CheckUntil(ctx, time.Millisecond, time.Minute)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "no answer within 1m0s") {
		t.Fatalf("CheckUntil error = %v, want the Forbidden error, wrapped", err)
	}
}

func TestReportCreatesAWarningOnTheCSIDriver(t *testing.T) {
	cs := cluster(t, "v1.34.0", nil, false, "")
	c := Checker{Client: client(t, cs), DriverName: driver, NodeID: "i-7"}
	res, err := c.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Report(context.Background(), res); err != nil {
		t.Fatal(err)
	}
	evs := events(cs)
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1", len(evs))
	}
	ev := evs[0]
	if ev.Namespace != metav1.NamespaceDefault {
		t.Errorf("event in namespace %q, want %q", ev.Namespace, metav1.NamespaceDefault)
	}
	// The fake API server does not validate; the real one checks the name prefix so.
	if errs := apimachineryvalidation.NameIsDNSSubdomain(ev.GenerateName, true); len(errs) != 0 {
		t.Errorf("generateName %q: %v", ev.GenerateName, errs)
	}
	if ev.Type != corev1.EventTypeWarning || ev.Reason != EventReason || ev.Regarding.Kind != "CSIDriver" ||
		ev.Regarding.Name != driver || ev.Regarding.UID != "uid-1" || ev.ReportingController == "" || ev.Action == "" {
		t.Errorf("event = %+v", ev)
	}
	for _, want := range []string{"node plugin of i-7", "v1.34.0", "nodeAllocatableUpdatePeriodSeconds"} {
		if !strings.Contains(ev.Note, want) {
			t.Errorf("note %q lacks %q", ev.Note, want)
		}
	}
}

func TestReportCutsALongNote(t *testing.T) {
	cs := cluster(t, "v1.37.2", nil, false, "")
	c := Checker{Client: client(t, cs), DriverName: driver, NodeID: "i-1"}
	if err := c.Report(context.Background(), Result{Problems: []string{strings.Repeat("x", 3000)}}); err != nil {
		t.Fatal(err)
	}
	evs := events(cs)
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1", len(evs))
	}
	if n := len(evs[0].Note); n != 1024 {
		t.Errorf("note of %d bytes, want 1024", n)
	}
}

func TestNewClient(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if c, err := NewClient("", "ua"); c != nil || err != nil {
		t.Errorf("NewClient without kubeconfig outside a pod = %v, %v; want nil, nil", c, err)
	}
	if _, err := NewClient(filepath.Join(t.TempDir(), "missing"), "ua"); err == nil {
		t.Error("NewClient with a missing kubeconfig succeeded")
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := NewClient(kc, "ua"); c == nil || err != nil {
		t.Errorf("NewClient with a kubeconfig = %v, %v", c, err)
	}
}

func TestCheckUntilReportsTheCauseNotTheDeadline(t *testing.T) {
	cs := cluster(t, "v1.37.2", ptr.To[int64](10), false, "v1.37.2")
	calls := 0
	cs.PrependReactor("get", "nodes", func(kubeapitest.Action) (bool, runtime.Object, error) {
		calls++
		if calls == 1 {
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, "node-9")
		}
		time.Sleep(60 * time.Millisecond) // the deadline cuts this attempt short
		return true, nil, context.DeadlineExceeded
	})
	_, err := Checker{Client: client(t, cs), DriverName: driver, NodeName: "node-9"}.CheckUntil(context.Background(), time.Millisecond, 50*time.Millisecond)
	if !apierrors.IsNotFound(err) {
		t.Fatalf("CheckUntil error = %v, want the NotFound of the attempt before the deadline", err)
	}
}

// An attempt that ends in a context error is the deadline's doing even when the context does
// not say so yet: on a busy machine the timer that cancels it may run late, and CI's race run
// then reported "context deadline exceeded" instead of the NotFound before it.
func TestCheckUntilKeepsTheCauseOverALateDeadline(t *testing.T) {
	cs := cluster(t, "v1.37.2", ptr.To[int64](10), false, "v1.37.2")
	// The first read of node-9 is the server's NotFound; later ones end in a context error at
	// once, in the client (as a timer that cancels the request does): the context is still alive.
	calls := 0
	cfg := cs.Config()
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if strings.HasSuffix(r.URL.Path, "/nodes/node-9") {
				calls++
				if calls > 1 {
					return nil, context.DeadlineExceeded
				}
			}
			return rt.RoundTrip(r)
		})
	}
	c, err := NewClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Checker{Client: c, DriverName: driver, NodeName: "node-9"}.CheckUntil(context.Background(), time.Millisecond, 50*time.Millisecond)
	if !apierrors.IsNotFound(err) || calls < 2 {
		t.Fatalf("CheckUntil error = %v after %d reads of the node, want the NotFound of the attempt before the deadline", err, calls)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestCheckUntilEndsWhenTheServerNeverAnswers: an API server that accepts the connection and
// the TLS handshake but never answers must not hold the check past its timeout.
func TestCheckUntilEndsWhenTheServerNeverAnswers(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+srv.URL+`", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	client, err := NewClient(kc, "test")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Checker{Client: client, DriverName: driver}.CheckUntil(context.Background(), 10*time.Millisecond, 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "no answer within 200ms") {
		t.Fatalf("CheckUntil = %v, want no answer", err)
	}
}
