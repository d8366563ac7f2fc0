package admin

import (
	"context"
	"fmt"
	"net/http"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// CreateFault calls POST /v1/faults (admin) and returns the rule with its ID. Codes:
// InvalidArgument (400: an ID set, a missing or unknown operation, an unknown code,
// transition or health, a bad probability, negative counts, latency or TTL out of range, a
// field over 128 bytes; every problem at once, with the value likely meant),
// ServerLimitExceeded (409: the server holds its maximum of rules, 1000 by default),
// Unauthenticated (401), AccessDenied (403).
func (c *Client) CreateFault(ctx context.Context, r cloud.FaultRule) (*cloud.FaultRule, error) {
	var out cloud.FaultRule
	if err := c.Do(ctx, cloud.Request{Method: http.MethodPost, Path: "/v1/faults", Body: r}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListFaults returns every live rule with its Fired count, walking the pages of
// GET /v1/faults (at most maxListPages of them). Codes: Unauthenticated, AccessDenied.
func (c *Client) ListFaults(ctx context.Context) ([]cloud.FaultRule, error) {
	var all []cloud.FaultRule
	token := ""
	for range maxListPages {
		page, err := c.ListFaultsPage(ctx, 0, token)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Faults...)
		if token = page.NextPageToken; token == "" {
			return all, nil
		}
	}
	return nil, fmt.Errorf("GET /v1/faults: more than %d pages", maxListPages)
}

// ListFaultsPage calls GET /v1/faults?maxResults=&pageToken= (maxResults 0: the server's
// default of 100; at most 1000): one page of live rules in creation order. Codes:
// InvalidArgument (bad page token), Unauthenticated, AccessDenied.
func (c *Client) ListFaultsPage(ctx context.Context, maxResults int, pageToken string) (*cloud.FaultList, error) {
	q := pageQuery(maxResults, pageToken)
	var out cloud.FaultList
	if err := c.Do(ctx, cloud.Request{Method: http.MethodGet, Path: "/v1/faults", Query: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetFault calls GET /v1/faults/{id} (reader): one live rule with its Fired count. Codes:
// FaultNotFound (unknown or expired), InvalidArgument (malformed ID), Unauthenticated,
// AccessDenied.
func (c *Client) GetFault(ctx context.Context, id string) (*cloud.FaultRule, error) {
	seg, err := cloud.PathSegment("fault rule ID", id)
	if err != nil {
		return nil, err
	}
	var out cloud.FaultRule
	if err := c.Do(ctx, cloud.Request{Method: http.MethodGet, Path: "/v1/faults/" + seg}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteFault calls DELETE /v1/faults/{id} (admin). Codes: FaultNotFound, Unauthenticated,
// AccessDenied.
func (c *Client) DeleteFault(ctx context.Context, id string) error {
	seg, err := cloud.PathSegment("fault rule ID", id)
	if err != nil {
		return err
	}
	return c.Do(ctx, cloud.Request{Method: http.MethodDelete, Path: "/v1/faults/" + seg}, nil)
}

// ClearFaults calls DELETE /v1/faults (admin), removing every rule. Codes: Unauthenticated,
// AccessDenied.
func (c *Client) ClearFaults(ctx context.Context) error {
	return c.Do(ctx, cloud.Request{Method: http.MethodDelete, Path: "/v1/faults"}, nil)
}
