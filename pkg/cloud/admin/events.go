package admin

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// ListEvents returns every retained audit event with Revision > sinceRevision, oldest
// first (the server keeps the last 10,000, at most 4 MiB of them, by default), walking the
// pages of GET /v1/events at the largest page size. Codes: InvalidArgument, Unauthenticated,
// AccessDenied.
func (c *Client) ListEvents(ctx context.Context, sinceRevision uint64) ([]cloud.Event, error) {
	var all []cloud.Event
	token := ""
	for range maxListPages {
		page, err := c.ListEventsPage(ctx, EventQuery{SinceRevision: sinceRevision, MaxResults: 1000, PageToken: token})
		if err != nil {
			return nil, err
		}
		all = append(all, page.Events...)
		if token = page.NextPageToken; token == "" {
			return all, nil
		}
	}
	return nil, fmt.Errorf("GET /v1/events: more than %d pages", maxListPages)
}

// EventQuery selects a page of GET /v1/events: events with Revision > SinceRevision, or
// (when UseSeq) Seq > SinceSeq; MaxResults 0 is the server's default of 100, at most 1000.
type EventQuery struct {
	SinceRevision uint64
	SinceSeq      uint64
	UseSeq        bool
	MaxResults    int
	PageToken     string
}

// ListEventsPage calls GET /v1/events?sinceRevision=|sinceSeq=&maxResults=&pageToken=: one
// page of the audit log, with the revision current when it was read. Codes:
// InvalidArgument (bad page token or numbers), Unauthenticated, AccessDenied.
func (c *Client) ListEventsPage(ctx context.Context, eq EventQuery) (*cloud.EventList, error) {
	q := pageQuery(eq.MaxResults, eq.PageToken)
	if eq.UseSeq {
		q.Set("sinceSeq", strconv.FormatUint(eq.SinceSeq, 10))
	} else {
		q.Set("sinceRevision", strconv.FormatUint(eq.SinceRevision, 10))
	}
	var out cloud.EventList
	if err := c.Do(ctx, cloud.Request{Method: http.MethodGet, Path: "/v1/events", Query: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
