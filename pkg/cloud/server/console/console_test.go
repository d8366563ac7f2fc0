package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/console"
)

func TestParseNode(t *testing.T) {
	tests := []struct {
		in      string
		want    console.Node
		wantErr string
	}{
		{"node-a1=http://127.0.0.1:9809", console.Node{Name: "node-a1", URL: "http://127.0.0.1:9809"}, ""},
		{"n=https://plugin.example:443/prefix/", console.Node{Name: "n", URL: "https://plugin.example:443/prefix"}, ""},
		{"node-a1", console.Node{}, "want NAME=URL"},
		{"=http://127.0.0.1:1", console.Node{}, "console node name"},
		{"n=ftp://127.0.0.1:1", console.Node{}, "want http(s)"},
		{"n=http://", console.Node{}, "want http(s)"},
		{"n=http://h:1/?x=1", console.Node{}, "no query"},
		{"n=http://u:p@h:1", console.Node{}, "user"},
		{"a\nb=http://h:1", console.Node{}, "console node name"},
		{strings.Repeat("x", cloud.MaxIDBytes+1) + "=http://h:1", console.Node{}, "console node name"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := console.ParseNode(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseNode: %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseNode = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	many := make([]console.Node, console.MaxNodes+1)
	for i := range many {
		many[i] = console.Node{Name: "n" + strings.Repeat("x", i%100) + string(rune('a'+i%26)), URL: "http://h:1"}
	}
	tests := []struct {
		name string
		cfg  console.Config
		want []string
	}{
		{"none", console.Config{}, nil},
		{"duplicate and bad URL at once", console.Config{Nodes: []console.Node{{Name: "a", URL: "http://h:1"}, {Name: "a", URL: "x"}}},
			[]string{`"a" given twice`, `URL "x"`}},
		{"too many", console.Config{Nodes: many}, []string{"at most 256"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if _, err := console.New(tt.cfg); err == nil {
				t.Error("New accepted what Validate refused")
			}
		})
	}
}

// TestAssets: each file has its content type and the policy that lets the page load only its
// own files; the page names both files (relative, so it works at / and /ui) and loads nothing
// from elsewhere.
func TestAssets(t *testing.T) {
	c, err := console.New(console.Config{})
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string]string{}
	for name, ct := range map[string]string{console.IndexName: "text/html", console.ScriptName: "text/javascript", console.StyleName: "text/css"} {
		rec := httptest.NewRecorder()
		c.Handler(name).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ui", nil))
		if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), ct) {
			t.Errorf("%s: %d %q, want 200 %s", name, rec.Code, rec.Header().Get("Content-Type"), ct)
		}
		csp := rec.Header().Get("Content-Security-Policy")
		for _, w := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'"} {
			if !strings.Contains(csp, w) {
				t.Errorf("%s: Content-Security-Policy %q lacks %q", name, csp, w)
			}
		}
		bodies[name] = rec.Body.String()
	}
	for _, w := range []string{`src="ui/` + console.ScriptName + `"`, `href="ui/` + console.StyleName + `"`} {
		if !strings.Contains(bodies[console.IndexName], w) {
			t.Errorf("index.html lacks %s", w)
		}
	}
	for name, b := range bodies {
		for _, bad := range []string{`src="http`, `href="http`, `url(http`, "@import", "innerHTML"} {
			if strings.Contains(b, bad) {
				t.Errorf("%s contains %q: the page must load nothing from elsewhere and write no HTML from data", name, bad)
			}
		}
	}
}

func TestHandlerUnknownAssetPanics(t *testing.T) {
	c, err := console.New(console.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Handler of an unknown file did not panic")
		}
	}()
	c.Handler("other.js")
}

// TestCapacity relays a plugin's /debug/capacity and maps every failure to a cloud code.
func TestCapacity(t *testing.T) {
	plugin := http.NewServeMux()
	plugin.HandleFunc("GET /ok/debug/capacity", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"nodeId":"n","mode":"fresh","reported":7}`)
	})
	plugin.HandleFunc("GET /controller/debug/capacity", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no capacity reporter in mode controller", http.StatusNotFound)
	})
	plugin.HandleFunc("GET /text/debug/capacity", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "not json")
	})
	plugin.HandleFunc("GET /huge/debug/capacity", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `"`+strings.Repeat("x", console.MaxDebugBytes)+`"`)
	})
	ps := httptest.NewServer(plugin)
	defer ps.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()

	var nodes []console.Node
	for _, n := range []string{"ok", "controller", "text", "huge"} {
		nodes = append(nodes, console.Node{Name: n, URL: ps.URL + "/" + n})
	}
	nodes = append(nodes, console.Node{Name: "gone", URL: gone.URL})
	c, err := console.New(console.Config{Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Nodes().Nodes; len(got) != len(nodes) || got[0] != nodes[0] {
		t.Fatalf("Nodes() = %+v, want %+v", got, nodes)
	}
	tests := []struct {
		node     string
		wantCode cloud.Code
		wantMsg  string
	}{
		{"ok", "", ""},
		{"controller", cloud.CodeUnavailable, "answered 404"},
		{"text", cloud.CodeUnavailable, "not JSON"},
		{"huge", cloud.CodeUnavailable, "over 262144 bytes"},
		{"gone", cloud.CodeUnavailable, `node plugin "gone"`},
		{"unknown", cloud.CodeNotFound, "--console-node"},
	}
	for _, tt := range tests {
		t.Run(tt.node, func(t *testing.T) {
			got, err := c.Capacity(context.Background(), tt.node)
			if cloud.CodeOf(err) != tt.wantCode || (err != nil && !strings.Contains(err.Error(), tt.wantMsg)) {
				t.Fatalf("Capacity: %v, want code %q with %q", err, tt.wantCode, tt.wantMsg)
			}
			if tt.wantCode == "" && string(got) != `{"nodeId":"n","mode":"fresh","reported":7}` {
				t.Fatalf("Capacity = %s, want the plugin's JSON as sent", got)
			}
		})
	}
}
