package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/console"
)

// TestConsoleRoutes: the page and its files need no token (they hold no data), / serves the
// same page as /ui without a redirect, and the node routes need a reader and relay the
// plugin's state.
func TestConsoleRoutes(t *testing.T) {
	plugin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debug/capacity" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, `{"nodeId":"node-a","mode":"ramping","reported":2}`)
	}))
	defer plugin.Close()
	tc := startCloud(t, server.Config{Console: console.Config{Nodes: []console.Node{{Name: "node-a", URL: plugin.URL}}}})

	page := tc.do(t, http.MethodGet, "/ui", "", "")
	root := tc.do(t, http.MethodGet, "/", "", "")
	if page.status != http.StatusOK || !strings.HasPrefix(page.header.Get("Content-Type"), "text/html") || !strings.Contains(string(page.body), "<title>fakecloud console") {
		t.Fatalf("GET /ui: %d %q", page.status, page.header.Get("Content-Type"))
	}
	if root.status != http.StatusOK || string(root.body) != string(page.body) {
		t.Fatalf("GET /: %d, want the page of /ui", root.status)
	}
	for _, p := range []string{"/ui/console.js", "/ui/console.css"} {
		if r := tc.do(t, http.MethodGet, p, "", ""); r.status != http.StatusOK || r.header.Get("Content-Security-Policy") == "" {
			t.Errorf("GET %s: %d, CSP %q", p, r.status, r.header.Get("Content-Security-Policy"))
		}
	}
	tests := []struct {
		method, path, token string
		status              int
		code                cloud.Code
		body                string
	}{
		{http.MethodGet, "/ui/other.js", "", http.StatusNotFound, cloud.CodeNotFound, ""},
		{http.MethodGet, "/ui/", "", http.StatusNotFound, cloud.CodeNotFound, ""},
		{http.MethodPost, "/ui", "", http.StatusMethodNotAllowed, cloud.CodeMethodNotAllowed, ""},
		{http.MethodGet, "/ui/nodes", "", http.StatusUnauthorized, cloud.CodeUnauthenticated, ""},
		{http.MethodGet, "/ui/nodes", readerToken, http.StatusOK, "", `{"nodes":[{"name":"node-a","url":"` + plugin.URL + `"}]}`},
		{http.MethodGet, "/ui/nodes/node-a/capacity", "", http.StatusUnauthorized, cloud.CodeUnauthenticated, ""},
		{http.MethodGet, "/ui/nodes/node-a/capacity", readerToken, http.StatusOK, "", `{"nodeId":"node-a","mode":"ramping","reported":2}`},
		{http.MethodGet, "/ui/nodes/node-b/capacity", readerToken, http.StatusNotFound, cloud.CodeNotFound, ""},
		{http.MethodGet, "/ui/nodes/..%2Fx/capacity", readerToken, http.StatusNotFound, cloud.CodeNotFound, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			r := tc.do(t, tt.method, tt.path, tt.token, "")
			if r.status != tt.status {
				t.Fatalf("status %d, want %d (body %s)", r.status, tt.status, r.body)
			}
			if tt.code != "" {
				if e := r.errorBody(t); e.Code != tt.code {
					t.Fatalf("code %s, want %s", e.Code, tt.code)
				}
				return
			}
			if got := strings.TrimSpace(string(r.body)); got != tt.body {
				t.Fatalf("body %s, want %s", got, tt.body)
			}
		})
	}
}

// TestConsoleConfigIsValidated: a bad console node is a configuration error of New.
func TestConsoleConfigIsValidated(t *testing.T) {
	_, err := server.New(server.Config{Auth: server.AuthNone, Console: console.Config{Nodes: []console.Node{{Name: "n", URL: "ftp://x"}}}})
	if err == nil || !strings.Contains(err.Error(), "ftp://x") {
		t.Fatalf("New: %v, want the bad URL named", err)
	}
}
