package server_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

// TestUnknownQueryParametersRefused: every route refuses a query parameter it does not
// declare with 400 InvalidArgument, naming it and the one it was likely meant to be, before
// the handler runs; a typo of sinceSeq read the whole audit log from seq 1 before. A
// parameter given twice and a query that does not parse are refused the same way.
func TestUnknownQueryParametersRefused(t *testing.T) {
	tc := startCloud(t, server.Config{})
	must[*cloud.Volume](t)(tc.driver.CreateVolume(context.Background(), cloud.CreateVolumeRequest{Name: "v", SizeBytes: 1, Zone: "zone-a"}))
	before := tc.snapshot(t)
	for _, c := range []struct{ method, path, token, want string }{
		{http.MethodGet, "/v1/events?sinceseq=4", readerToken, `unknown query parameter "sinceseq"; did you mean "sinceSeq"? (GET /v1/events takes sinceRevision, sinceSeq, maxResults, pageToken)`},
		{http.MethodGet, "/v1/events?sinceSeq=1&sinceSeq=2", readerToken, `query parameter sinceSeq given 2 times`},
		{http.MethodGet, "/v1/events?sinceSeq=1;maxResults=2", readerToken, `does not parse`},
		{http.MethodGet, "/v1/volumes?maxresult=1", readerToken, `did you mean "maxResults"?`},
		{http.MethodGet, "/v1/volumes?pagetoken=x", readerToken, `did you mean "pageToken"?`},
		{http.MethodGet, "/v1/snapshots?sourceVolumeID=v", readerToken, `did you mean "sourceVolumeId"?`},
		{http.MethodGet, "/v1/faults?maxResult=5", readerToken, `did you mean "maxResults"?`},
		{http.MethodGet, "/v1/volumes/vol-x?waitfor=attached&instanceId=node-a", readerToken, `did you mean "waitFor"?`},
		{http.MethodGet, "/v1/instances?maxResults=1", readerToken, `unknown query parameter "maxResults" (GET /v1/instances takes no query parameters)`},
		{http.MethodGet, "/v1/instances/node-a/capacity?verbose=1", readerToken, `takes no query parameters`},
		{http.MethodGet, "/v1/scenarios?state=failed", readerToken, `takes no query parameters`},
		{http.MethodGet, "/v1/quotas?x=1", readerToken, `takes no query parameters`},
		{http.MethodPost, "/v1/reset?force=1", adminToken, `unknown query parameter "force" (POST /v1/reset takes no query parameters)`},
		{http.MethodDelete, "/v1/faults?all=1", adminToken, `takes no query parameters`},
		{http.MethodGet, "/ui/nodes?x=1", readerToken, `takes no query parameters`},
	} {
		r := tc.do(t, c.method, c.path, c.token, "")
		if r.status != http.StatusBadRequest {
			t.Errorf("%s %s: %d %s, want 400", c.method, c.path, r.status, r.body)
			continue
		}
		if e := r.errorBody(t); e.Code != cloud.CodeInvalidArgument || !strings.Contains(e.Message, c.want) {
			t.Errorf("%s %s: %+v, want InvalidArgument with %q", c.method, c.path, e, c.want)
		}
	}
	if after := tc.snapshot(t); after.Revision != before.Revision {
		t.Errorf("the refused requests changed the revision: %d -> %d", before.Revision, after.Revision)
	}
	// The declared parameters still work.
	for _, p := range []string{"/v1/events?sinceSeq=0&maxResults=5", "/v1/events?sinceRevision=0", "/v1/volumes?maxResults=1",
		"/v1/snapshots?sourceVolumeId=v&snapshotId=s&maxResults=1", "/v1/faults?maxResults=1000", "/v1/instances", "/v1/events?"} {
		if r := tc.do(t, http.MethodGet, p, readerToken, ""); r.status != http.StatusOK {
			t.Errorf("GET %s: %d %s, want 200", p, r.status, r.body)
		}
	}
}

// TestConsoleSendsOnlyDeclaredQueryParameters: every query string the console's JavaScript
// sends (with its ${...} values as 0) is one its route takes, now that routes refuse the
// others.
func TestConsoleSendsOnlyDeclaredQueryParameters(t *testing.T) {
	tc := startCloud(t, server.Config{})
	js := tc.do(t, http.MethodGet, "/ui/console.js", "", "")
	if js.status != http.StatusOK {
		t.Fatalf("GET /ui/console.js: %d", js.status)
	}
	calls := regexp.MustCompile("api\\(\"GET\", [\"`]((?:v1|ui)/[^\"`]*\\?[^\"`]*)[\"`]").FindAllStringSubmatch(string(js.body), -1)
	if len(calls) < 3 {
		t.Fatalf("found %d GETs with a query in console.js, want the events and faults reads (3 or more)", len(calls))
	}
	values := regexp.MustCompile(`\$\{[^}]*\}`)
	for _, c := range calls {
		p := "/" + values.ReplaceAllString(c[1], "0")
		if r := tc.do(t, http.MethodGet, p, readerToken, ""); r.status != http.StatusOK {
			t.Errorf("the console's GET %s: %d %s, want 200", p, r.status, r.body)
		}
	}
}
