// Package console is the fake cloud's live web console: one static page (HTML, CSS and
// JavaScript embedded with embed, nothing fetched at run time) that draws every instance's
// attach slots, the account quotas, the fault rules and the audit events by polling the
// fake cloud's own public API, and changes them through the same API with the token the
// user types in. The page holds the token in the browser's memory only (or in the URL
// fragment, which browsers never send); the server stores nothing for it.
//
// The page reads only routes that fault rules never match (GET /v1/instances, /v1/quotas,
// /v1/faults, /v1/scenarios, /v1/events), so watching an experiment never changes it: no rule
// fires, no counter moves, no event is written by the console's polling.
//
// Optionally the console also shows, per node, what the node plugin reports: the fake cloud
// proxies each configured plugin's GET /debug/capacity (the browser could not read another
// port's answer: no CORS there) and the page plots it over time beside the cloud's truth.
// The history lives in the page, not in the server.
//
// With a Kubernetes client (fakecloud --console-kubeconfig) the console also shows the
// cluster's side (GET /ui/cluster): per node the driver's CSINode allocatable count, its
// VolumeAttachments and the Pending pods with their reasons, and the pods the scheduler could
// not place. It only lists, a bounded page per kind, at most once per ClusterRefresh for all
// pages together.
package console

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

//go:embed static
var static embed.FS

// Asset is one file of the page: its path under /ui, its content type and bytes.
type Asset struct {
	// Name is the file name, e.g. "console.js"; the page itself is "index.html".
	Name        string
	ContentType string
	data        []byte
}

// The page's files: the HTML page and the two files it loads.
const (
	IndexName  = "index.html"
	ScriptName = "console.js"
	StyleName  = "console.css"
)

// contentSecurityPolicy lets the page load only its own files and talk only to its own
// origin: nothing is fetched from elsewhere, and an injected script could not send a token
// away.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Bounds of the node proxy.
const (
	// MaxNodes bounds --console-node entries; a test bed has a handful of nodes.
	MaxNodes = 256
	// MaxDebugBytes bounds one /debug/capacity answer a plugin may send (a DebugInfo is
	// about 1-2 KiB).
	MaxDebugBytes = 256 << 10
	// DefaultFetchTimeout bounds one proxied /debug/capacity request.
	DefaultFetchTimeout = 2 * time.Second
)

// Node is a node plugin whose capacity reporter the console shows: its node (instance) ID and
// the base URL of its --http-addr server, e.g. http://127.0.0.1:9809.
type Node struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

// NodeList is the answer of GET /ui/nodes.
type NodeList struct {
	Nodes []Node `json:"nodes"`
}

// ParseNode parses one --console-node value, NAME=URL, where NAME is an instance ID
// (cloud.CheckID) and URL an http or https base URL without query or fragment.
func ParseNode(s string) (Node, error) {
	name, raw, ok := strings.Cut(s, "=")
	if !ok {
		return Node{}, fmt.Errorf("console node %s: want NAME=URL (e.g. node-a1=http://127.0.0.1:9809)", cloud.Quote(s))
	}
	n := Node{Name: name, URL: strings.TrimRight(raw, "/")}
	return n, n.validate()
}

func (n Node) validate() error {
	var errs []error
	if err := cloud.CheckID("console node name", n.Name); err != nil {
		errs = append(errs, err)
	}
	u, err := url.Parse(n.URL)
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("console node %s: URL: %w", cloud.Quote(n.Name), err))
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "", u.RawQuery != "", u.Fragment != "", u.User != nil:
		errs = append(errs, fmt.Errorf("console node %s: URL %s: want http(s)://host:port[/path], no query, fragment or user",
			cloud.Quote(n.Name), cloud.Quote(n.URL)))
	}
	return errors.Join(errs...)
}

// driverNameRE is the CSI spec's driver name (GetPluginInfoResponse.name): at most 63
// characters, alphanumerics at both ends, '-' and '.' between.
var driverNameRE = regexp.MustCompile(`^[a-zA-Z0-9]([-a-zA-Z0-9.]{0,61}[a-zA-Z0-9])?$`)

// Config configures a Console. The zero value serves the page without a node view.
type Config struct {
	// Nodes are the node plugins to show; names are unique.
	Nodes []Node
	// Client fetches the plugins' /debug/capacity; default: an http.Client with
	// DefaultFetchTimeout.
	Client *http.Client
	// Kube, when set, turns on the cluster view (GET /ui/cluster): the console lists
	// CSINodes, Pending pods, the driver's VolumeAttachments and Warning events through it,
	// read only (LIST calls, nothing else), at most once per ClusterRefresh. Nil: no cluster
	// view. NewKubeClient makes one from a kubeconfig's rest.Config.
	Kube *KubeClient
	// DriverName is the CSI driver the cluster view reads; default DefaultDriverName.
	DriverName string
	// Now is the cluster view's clock; default time.Now.
	Now func() time.Time
}

// Validate reports every problem of the configuration at once.
func (c *Config) Validate() error {
	var errs []error
	if len(c.Nodes) > MaxNodes {
		errs = append(errs, fmt.Errorf("%d console nodes, at most %d", len(c.Nodes), MaxNodes))
	}
	if c.DriverName != "" && !driverNameRE.MatchString(c.DriverName) {
		errs = append(errs, fmt.Errorf("console driver name %s: want a CSI driver name (1-63 alphanumerics, '-' and '.' between)", cloud.Quote(c.DriverName)))
	}
	seen := map[string]bool{}
	for _, n := range c.Nodes {
		if err := n.validate(); err != nil {
			errs = append(errs, err)
		}
		if seen[n.Name] {
			errs = append(errs, fmt.Errorf("console node %s given twice", cloud.Quote(n.Name)))
		}
		seen[n.Name] = true
	}
	return errors.Join(errs...)
}

// Console serves the page's files and proxies the configured plugins' capacity state.
type Console struct {
	nodes  []Node
	client *http.Client
	assets map[string]Asset
	// cluster is nil without Config.Kube.
	cluster *cluster
}

// New validates cfg and reads the embedded files. It does no I/O beyond the embedded files.
func New(cfg Config) (*Console, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	c := &Console{nodes: slices.Clone(cfg.Nodes), client: cfg.Client, assets: map[string]Asset{}}
	if c.client == nil {
		c.client = &http.Client{Timeout: DefaultFetchTimeout}
	}
	if cfg.Kube != nil {
		c.cluster = &cluster{client: cfg.Kube, driver: cmp.Or(cfg.DriverName, DefaultDriverName), now: cfg.Now}
		if c.cluster.now == nil {
			c.cluster.now = time.Now
		}
	}
	for name, ct := range map[string]string{
		IndexName:  "text/html; charset=utf-8",
		ScriptName: "text/javascript; charset=utf-8",
		StyleName:  "text/css; charset=utf-8",
	} {
		data, err := static.ReadFile("static/" + name)
		if err != nil {
			return nil, fmt.Errorf("console: embedded %s: %w", name, err)
		}
		c.assets[name] = Asset{Name: name, ContentType: ct, data: data}
	}
	return c, nil
}

// Handler serves one of the page's files (IndexName, ScriptName or StyleName) with its
// content type, the content security policy and no caching (a rebuilt binary's page shows at
// once). It panics on another name: the router names the files, not the caller.
func (c *Console) Handler(name string) http.Handler {
	a, ok := c.assets[name]
	if !ok {
		panic("console: no asset " + name)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Content-Type", a.ContentType)
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		h.Set("Referrer-Policy", "no-referrer")
		_, _ = w.Write(a.data)
	})
}

// Nodes returns the configured nodes, in the order given.
func (c *Console) Nodes() NodeList {
	return NodeList{Nodes: append([]Node{}, c.nodes...)}
}

// Capacity fetches node name's GET /debug/capacity and returns its JSON as sent. Errors are
// cloud errors: NotFound for a node that is not configured, Unavailable when the plugin
// cannot be reached, answers other than 200, sends more than MaxDebugBytes or no JSON.
func (c *Console) Capacity(ctx context.Context, name string) (json.RawMessage, error) {
	i := slices.IndexFunc(c.nodes, func(n Node) bool { return n.Name == name })
	if i < 0 {
		return nil, cloud.NewError(cloud.CodeNotFound, "no console node %s (fakecloud --console-node)", cloud.Quote(name))
	}
	n := c.nodes[i]
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.URL+"/debug/capacity", nil)
	if err != nil {
		return nil, cloud.NewError(cloud.CodeUnavailable, "node plugin %s: %v", cloud.Quote(name), err)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, cloud.NewError(cloud.CodeUnavailable, "node plugin %s: %v", cloud.Quote(name), err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxDebugBytes+1))
	switch {
	case err != nil:
		return nil, cloud.NewError(cloud.CodeUnavailable, "node plugin %s: read /debug/capacity: %v", cloud.Quote(name), err)
	case len(body) > MaxDebugBytes:
		return nil, cloud.NewError(cloud.CodeUnavailable, "node plugin %s: /debug/capacity sent over %d bytes", cloud.Quote(name), MaxDebugBytes)
	case resp.StatusCode != http.StatusOK:
		return nil, cloud.NewError(cloud.CodeUnavailable, "node plugin %s: /debug/capacity answered %d: %s", cloud.Quote(name), resp.StatusCode,
			cloud.Quote(strings.TrimSpace(string(body))))
	case !json.Valid(body):
		return nil, cloud.NewError(cloud.CodeUnavailable, "node plugin %s: /debug/capacity is not JSON", cloud.Quote(name))
	}
	return json.RawMessage(body), nil
}
