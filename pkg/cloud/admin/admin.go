// Package admin is the Go client of the fake cloud's admin and test API
// (docs/fakecloud-api.md): instances and their health, quotas, fault rules, the event log,
// reset, and the node plugins the console relays, beside the driver's calls of cloud.Client,
// which it embeds. Tests, benchmarks, the scenario runner and the e2e suites use it; the
// driver does not (pkg/csi imports pkg/cloud only).
//
// Every call goes through cloud.Client.Do, the one transport: the same token, user agent,
// timeout, bounds and errors (a *cloud.Error for a non-2xx answer, matched with errors.Is
// on the cloud sentinels or cloud.CodeOf). Each method's doc names the route, the role it
// needs (admin or reader) and the codes it can return, with their HTTP statuses where they
// are not the code's usual one (Code.HTTPStatus).
package admin

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// Client is a cloud.Client (the driver's calls) with the admin and test calls of the fake
// cloud's API. It is safe for concurrent use.
type Client struct {
	*cloud.Client
}

// NewClient returns a client of the fake cloud at baseURL (e.g. "http://127.0.0.1:8080"),
// with opts as cloud.NewClient takes them; the admin calls need an admin token
// (cloud.WithToken), the reads a reader's. It makes no network calls.
func NewClient(baseURL string, opts ...cloud.Option) (*Client, error) {
	c, err := cloud.NewClient(baseURL, opts...)
	if err != nil {
		return nil, err
	}
	return &Client{Client: c}, nil
}

// AttachVolume is cloud.Client.Attach read-write, in the words of a test: it calls POST
// /v1/volumes/{id}/attach with {"instanceId": instanceID}; its answer and codes are Attach's.
func (c *Client) AttachVolume(ctx context.Context, volumeID, instanceID string) (*cloud.Attachment, error) {
	return c.Attach(ctx, volumeID, cloud.AttachRequest{InstanceID: instanceID})
}

// maxListPages bounds how many pages ListFaults and ListEvents walk, so that a server that
// keeps handing out tokens cannot keep a caller looping: by default the server holds at most
// 1,000 rules (10 pages of 100) and 10,000 events (10 pages of 1,000).
const maxListPages = 10000

// pageQuery is the query of a page of a list: maxResults (0: the server's default) and
// pageToken (empty: the first page).
func pageQuery(maxResults int, pageToken string) url.Values {
	q := url.Values{}
	if maxResults != 0 {
		q.Set("maxResults", strconv.Itoa(maxResults))
	}
	if pageToken != "" {
		q.Set("pageToken", pageToken)
	}
	return q
}

// ifMatchHeader is the If-Match header of a precondition on revision rev, the ETag as the
// server sends it ("12", quotes included); nil for rev 0, no precondition.
func ifMatchHeader(rev uint64) http.Header {
	if rev == 0 {
		return nil
	}
	return http.Header{"If-Match": {strconv.Quote(strconv.FormatUint(rev, 10))}}
}
