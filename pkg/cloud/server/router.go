package server

import (
	_ "embed"
	"net/http"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/console"
)

//go:embed openapi.json
var openAPIDocument []byte

// public marks routes that need no token.
const public Role = ""

// router builds every route of docs/fakecloud-api.md, in one place. Each API route names the
// weakest role that may call it; GETs are open to readers.
//
// Routes match the request's escaped path, never a cleaned one: an ID is one path segment
// with '/' escaped as %2F (cloud.Client does that), and a path with "." or ".." steps or
// doubled slashes matches no route (404). gorilla/mux would otherwise clean the path and
// answer 301 to the cleaned one, which took "../../etc" as a volume ID to another route.
// The server redirects only GET /ui/ to the console's page, /ui.
//
// Routes whose handlers read a JSON body are registered with handleBody; every other API
// route refuses a request that carries a body (400 InvalidArgument), so a body meant for
// another route is never silently ignored.
func (s *Server) router() *mux.Router {
	r := mux.NewRouter().UseEncodedPath().SkipClean(true)
	r.NotFoundHandler = s.statusHandler("notFound", cloud.CodeNotFound)
	r.MethodNotAllowedHandler = s.methodNotAllowedHandler(r)

	add := func(method, path, name string, need Role, opts routeOpts, h handlerFunc) {
		opts.pattern = method + " " + path
		if len(opts.query) > 0 {
			s.routeQuery[name] = opts.query
		}
		r.Handle(path, s.route(name, need, opts, h)).Methods(method).Name(name)
	}
	// handle's query lists the query parameters the route takes, the only ones it accepts
	// (routeOpts.query); every other route takes none.
	handle := func(method, path, name string, need Role, h handlerFunc, query ...string) {
		add(method, path, name, need, routeOpts{query: query}, h)
	}
	page := []string{"maxResults", "pageToken"}
	handleBody := func(method, path, name string, need Role, h handlerFunc) {
		add(method, path, name, need, routeOpts{body: true}, h)
	}
	// The answers that grow with the fleet take a turn of s.heavy, so that many readers at
	// once cannot hold many renderings of them (issue 24, item 9).
	// The routes whose handlers compare If-Match with the revision.
	handleIfMatch := func(method, path, name string, need Role, h handlerFunc) {
		add(method, path, name, need, routeOpts{body: true, ifMatch: true}, h)
	}
	handleHeavy := func(method, path, name string, need Role, h handlerFunc) {
		add(method, path, name, need, routeOpts{heavy: true}, h)
	}
	// The routes every driver calls all the time come first: gorilla/mux tries routes in
	// order, a path regexp each, and no two routes match the same method and path, so the
	// order changes nothing but the cost (attach was the 16th).
	handleBody(http.MethodPost, "/v1/volumes/{id}/attach", "attachVolume", RoleDriver, s.attachVolume)
	handleBody(http.MethodPost, "/v1/volumes/{id}/detach", "detachVolume", RoleDriver, s.detachVolume)
	handle(http.MethodGet, "/v1/volumes/{id}", "getVolume", RoleReader, s.getVolume, "waitFor", "instanceId", "timeoutMs")
	handle(http.MethodGet, "/v1/instances/{id}/capacity", "getCapacity", RoleReader, s.getCapacity)

	handle(http.MethodGet, "/healthz", "healthz", public, s.healthz)
	handle(http.MethodGet, "/readyz", "readyz", public, s.readyz)
	// /metrics names every instance, so it needs the reader role like every other read
	// unless --metrics-open opens it.
	metricsRole := RoleReader
	if s.cfg.MetricsOpen {
		metricsRole = public
	}
	scrape := promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{})
	handleHeavy(http.MethodGet, "/metrics", "metrics", metricsRole, func(*http.Request, caller) (*reply, error) {
		return &reply{serve: scrape}, nil
	})
	r.HandleFunc("/openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(openAPIDocument)
	}).Methods(http.MethodGet).Name("openapi")

	handle(http.MethodGet, "/v1/instance-types", "listInstanceTypes", RoleReader, s.listInstanceTypes)

	handleBody(http.MethodPost, "/v1/instances", "createInstance", RoleAdmin, s.createInstance)
	handleHeavy(http.MethodGet, "/v1/instances", "listInstances", RoleReader, s.listInstances)
	handle(http.MethodGet, "/v1/instances/{id}", "getInstance", RoleReader, s.getInstance)
	handleIfMatch(http.MethodPatch, "/v1/instances/{id}", "patchInstance", RoleAdmin, s.patchInstance)
	handleBody(http.MethodPut, "/v1/instances/{id}/health", "setInstanceHealth", RoleAdmin, s.setInstanceHealth)

	handleBody(http.MethodPost, "/v1/volumes", "createVolume", RoleDriver, s.createVolume)
	handle(http.MethodGet, "/v1/volumes", "listVolumes", RoleReader, s.listVolumes, page...)
	handle(http.MethodDelete, "/v1/volumes/{id}", "deleteVolume", RoleDriver, s.deleteVolume)
	handleBody(http.MethodPost, "/v1/volumes/{id}/resize", "resizeVolume", RoleDriver, s.resizeVolume)
	handleBody(http.MethodPost, "/v1/volumes/{id}/modify", "modifyVolume", RoleDriver, s.modifyVolume)
	handleBody(http.MethodPut, "/v1/volumes/{id}/health", "setVolumeHealth", RoleAdmin, s.setVolumeHealth)

	handleBody(http.MethodPost, "/v1/snapshots", "createSnapshot", RoleDriver, s.createSnapshot)
	handle(http.MethodGet, "/v1/snapshots", "listSnapshots", RoleReader, s.listSnapshots, "snapshotId", "sourceVolumeId", "maxResults", "pageToken")
	handle(http.MethodGet, "/v1/snapshots/{id}", "getSnapshot", RoleReader, s.getSnapshot)
	handle(http.MethodDelete, "/v1/snapshots/{id}", "deleteSnapshot", RoleDriver, s.deleteSnapshot)

	handleBody(http.MethodPost, "/v1/group-snapshots", "createGroupSnapshot", RoleDriver, s.createGroupSnapshot)
	handle(http.MethodGet, "/v1/group-snapshots/{id}", "getGroupSnapshot", RoleReader, s.getGroupSnapshot)
	handle(http.MethodDelete, "/v1/group-snapshots/{id}", "deleteGroupSnapshot", RoleDriver, s.deleteGroupSnapshot)

	handle(http.MethodGet, "/v1/quotas", "getQuotas", RoleReader, s.getQuotas)
	handleIfMatch(http.MethodPatch, "/v1/quotas", "patchQuotas", RoleAdmin, s.patchQuotas)

	handleBody(http.MethodPost, "/v1/faults", "createFault", RoleAdmin, s.createFault)
	handle(http.MethodGet, "/v1/faults", "listFaults", RoleReader, s.listFaults, page...)
	handle(http.MethodGet, "/v1/faults/{id}", "getFault", RoleReader, s.getFault)
	handle(http.MethodDelete, "/v1/faults/{id}", "deleteFault", RoleAdmin, s.deleteFault)
	handle(http.MethodDelete, "/v1/faults", "clearFaults", RoleAdmin, s.clearFaults)

	handle(http.MethodGet, "/v1/events", "listEvents", RoleReader, s.listEvents, "sinceRevision", "sinceSeq", "maxResults", "pageToken")
	handle(http.MethodPost, "/v1/reset", "reset", RoleAdmin, s.reset)

	handleBody(http.MethodPost, "/v1/scenarios", "createScenario", RoleAdmin, s.createScenario)
	handle(http.MethodGet, "/v1/scenarios", "listScenarios", RoleReader, s.listScenarios)
	handle(http.MethodGet, "/v1/scenarios/{id}", "getScenario", RoleReader, s.getScenario)
	handle(http.MethodDelete, "/v1/scenarios/{id}", "cancelScenario", RoleAdmin, s.cancelScenario)

	// The web console (package console): the page at / and /ui (the same page), its two files, and the node plugins' capacity state it plots.
	for path, asset := range map[string]string{"/": console.IndexName, "/ui": console.IndexName,
		"/ui/" + console.ScriptName: console.ScriptName, "/ui/" + console.StyleName: console.StyleName} {
		r.Handle(path, s.console.Handler(asset)).Methods(http.MethodGet).Name("console")
	}
	// /ui/ is what a browser or a person adds a slash to; the page at /ui/ would load its
	// API calls (relative, "v1/events") from /ui/v1/..., so it is a redirect to /ui, not the
	// page itself. Location is relative ("../ui"), so a proxy serving the cloud under a path
	// prefix keeps it.
	r.Handle("/ui/", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Location", "../ui")
		w.WriteHeader(http.StatusMovedPermanently)
	})).Methods(http.MethodGet).Name("consoleSlash")
	handle(http.MethodGet, "/ui/nodes", "consoleNodes", RoleReader, s.consoleNodes)
	handle(http.MethodGet, "/ui/nodes/{id}/capacity", "consoleNodeCapacity", RoleReader, s.consoleNodeCapacity)
	handle(http.MethodGet, "/ui/cluster", "consoleCluster", RoleReader, s.consoleCluster)
	return r
}
