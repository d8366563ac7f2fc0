package cloud_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
)

// TestClientNeverFollowsRedirects: a 3xx is an InternalError naming the Location, and the
// redirect target is never asked, with the default client and with WithHTTPClient. Before,
// the client followed a 301 (and turned a POST into a GET on another route).
func TestClientNeverFollowsRedirects(t *testing.T) {
	var followed atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/etc/attach" {
			followed.Add(1)
			w.WriteHeader(http.StatusOK)
			fmt.Fprint(w, `{"volumeId":"x","instanceId":"y","device":"/dev/z"}`)
			return
		}
		http.Redirect(w, r, "/etc/attach", http.StatusMovedPermanently)
	}))
	t.Cleanup(srv.Close)
	for name, c := range map[string]*admin.Client{
		"default":        newClient(t, srv.URL),
		"WithHTTPClient": newClient(t, srv.URL, cloud.WithHTTPClient(&http.Client{})),
		"DefaultClient":  newClient(t, srv.URL, cloud.WithHTTPClient(http.DefaultClient), cloud.WithTimeout(0)),
	} {
		_, err := c.AttachVolume(context.Background(), "vol-1", "node-a")
		if cloud.CodeOf(err) != cloud.CodeInternalError || !strings.Contains(err.Error(), "not followed") {
			t.Errorf("%s: err %v, want InternalError: redirect not followed", name, err)
		}
	}
	if n := followed.Load(); n != 0 {
		t.Fatalf("the redirect target was asked %d times", n)
	}
}

// TestClientRefusesNonIdentifiersLocally: an ID that is not one (over 128 bytes, a control
// character, "." or "..") never becomes a URL: InvalidArgument, and no request is sent. '/'
// is escaped, so "../../etc" stays one segment.
func TestClientRefusesNonIdentifiersLocally(t *testing.T) {
	var asked atomic.Int64
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		paths = append(paths, r.URL.EscapedPath())
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"code":"VolumeNotFound","message":"no"}`)
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, srv.URL)
	ctx := context.Background()
	for _, id := range []string{"", ".", "..", strings.Repeat("v", 3<<20), "a\x00b", "a\nb", "\xff"} {
		if _, err := c.GetVolume(ctx, id); cloud.CodeOf(err) != cloud.CodeInvalidArgument {
			t.Errorf("GetVolume(%.20q): %v, want InvalidArgument", id, err)
		}
		if _, err := c.DetachVolume(ctx, id, "n"); cloud.CodeOf(err) != cloud.CodeInvalidArgument {
			t.Errorf("DetachVolume(%.20q): %v, want InvalidArgument", id, err)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Fatalf("%d requests were sent for refused IDs", n)
	}
	if _, err := c.AttachVolume(ctx, "../../etc", "n"); cloud.CodeOf(err) != cloud.CodeVolumeNotFound {
		t.Fatalf("AttachVolume(../../etc): %v", err)
	}
	if len(paths) != 1 || paths[0] != "/v1/volumes/..%2F..%2Fetc/attach" {
		t.Fatalf("paths %q, want the ID as one escaped segment", paths)
	}
}

// TestClientBoundsAnswers: a success body over MaxResponseBytes is an error, not an
// unbounded read; an error body's message is cut to MaxMessageBytes.
func TestClientBoundsAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/quotas" {
			fmt.Fprintf(w, `{"revision":1,"x":"%s"}`, strings.Repeat("a", cloud.MaxResponseBytes))
			return
		}
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"code":"InvalidArgument","message":"%s"}`, strings.Repeat("m", 50<<10))
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, srv.URL)
	if _, err := c.GetQuotas(context.Background()); err == nil || !strings.Contains(err.Error(), "answer over") {
		t.Fatalf("GetQuotas: %v, want an answer-too-large error", err)
	}
	_, err := c.GetVolume(context.Background(), "vol-1")
	if cloud.CodeOf(err) != cloud.CodeInvalidArgument || len(err.Error()) > cloud.MaxMessageBytes+200 {
		t.Fatalf("error of %d bytes", len(err.Error()))
	}
}

// TestQuoteAndChecks: Quote keeps a bounded, rune-aligned prefix; CheckID and CheckName
// apply one bound of 128 bytes with their character rules.
func TestQuoteAndChecks(t *testing.T) {
	if q := cloud.Quote("short"); q != `"short"` {
		t.Fatalf("Quote(short) = %s", q)
	}
	long := strings.Repeat("é", 1000)
	q := cloud.Quote(long)
	if len(q) > cloud.MaxQuotedBytes+40 || !strings.Contains(q, "(2000 bytes)") || !utf8.ValidString(q) {
		t.Fatalf("Quote(2000 bytes) = %s", q)
	}
	if m := cloud.TruncateMessage(strings.Repeat("é", 5000)); len(m) > cloud.MaxMessageBytes || !utf8.ValidString(m) {
		t.Fatalf("TruncateMessage: %d bytes, valid %v", len(m), utf8.ValidString(m))
	}
	tests := []struct {
		v        string
		id, name bool // accepted as an ID, as a name
	}{
		{"vol-00000001", true, true},
		{strings.Repeat("a", cloud.MaxIDBytes), true, true},
		{strings.Repeat("a", cloud.MaxIDBytes+1), false, false},
		{"", false, false},
		{"   ", false, false},
		{".", false, true},
		{"..", false, true},
		{"../../etc", true, true},
		{"tab\there", false, true},
		{"nul\x00", false, false},
		{"c1\u0085", false, false},
		{"bad\xff", false, false},
	}
	for _, tt := range tests {
		if got := cloud.CheckID("id", tt.v) == nil; got != tt.id {
			t.Errorf("CheckID(%.20q) accepted %v, want %v", tt.v, got, tt.id)
		}
		if got := cloud.CheckName("name", tt.v) == nil; got != tt.name {
			t.Errorf("CheckName(%.20q) accepted %v, want %v", tt.v, got, tt.name)
		}
	}
	if err := cloud.CheckID("id", strings.Repeat("z", 70<<10)); err == nil || len(err.Error()) > 200 {
		t.Fatalf("CheckID of 70 KB: %d-byte message", len(err.Error()))
	}
}

// FuzzCheckID: whatever CheckID or CheckName accepts is bounded and valid UTF-8 with no
// banned control character, and every error message is short.
func FuzzCheckID(f *testing.F) {
	for _, s := range []string{"vol-00000001", "..", "../../etc", "a\x00", "\xff", strings.Repeat("x", 129), "tab\t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, check := range []func(string, string) error{cloud.CheckID, cloud.CheckName} {
			err := check("f", v)
			if err != nil {
				if len(err.Error()) > 2*cloud.MaxQuotedBytes+100 {
					t.Fatalf("message of %d bytes", len(err.Error()))
				}
				continue
			}
			if len(v) > cloud.MaxIDBytes || !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
				t.Fatalf("accepted %q", v)
			}
		}
		if q := cloud.Quote(v); len(q) > 4*cloud.MaxQuotedBytes+40 {
			t.Fatalf("Quote: %d bytes", len(q))
		}
	})
}
