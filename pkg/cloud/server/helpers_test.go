package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
)

const (
	adminToken  = "test-admin"
	driverToken = "test-driver"
	readerToken = "test-reader"
)

func testTokens() []server.Token {
	return []server.Token{
		{Token: adminToken, Role: server.RoleAdmin},
		{Token: driverToken, Role: server.RoleDriver},
		{Token: readerToken, Role: server.RoleReader},
	}
}

// testSeed has two zones and instances with 3 and 7 free slots (type limit minus one boot disk).
func testSeed() server.Seed {
	return server.Seed{
		InstanceTypes: []cloud.InstanceType{{Name: "small", MaxAttachments: 4}, {Name: "medium", MaxAttachments: 8}},
		Instances: []store.SeedInstance{
			{CreateInstanceRequest: cloud.CreateInstanceRequest{ID: "node-a", Zone: "zone-a", InstanceType: "small", OutOfBandSlots: 1}},
			{CreateInstanceRequest: cloud.CreateInstanceRequest{ID: "node-b", Zone: "zone-b", InstanceType: "medium", OutOfBandSlots: 1}},
		},
		Quotas: &store.Limits{Attachments: 40, Volumes: 1000, CapacityBytes: 1 << 40},
	}
}

// testCloud is a real fake cloud on 127.0.0.1:0 with clients for every role.
type testCloud struct {
	srv                   *server.Server
	url                   string
	admin, driver, reader *admin.Client
	stop                  func()
}

// startCloud serves cfg (test tokens and seed unless set) until the test ends or stop is
// called; stop waits for a clean shutdown and closes the store.
func startCloud(t testing.TB, cfg server.Config) *testCloud {
	t.Helper()
	if cfg.Tokens == nil && cfg.Auth != server.AuthNone {
		cfg.Tokens = testTokens()
	}
	if cfg.Seed.InstanceTypes == nil {
		cfg.Seed = testSeed()
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	tc := &testCloud{srv: srv, url: "http://" + ln.Addr().String()}
	stopped := false
	tc.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	t.Cleanup(tc.stop)
	tc.admin = newClient(t, tc.url, adminToken)
	tc.driver = newClient(t, tc.url, driverToken)
	tc.reader = newClient(t, tc.url, readerToken)
	return tc
}

func newClient(t testing.TB, url, token string) *admin.Client {
	t.Helper()
	c, err := admin.NewClient(url, cloud.WithToken(token))
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return c
}

// rawResponse is an HTTP answer read in full.
type rawResponse struct {
	status int
	header http.Header
	body   []byte
}

// errorBody decodes the single error shape, failing the test if the body is not exactly it.
func (r rawResponse) errorBody(t *testing.T) cloud.Error {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	var e cloud.Error
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("error body %q is not the error shape: %v", r.body, err)
	}
	if e.RequestID == "" || e.RequestID != r.header.Get("X-Request-Id") {
		t.Errorf("requestId %q, X-Request-Id %q: want equal and non-empty", e.RequestID, r.header.Get("X-Request-Id"))
	}
	return e
}

func (tc *testCloud) do(t testing.TB, method, path, token, body string, header ...string) rawResponse {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, tc.url+path, rd)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return rawResponse{status: resp.StatusCode, header: resp.Header, body: data}
}

// snapshot is the whole observable state, to check that a failed request changed nothing.
type snapshot struct {
	Revision  uint64
	Instances []cloud.Instance
	Volumes   []cloud.Volume
	Snapshots []cloud.Snapshot
	Quotas    *cloud.Quotas
	Faults    []cloud.FaultRule
}

func (tc *testCloud) snapshot(t testing.TB) snapshot {
	t.Helper()
	ctx := context.Background()
	var s snapshot
	var err error
	var el cloud.EventList
	r := tc.do(t, http.MethodGet, "/v1/events?sinceRevision=0", adminToken, "")
	if err := json.Unmarshal(r.body, &el); err != nil {
		t.Fatalf("events: %v", err)
	}
	s.Revision = el.Revision
	if s.Instances, err = tc.admin.ListInstances(ctx); err != nil {
		t.Fatalf("ListInstances: %v", err)
	}
	vl, err := tc.admin.ListVolumes(ctx, 1000, "")
	if err != nil {
		t.Fatalf("ListVolumes: %v", err)
	}
	s.Volumes = vl.Volumes
	sl, err := tc.admin.ListSnapshots(ctx, cloud.ListSnapshotsOptions{MaxResults: 1000})
	if err != nil {
		t.Fatalf("ListSnapshots: %v", err)
	}
	s.Snapshots = sl.Snapshots
	if s.Quotas, err = tc.admin.GetQuotas(ctx); err != nil {
		t.Fatalf("GetQuotas: %v", err)
	}
	if s.Faults, err = tc.admin.ListFaults(ctx); err != nil {
		t.Fatalf("ListFaults: %v", err)
	}
	return s
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func wantCode(t testing.TB, err error, code cloud.Code) {
	t.Helper()
	if cloud.CodeOf(err) != code {
		t.Fatalf("err = %v, want code %s", err, code)
	}
}

func must[T any](t testing.TB) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return v
	}
}
