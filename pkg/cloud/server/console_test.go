package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fakecloud/fakecloud-csi/internal/kubeapi/kubeapitest"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/console"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/console/consoletest"
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
		{http.MethodPost, "/ui", "", http.StatusMethodNotAllowed, cloud.CodeMethodNotAllowed, ""},
		{http.MethodGet, "/ui/nodes", "", http.StatusUnauthorized, cloud.CodeUnauthenticated, ""},
		{http.MethodGet, "/ui/nodes", readerToken, http.StatusOK, "", `{"nodes":[{"name":"node-a","url":"` + plugin.URL + `"}]}`},
		{http.MethodGet, "/ui/nodes/node-a/capacity", "", http.StatusUnauthorized, cloud.CodeUnauthenticated, ""},
		{http.MethodGet, "/ui/nodes/node-a/capacity", readerToken, http.StatusOK, "", `{"nodeId":"node-a","mode":"ramping","reported":2}`},
		{http.MethodGet, "/ui/nodes/node-b/capacity", readerToken, http.StatusNotFound, cloud.CodeNotFound, ""},
		{http.MethodGet, "/ui/nodes/..%2Fx/capacity", readerToken, http.StatusNotFound, cloud.CodeNotFound, ""},
		{http.MethodGet, "/ui/cluster", "", http.StatusUnauthorized, cloud.CodeUnauthenticated, ""},
		{http.MethodGet, "/ui/cluster", readerToken, http.StatusOK, "", `{"enabled":false,"nodes":[],"unscheduled":[]}`},
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

// TestConsoleClusterRoute: with a cluster, GET /ui/cluster answers the console's view of it
// (package console tests its content): the driver's CSINode count under the node's name, and
// the instance it runs on.
func TestConsoleClusterRoute(t *testing.T) {
	count := int32(7)
	kube := kubeapitest.New(t, &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: "k8s-a"},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: console.DefaultDriverName, NodeID: "node-a",
			Allocatable: &storagev1.VolumeNodeResources{Count: &count}}}},
	})
	tc := startCloud(t, server.Config{Console: console.Config{Kube: consoletest.Client(t, kube)}})
	r := tc.do(t, http.MethodGet, "/ui/cluster", readerToken, "")
	var view console.ClusterView
	if err := json.Unmarshal(r.body, &view); err != nil || r.status != http.StatusOK {
		t.Fatalf("GET /ui/cluster: %d %s (%v)", r.status, r.body, err)
	}
	if !view.Enabled || len(view.Nodes) != 1 || view.Nodes[0].NodeID != "node-a" || view.Nodes[0].Allocatable == nil || *view.Nodes[0].Allocatable != 7 {
		t.Fatalf("GET /ui/cluster: %s, want node k8s-a on node-a with allocatable 7", r.body)
	}
}

// TestConsoleConfigIsValidated: a bad console node is a configuration error of New.
func TestConsoleConfigIsValidated(t *testing.T) {
	_, err := server.New(server.Config{Auth: server.AuthNone, Console: console.Config{Nodes: []console.Node{{Name: "n", URL: "ftp://x"}}}})
	if err == nil || !strings.Contains(err.Error(), "ftp://x") {
		t.Fatalf("New: %v, want the bad URL named", err)
	}
}

// TestConsoleTrailingSlashRedirects: GET /ui/ is a 301 to /ui (it was a JSON 404), whose
// page and files load as they do without the slash; other paths under /ui/ stay 404.
func TestConsoleTrailingSlashRedirects(t *testing.T) {
	tc := startCloud(t, server.Config{})
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(tc.url + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if resp.StatusCode != http.StatusMovedPermanently || err != nil || loc.String() != tc.url+"/ui" {
		t.Fatalf("GET /ui/: %d, Location %q (%v), want 301 to /ui", resp.StatusCode, resp.Header.Get("Location"), err)
	}
	// Followed, as a browser does: the page, then its files, relative to where it landed.
	resp, err = http.Get(tc.url + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/ui" || !strings.Contains(string(body), "<title>fakecloud console") {
		t.Fatalf("GET /ui/ followed: %d at %s, want the console page at /ui", resp.StatusCode, resp.Request.URL.Path)
	}
	for _, p := range []string{"ui/console.js", "ui/console.css", "v1/quotas"} {
		u, _ := resp.Request.URL.Parse(p)
		if r := tc.do(t, http.MethodGet, u.Path, readerToken, ""); r.status != http.StatusOK {
			t.Errorf("GET %s (%s relative to the page): %d", u.Path, p, r.status)
		}
	}
	if r := tc.do(t, http.MethodGet, "/ui//", "", ""); r.status != http.StatusNotFound {
		t.Errorf("GET /ui//: %d, want 404", r.status)
	}
}
