package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

// TestTwoAuthorizationHeadersRefused: a request with two Authorization headers is 400
// InvalidArgument saying so, whichever token comes first and whatever the route needs; the
// first header counted before (a reader's token first was 403, an admin's first 200), and the
// refused request changes nothing.
func TestTwoAuthorizationHeadersRefused(t *testing.T) {
	for _, auth := range []server.AuthMode{server.AuthTokens, server.AuthNone} {
		tc := startCloud(t, server.Config{Auth: auth})
		before := tc.snapshot(t)
		for _, c := range []struct {
			method, path string
			tokens       []string
		}{
			{http.MethodPost, "/v1/reset", []string{readerToken, adminToken}},
			{http.MethodPost, "/v1/reset", []string{adminToken, readerToken}},
			{http.MethodPost, "/v1/reset", []string{adminToken, adminToken}},
			{http.MethodGet, "/v1/quotas", []string{readerToken, "no-such-token"}},
			{http.MethodGet, "/healthz", []string{readerToken, adminToken}},
		} {
			req, err := http.NewRequest(c.method, tc.url+c.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, tok := range c.tokens {
				req.Header.Add("Authorization", "Bearer "+tok)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var e cloud.Error
			if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || e.Code != cloud.CodeInvalidArgument ||
				!strings.Contains(e.Message, "2 Authorization headers; send one") {
				t.Errorf("auth=%s %s %s with tokens %v: %d %s, want 400 InvalidArgument saying there are 2 Authorization headers",
					auth, c.method, c.path, c.tokens, resp.StatusCode, body)
			}
		}
		if after := tc.snapshot(t); after.Revision != before.Revision {
			t.Errorf("auth=%s: the refused requests changed the revision: %d -> %d", auth, before.Revision, after.Revision)
		}
	}
}
