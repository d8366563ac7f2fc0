package server

import (
	_ "embed"
	"net/http"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

//go:embed openapi.json
var openAPIDocument []byte

// public marks routes that need no token.
const public Role = ""

// router builds every route of fakecloud-api.md, in one place. Each API route names the
// weakest role that may call it; GETs are open to readers.
func (s *Server) router() *mux.Router {
	r := mux.NewRouter()
	r.NotFoundHandler = s.statusHandler("notFound", cloud.CodeNotFound)
	r.MethodNotAllowedHandler = s.methodNotAllowedHandler(r)

	handle := func(method, path, name string, need Role, h handlerFunc) {
		r.Handle(path, s.route(name, need, h)).Methods(method).Name(name)
	}
	handle(http.MethodGet, "/healthz", "healthz", public, s.healthz)
	handle(http.MethodGet, "/readyz", "readyz", public, s.readyz)
	r.Handle("/metrics", promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{})).Methods(http.MethodGet).Name("metrics")
	r.HandleFunc("/openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(openAPIDocument)
	}).Methods(http.MethodGet).Name("openapi")

	handle(http.MethodGet, "/v1/instance-types", "listInstanceTypes", RoleReader, s.listInstanceTypes)

	handle(http.MethodPost, "/v1/instances", "createInstance", RoleAdmin, s.createInstance)
	handle(http.MethodGet, "/v1/instances", "listInstances", RoleReader, s.listInstances)
	handle(http.MethodGet, "/v1/instances/{id}", "getInstance", RoleReader, s.getInstance)
	handle(http.MethodPatch, "/v1/instances/{id}", "patchInstance", RoleAdmin, s.patchInstance)
	handle(http.MethodGet, "/v1/instances/{id}/capacity", "getCapacity", RoleReader, s.getCapacity)

	handle(http.MethodPost, "/v1/volumes", "createVolume", RoleDriver, s.createVolume)
	handle(http.MethodGet, "/v1/volumes", "listVolumes", RoleReader, s.listVolumes)
	handle(http.MethodGet, "/v1/volumes/{id}", "getVolume", RoleReader, s.getVolume)
	handle(http.MethodDelete, "/v1/volumes/{id}", "deleteVolume", RoleDriver, s.deleteVolume)
	handle(http.MethodPost, "/v1/volumes/{id}/attach", "attachVolume", RoleDriver, s.attachVolume)
	handle(http.MethodPost, "/v1/volumes/{id}/detach", "detachVolume", RoleDriver, s.detachVolume)
	handle(http.MethodPost, "/v1/volumes/{id}/resize", "resizeVolume", RoleDriver, s.resizeVolume)

	handle(http.MethodPost, "/v1/snapshots", "createSnapshot", RoleDriver, s.createSnapshot)
	handle(http.MethodGet, "/v1/snapshots", "listSnapshots", RoleReader, s.listSnapshots)
	handle(http.MethodGet, "/v1/snapshots/{id}", "getSnapshot", RoleReader, s.getSnapshot)
	handle(http.MethodDelete, "/v1/snapshots/{id}", "deleteSnapshot", RoleDriver, s.deleteSnapshot)

	handle(http.MethodGet, "/v1/quotas", "getQuotas", RoleReader, s.getQuotas)
	handle(http.MethodPatch, "/v1/quotas", "patchQuotas", RoleAdmin, s.patchQuotas)

	handle(http.MethodPost, "/v1/faults", "createFault", RoleAdmin, s.createFault)
	handle(http.MethodGet, "/v1/faults", "listFaults", RoleReader, s.listFaults)
	handle(http.MethodDelete, "/v1/faults/{id}", "deleteFault", RoleAdmin, s.deleteFault)
	handle(http.MethodDelete, "/v1/faults", "clearFaults", RoleAdmin, s.clearFaults)

	handle(http.MethodGet, "/v1/events", "listEvents", RoleReader, s.listEvents)
	handle(http.MethodPost, "/v1/reset", "reset", RoleAdmin, s.reset)
	return r
}
