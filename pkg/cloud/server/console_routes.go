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
