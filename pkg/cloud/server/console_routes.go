package server

import "net/http"

// consoleNodes lists the node plugins the console shows (Config.Console.Nodes).
func (s *Server) consoleNodes(*http.Request, caller) (*reply, error) {
	return ok(s.console.Nodes(), 0), nil
}

// consoleNodeCapacity relays node id's GET /debug/capacity: NotFound for a node the console
// does not know, Unavailable when its plugin does not answer with JSON.
func (s *Server) consoleNodeCapacity(r *http.Request, _ caller) (*reply, error) {
	state, err := s.console.Capacity(r.Context(), pathVar(r, "id"))
	if err != nil {
		return nil, err
	}
	return ok(state, 0), nil
}

// consoleCluster is the cluster view (console.ClusterView): enabled false without
// --console-kubeconfig; a cluster that cannot be read is an answer that says why, not an
// error, so the page shows it in place.
func (s *Server) consoleCluster(r *http.Request, _ caller) (*reply, error) {
	return ok(s.console.Cluster(r.Context()), 0), nil
}
