package admin

import (
	"context"
	"net/http"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// ConsoleNode is a node plugin whose capacity state the fake cloud's console relays
// (fakecloud --console-node=NAME=URL): Name is the node (an instance ID), URL its plugin's
// HTTP server.
type ConsoleNode struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

// ConsoleNodes calls GET /ui/nodes: the node plugins the console relays, none when the fake
// cloud was given no --console-node. Codes: Unauthenticated, AccessDenied.
func (c *Client) ConsoleNodes(ctx context.Context) ([]ConsoleNode, error) {
	var out struct {
		Nodes []ConsoleNode `json:"nodes"`
	}
	if err := c.Do(ctx, cloud.Request{Method: http.MethodGet, Path: "/ui/nodes"}, &out); err != nil {
		return nil, err
	}
	return out.Nodes, nil
}

// ConsoleNodeCapacity calls GET /ui/nodes/{name}/capacity, the node plugin's GET
// /debug/capacity relayed, and decodes its JSON into out (the driver's
// capacity.DebugInfo, or the part of it the caller needs). Codes: NotFound (no such console
// node), Unavailable (the plugin did not answer with JSON), Unauthenticated, AccessDenied.
func (c *Client) ConsoleNodeCapacity(ctx context.Context, name string, out any) error {
	seg, err := cloud.PathSegment("console node", name)
	if err != nil {
		return err
	}
	return c.Do(ctx, cloud.Request{Method: http.MethodGet, Path: "/ui/nodes/" + seg + "/capacity"}, out)
}
