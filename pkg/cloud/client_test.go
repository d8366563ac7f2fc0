package cloud_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
)

// errorServer answers every request with status and body, recording the last request.
func errorServer(t *testing.T, status int, body string, header http.Header) (*httptest.Server, *http.Request) {
	t.Helper()
	var last http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		last = *r.Clone(context.Background())
		for k, v := range header {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &last
}

func newClient(t *testing.T, url string, opts ...cloud.Option) *admin.Client {
	t.Helper()
	c, err := admin.NewClient(url, opts...)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return c
}

func TestEveryCodeMatchesItsSentinel(t *testing.T) {
	sentinels := map[cloud.Code]error{
		cloud.CodeAttachmentLimitExceeded: cloud.ErrAttachmentLimitExceeded,
		cloud.CodeAttachmentQuotaExceeded: cloud.ErrAttachmentQuotaExceeded,
		cloud.CodeVolumeQuotaExceeded:     cloud.ErrVolumeQuotaExceeded,
		cloud.CodeCapacityQuotaExceeded:   cloud.ErrCapacityQuotaExceeded,
		cloud.CodeAccessDenied:            cloud.ErrAccessDenied,
		cloud.CodeUnauthenticated:         cloud.ErrUnauthenticated,
		cloud.CodeZoneMismatch:            cloud.ErrZoneMismatch,
		cloud.CodeVolumeInUse:             cloud.ErrVolumeInUse,
		cloud.CodeVolumeNotFound:          cloud.ErrVolumeNotFound,
		cloud.CodeInstanceNotFound:        cloud.ErrInstanceNotFound,
		cloud.CodeSnapshotNotFound:        cloud.ErrSnapshotNotFound,
		cloud.CodeFaultNotFound:           cloud.ErrFaultNotFound,
		cloud.CodeServerLimitExceeded:     cloud.ErrServerLimitExceeded,
		cloud.CodeNotFound:                cloud.ErrNotFound,
		cloud.CodeAlreadyExists:           cloud.ErrAlreadyExists,
		cloud.CodeInvalidArgument:         cloud.ErrInvalidArgument,
		cloud.CodeMethodNotAllowed:        nil, // errors.go has no sentinel; CodeOf is checked
		cloud.CodePreconditionFailed:      cloud.ErrPreconditionFailed,
		cloud.CodePayloadTooLarge:         cloud.ErrPayloadTooLarge,
		cloud.CodeThrottled:               cloud.ErrThrottled,
		cloud.CodeInternalError:           cloud.ErrInternalError,
		cloud.CodeUnavailable:             cloud.ErrUnavailable,
	}
	for code, sentinel := range sentinels {
		t.Run(string(code), func(t *testing.T) {
			body := fmt.Sprintf(`{"code":%q,"message":"m","retryable":%v,"requestId":"req-1"}`, code, code.Retryable())
			srv, _ := errorServer(t, code.HTTPStatus(), body, nil)
			_, err := newClient(t, srv.URL).AttachVolume(context.Background(), "vol-1", "node-a")
			if cloud.CodeOf(err) != code {
				t.Fatalf("CodeOf(%v) = %q, want %s", err, cloud.CodeOf(err), code)
			}
			if sentinel != nil && !errors.Is(err, sentinel) {
				t.Fatalf("errors.Is(%v, %v) = false", err, sentinel)
			}
			for other, s := range sentinels {
				if other != code && s != nil && errors.Is(err, s) {
					t.Fatalf("%v also matches %s", err, other)
				}
			}
			var ce *cloud.Error
			if !errors.As(err, &ce) || ce.HTTPStatus != code.HTTPStatus() || ce.RequestID != "req-1" || ce.Message != "m" {
				t.Fatalf("error %+v", ce)
			}
		})
	}
}

func TestNonJSONAndStatusOnlyAnswers(t *testing.T) {
	tests := []struct {
		status int
		body   string
		want   cloud.Code
	}{
		{http.StatusBadGateway, "<html><body>502 Bad Gateway</body></html>", cloud.CodeUnavailable},
		{http.StatusServiceUnavailable, "", cloud.CodeUnavailable},
		{http.StatusGatewayTimeout, "upstream timed out", cloud.CodeUnavailable},
		{http.StatusTooManyRequests, "slow down", cloud.CodeThrottled},
		{http.StatusNotFound, "404 page not found", cloud.CodeNotFound},
		{http.StatusUnauthorized, "", cloud.CodeUnauthenticated},
		{http.StatusForbidden, "", cloud.CodeAccessDenied},
		{http.StatusInternalServerError, `{"unexpected":true}`, cloud.CodeInternalError},
		{http.StatusTeapot, "teapot", cloud.CodeInternalError},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			srv, _ := errorServer(t, tt.status, tt.body, nil)
			_, err := newClient(t, srv.URL).GetCapacity(context.Background(), "node-a")
			var ce *cloud.Error
			if !errors.As(err, &ce) || ce.Code != tt.want || ce.HTTPStatus != tt.status || ce.Retryable != tt.want.Retryable() {
				t.Fatalf("got %+v (%v), want code %s", ce, err, tt.want)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	future := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		header   string
		min, max time.Duration
	}{
		{"7", 7 * time.Second, 7 * time.Second},
		{"0", 0, 0},
		{future, 80 * time.Second, 91 * time.Second},
		{"soon", 0, 0},
		{"", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			h := http.Header{}
			if tt.header != "" {
				h.Set("Retry-After", tt.header)
			}
			srv, _ := errorServer(t, 429, `{"code":"Throttled","message":"slow","retryable":true}`, h)
			_, err := newClient(t, srv.URL).GetInstance(context.Background(), "node-a")
			var ce *cloud.Error
			if !errors.As(err, &ce) || ce.RetryAfter < tt.min || ce.RetryAfter > tt.max {
				t.Fatalf("RetryAfter %v, want in [%v, %v]", ce.RetryAfter, tt.min, tt.max)
			}
		})
	}
}

func TestTransportAndContextErrors(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(block)
	c := newClient(t, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := c.GetCapacity(ctx, "node-a")
	if !errors.Is(err, context.DeadlineExceeded) || cloud.CodeOf(err) != "" {
		t.Fatalf("deadline: %v (code %q)", err, cloud.CodeOf(err))
	}
	canceled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := c.DeleteVolume(canceled, "vol-1"); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
	// A closed port is a transport error, never a cloud code.
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL
	dead.Close()
	_, err = newClient(t, url).GetQuotas(context.Background())
	if err == nil || cloud.CodeOf(err) != "" {
		t.Fatalf("connection refused: %v (code %q)", err, cloud.CodeOf(err))
	}
}

func TestRequestShape(t *testing.T) {
	var got *http.Request
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Clone(context.Background())
		data := make([]byte, 1024)
		n, _ := r.Body.Read(data)
		body = string(data[:n])
		fmt.Fprint(w, `{"volumeId":"vol/1","instanceId":"node-a","device":"/dev/x","revision":3}`)
	}))
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, srv.URL+"/", cloud.WithTokenFile(tokenFile), cloud.WithUserAgent("test-agent/1"), cloud.WithTimeout(time.Second))
	a, err := c.AttachVolume(context.Background(), "vol/1", "node-a")
	if err != nil || a.Device != "/dev/x" || a.Revision != 3 {
		t.Fatalf("attach: %+v, %v", a, err)
	}
	if got.Method != http.MethodPost || got.URL.EscapedPath() != "/v1/volumes/vol%2F1/attach" || body != `{"instanceId":"node-a"}` {
		t.Fatalf("request %s %s %s", got.Method, got.URL.EscapedPath(), body)
	}
	if got.Header.Get("Authorization") != "Bearer first" || got.Header.Get("User-Agent") != "test-agent/1" || got.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("headers %v", got.Header)
	}
	// A rotated token file is picked up on the next request.
	if err := os.WriteFile(tokenFile, []byte("second"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AttachVolume(context.Background(), "vol/1", "node-a"); err != nil || got.Header.Get("Authorization") != "Bearer second" {
		t.Fatalf("rotated token: %v, header %q", err, got.Header.Get("Authorization"))
	}
	if _, err := c.PatchQuotasIfMatch(context.Background(), cloud.QuotasPatch{}, 42); err != nil {
		// The canned body is not Quotas, but decoding ignores unknown fields.
		t.Fatalf("patch: %v", err)
	}
	if got.Header.Get("If-Match") != `"42"` {
		t.Fatalf("If-Match %q", got.Header.Get("If-Match"))
	}
}

func TestNewClientRejectsBadInput(t *testing.T) {
	for _, tt := range []struct {
		url  string
		opts []cloud.Option
	}{
		{"ftp://host", nil},
		{"127.0.0.1:8080", nil},
		{"http://", nil},
		{"http://host", []cloud.Option{cloud.WithTokenFile(filepath.Join(t.TempDir(), "missing"))}},
		{"http://host", []cloud.Option{cloud.WithTimeout(-time.Second)}},
		{"http://host", []cloud.Option{cloud.WithHTTPClient(nil)}},
	} {
		if _, err := admin.NewClient(tt.url, tt.opts...); err == nil {
			t.Errorf("NewClient(%q) succeeded", tt.url)
		}
	}
}

func TestCheckBaseURL(t *testing.T) {
	const want = "want an http:// or https:// URL, e.g. http://127.0.0.1:8080"
	long := "localhost:" + strings.Repeat("8", 2*cloud.MaxQuotedBytes)
	tests := []struct {
		name, raw string
		wantErr   string // the whole message; "" means valid
	}{
		{"http", "http://127.0.0.1:18080", ""},
		{"https with a path", "https://cloud.example/base/", ""},
		{"a name and a port", "http://localhost:18080/", ""},
		{"IPv6", "http://[::1]:18080", ""},
		{"empty", "", "empty: " + want},
		// url.Parse reads "localhost" as the scheme.
		{"host:port without a scheme", "localhost:18080",
			`"localhost:18080" has no scheme: ` + want + ` (did you mean "http://localhost:18080"?)`},
		// url.Parse refuses it: "first path segment in URL cannot contain colon".
		{"an address with a slash, no scheme", "127.0.0.1:18080/",
			`"127.0.0.1:18080/" has no scheme: ` + want + ` (did you mean "http://127.0.0.1:18080/"?)`},
		// A newcomer's "http:127.0.0.1:18080" was told it had no scheme.
		{"http: without //", "http:127.0.0.1:18080",
			`"http:127.0.0.1:18080" lacks the "//" after "http:": ` + want + ` (did you mean "http://127.0.0.1:18080"?)`},
		{"https: with one slash", "https:/127.0.0.1:18080",
			`"https:/127.0.0.1:18080" lacks the "//" after "https:": ` + want + ` (did you mean "https://127.0.0.1:18080"?)`},
		{"http: alone: no guess", "http:", `"http:" lacks the "//" after "http:": ` + want},
		{"a mistyped scheme: no guess", "htp:/127.0.0.1:18080", `"htp:/127.0.0.1:18080" has no scheme: ` + want},
		// These passed the start-up check and failed at the first request, or never.
		{"a port over 65535", "http://127.0.0.1:70000", `"http://127.0.0.1:70000" has the port "70000": want 1-65535`},
		{"port 0", "http://127.0.0.1:0", `"http://127.0.0.1:0" has the port "0": want 1-65535`},
		{"a query", "http://127.0.0.1:8080/?token=x", `"http://127.0.0.1:8080/?token=x" has a query: the base URL takes none; ` + want},
		{"an empty query", "http://127.0.0.1:8080?", `"http://127.0.0.1:8080?" has a query: the base URL takes none; ` + want},
		{"a fragment", "http://127.0.0.1:8080/#ui", `"http://127.0.0.1:8080/#ui" has a fragment: the base URL takes none; ` + want},
		{"a user", "http://admin:secret@127.0.0.1:8080", `"http://xxxxx@127.0.0.1:8080" has a user name: the cloud's token goes in its own flag, not the URL`},
		{"a token as the user", "http://demo-admin-token@127.0.0.1:8080", `"http://xxxxx@127.0.0.1:8080" has a user name: the cloud's token goes in its own flag, not the URL`},
		{"an empty port", "http://127.0.0.1:", `"http://127.0.0.1:" has an empty port: want 1-65535, or no colon for the scheme's`},
		{"the API's /v1", "http://127.0.0.1:8080/v1", `"http://127.0.0.1:8080/v1" ends in /v1: give the cloud's base URL, e.g. "http://127.0.0.1:8080" (the client adds /v1)`},
		{"/v1/ under a base path", "https://cloud.example/base/v1/", `"https://cloud.example/base/v1/" ends in /v1: give the cloud's base URL, e.g. "https://cloud.example/base" (the client adds /v1)`},
		{"a path with v1 in a name", "https://cloud.example/v1beta", ""},
		{"another scheme", "ftp://127.0.0.1:21", `"ftp://127.0.0.1:21" has the scheme "ftp": ` + want},
		{"unix socket", "unix:///run/cloud.sock", `"unix:///run/cloud.sock" has the scheme "unix": ` + want},
		{"no host", "http://", `"http://" has no host: ` + want},
		{"a port, no host", "http://:18080", `"http://:18080" has no host: ` + want},
		{"not a URL", "http://[::1", `"http://[::1" is not a URL (missing ']' in host): ` + want},
		// The bound: at most MaxQuotedBytes of the value, and no guess made from a longer one.
		{"a long value is cut", long, cloud.Quote(long) + " has no scheme: " + want},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := cloud.CheckBaseURL(tt.raw)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("CheckBaseURL(%q) = %v, want nil", tt.raw, err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
				t.Fatalf("CheckBaseURL(%q) = %v\nwant %s", tt.raw, err, tt.wantErr)
			}
			if err != nil && len(err.Error()) > cloud.MaxQuotedBytes+3*len(want) {
				t.Errorf("message of %d bytes for a %d-byte value: %s", len(err.Error()), len(tt.raw), err)
			}
			if _, cerr := admin.NewClient(tt.raw); (cerr == nil) != (err == nil) {
				t.Errorf("NewClient(%q) = %v, CheckBaseURL = %v: want both to agree", tt.raw, cerr, err)
			}
		})
	}
}

// TestConcurrentRequestsReuseConnections: a client that had n requests in flight at once keeps
// the n connections for its next n concurrent requests instead of dialling again (Go's default
// transport keeps 2 idle connections per host and would dial n-2 new ones).
func TestConcurrentRequestsReuseConnections(t *testing.T) {
	const n = 16
	var (
		mu      sync.Mutex
		arrived int
		all     = make(chan struct{})
		dials   atomic.Int64
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Hold every request until all n are in flight, so the client needs n connections.
		mu.Lock()
		arrived++
		if arrived == n {
			close(all)
		}
		ch := all
		mu.Unlock()
		<-ch
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"attachments":{"limit":1,"used":0},"volumes":{"limit":1,"used":0},"capacityBytes":{"limit":1,"used":0},"revision":1}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := newClient(t, srv.URL)
	round := func() {
		mu.Lock()
		arrived, all = 0, make(chan struct{})
		mu.Unlock()
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				if _, err := c.GetQuotas(context.Background()); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	round()
	if d := dials.Load(); d != n {
		t.Fatalf("%d connections for %d concurrent requests", d, n)
	}
	round()
	if d := dials.Load(); d != n {
		t.Errorf("second round of %d concurrent requests dialled %d new connections, want 0", n, d-n)
	}
}
