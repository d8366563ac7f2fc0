package server

import (
	"regexp"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// FuzzCanonicalAttachBody holds the attach body's fast path to the strict decoder: whatever
// body the fast path takes, the strict decoder takes too, with the same instance ID. Bodies
// it does not take go to the strict decoder, so they answer as before.
func FuzzCanonicalAttachBody(f *testing.F) {
	for _, s := range []string{
		`{"instanceId":"node-1"}`, `{"instanceId":"node-1"}` + "\n", `{"instanceId":"node-1"} `, `{"instanceId":"node-1"}x`,
		`{"instanceId":"node-1","x":1}`, `{"instanceId":"a\"b"}`, `{"instanceId":"a\\b"}`, `{"instanceId":"\u006e"}`,
		`{"instanceId":""}`, `{"instanceId":"a"}{"instanceId":"b"}`, `{"instanceId":"a"`, `{"instanceId":"é"}`,
		`{"instanceId":"a` + "\t" + `b"}`, ` {"instanceId":"a"}`, `{"instanceID":"a"}`, `{"instanceId":"a","instanceId":"b"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		id, ok := canonicalAttachBody(body)
		if !ok {
			return
		}
		var req cloud.AttachRequest
		if err := decodeBytes(body, &req); err != nil {
			t.Fatalf("fast path took %q as %q; the strict decoder refuses it: %v", body, id, err)
		}
		if req.InstanceID != id {
			t.Fatalf("fast path took %q as %q; the strict decoder reads %q", body, id, req.InstanceID)
		}
	})
}

// The fast path takes the client's bodies and leaves everything unusual to the strict
// decoder.
func TestCanonicalAttachBody(t *testing.T) {
	for _, tc := range []struct {
		body string
		id   string
		ok   bool
	}{
		{`{"instanceId":"node-1"}`, "node-1", true},
		{`{"instanceId":"node-1"}` + "\r\n\t ", "node-1", true},
		{`{"instanceId":""}`, "", true}, // CheckID refuses it next, as before
		{`{"instanceId":"a\"b"}`, "", false},
		{`{"instanceId":"a\\b"}`, "", false},
		{`{"instanceId":"é"}`, "", false},
		{`{"instanceId":"a","x":1}`, "", false},
		{`{"instanceId":"a"}x`, "", false},
		{` {"instanceId":"a"}`, "", false},
		{`{"instanceId":"a"`, "", false},
		{`{"instanceID":"a"}`, "", false},
	} {
		id, ok := canonicalAttachBody([]byte(tc.body))
		if id != tc.id || ok != tc.ok {
			t.Errorf("canonicalAttachBody(%q) = %q, %v; want %q, %v", tc.body, id, ok, tc.id, tc.ok)
		}
	}
}

func TestETagAndRequestIDShapes(t *testing.T) {
	for rev, want := range map[uint64]string{1: `"1"`, 12: `"12"`, 18446744073709551615: `"18446744073709551615"`} {
		if got := etag(rev); got != want {
			t.Errorf("etag(%d) = %s, want %s", rev, got, want)
		}
	}
	seen := map[string]bool{}
	for range 100 {
		id := newRequestID()
		if !requestIDShape.MatchString(id) {
			t.Fatalf("request ID %q, want req- and 16 lowercase hex digits", id)
		}
		seen[id] = true
	}
	if len(seen) < 100 {
		t.Errorf("100 request IDs, %d different", len(seen))
	}
}

var requestIDShape = regexp.MustCompile(`^req-[0-9a-f]{16}$`)
