package server

import (
	"fmt"

	"github.com/gorilla/mux"
)

// Route is one method and path template the server serves, e.g. POST /v1/volumes/{id}/attach.
type Route struct {
	Method, Path, Name string
	// Query is the query parameters the route takes (routeOpts.query), nil for none.
	Query []string
}

// Routes lists every route of s's router, for documentation checks.
func Routes(s *Server) []Route {
	var out []Route
	r, ok := s.handler.(*mux.Router)
	if !ok {
		return nil
	}
	_ = r.Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		path, err := route.GetPathTemplate()
		if err != nil {
			return fmt.Errorf("route %s: %w", route.GetName(), err)
		}
		methods, err := route.GetMethods()
		if err != nil {
			return fmt.Errorf("route %s: %w", route.GetName(), err)
		}
		for _, m := range methods {
			out = append(out, Route{Method: m, Path: path, Name: route.GetName(), Query: s.routeQuery[route.GetName()]})
		}
		return nil
	})
	return out
}
