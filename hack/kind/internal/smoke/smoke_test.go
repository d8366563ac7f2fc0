package smoke

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func validOptions() Options {
	return Options{Namespace: "default", Name: "check", StorageClass: "fakecloud-disk", PodImage: "pause:1",
		CloudURL: "http://127.0.0.1:8080", AdminToken: "t", Timeout: time.Minute, Log: io.Discard}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Options)
		want   string // substring of the error; "" for none
	}{
		{"valid", func(*Options) {}, ""},
		{"no namespace", func(o *Options) { o.Namespace = "" }, "namespace is required"},
		{"no token", func(o *Options) { o.AdminToken = "" }, "admin token is required"},
		{"cloud URL without scheme", func(o *Options) { o.CloudURL = "127.0.0.1:8080" }, "want http(s)://host[:port]"},
		{"cloud URL ftp", func(o *Options) { o.CloudURL = "ftp://h" }, "want http(s)://host[:port]"},
		{"zero timeout", func(o *Options) { o.Timeout = 0 }, "timeout 0s"},
		{"huge timeout", func(o *Options) { o.Timeout = 2 * time.Hour }, "at most 1h"},
		{"no log", func(o *Options) { o.Log = nil }, "log writer is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := validOptions()
			tc.change(&o)
			_, err := New(fake.NewClientset(), http.DefaultClient, o)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func csiNode(name, driver string, count int32) *storagev1.CSINode {
	return &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{
		Name: driver, NodeID: name, Allocatable: &storagev1.VolumeNodeResources{Count: &count},
	}}}}
}

// TestPickNode: the first node listing the driver with a count of 2 or more, or the named
// node; a clear error when none fits (another driver's entry does not count).
func TestPickNode(t *testing.T) {
	nodes := []*storagev1.CSINode{csiNode("a", "other.csi", 9), csiNode("b", DriverName, 1), csiNode("c", DriverName, 7)}
	for _, tc := range []struct {
		name, node, want, wantErr string
		count                     int32
	}{
		{name: "first with room", want: "c", count: 7},
		{name: "named", node: "c", want: "c", count: 7},
		{name: "named at the floor", node: "b", wantErr: "needs 2 or more"},
		{name: "named without the driver", node: "a", wantErr: "does not list disk.fakecloud.dev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			for _, n := range nodes {
				if _, err := cs.StorageV1().CSINodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			o := validOptions()
			o.Node = tc.node
			c, err := New(cs, http.DefaultClient, o)
			if err != nil {
				t.Fatal(err)
			}
			got, count, err := c.pickNode(context.Background())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want || count != tc.count {
				t.Fatalf("pickNode = %s, %d, %v; want %s, %d", got, count, err, tc.want, tc.count)
			}
		})
	}
}

// TestCloudRequests: the admin token is sent, the instance is decoded, a PATCH that the
// fake cloud refuses is an error naming the status, and an oversized answer is not read past
// maxBody.
func TestCloudRequests(t *testing.T) {
	var patched string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/instances/n1":
			_, _ = io.WriteString(w, `{"id":"n1","instanceType":"medium","attachLimit":8,"outOfBandSlots":1}`)
		case r.Method == http.MethodGet && r.URL.Path == "/v1/instances/big":
			_, _ = io.WriteString(w, `{"id":"`+strings.Repeat("x", 2*maxBody)+`"}`)
		case r.Method == http.MethodPatch && r.URL.Path == "/v1/instances/n1":
			b, _ := io.ReadAll(r.Body)
			patched = string(b)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	o := validOptions()
	o.CloudURL = srv.URL
	c, err := New(fake.NewClientset(), srv.Client(), o)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	inst, err := c.instance(ctx, "n1")
	if err != nil || inst.AttachLimit != 8 || inst.OutOfBandSlots != 1 {
		t.Fatalf("instance = %+v, %v", inst, err)
	}
	if _, err := c.instance(ctx, "nope"); err == nil || !strings.Contains(err.Error(), "HTTP 404") {
		t.Fatalf("missing instance: %v, want HTTP 404", err)
	}
	if _, err := c.instance(ctx, "big"); err == nil || !strings.Contains(err.Error(), "decode") {
		t.Fatalf("oversized answer: %v, want a decode error (read stops at maxBody)", err)
	}
	if err := c.patchOutOfBand(ctx, "n1", 2); err != nil || patched != `{"outOfBandSlots":2}` {
		t.Fatalf("patch: %v, body %q", err, patched)
	}
	if err := c.patchOutOfBand(ctx, "nope", 2); err == nil || !strings.Contains(err.Error(), "HTTP 404") {
		t.Fatalf("patch of a missing instance: %v, want HTTP 404", err)
	}
}

func TestLoweredOutOfBand(t *testing.T) {
	for _, tc := range []struct {
		name       string
		limit, oob int
		count      int32
		want       int
		wantErr    string
	}{
		{name: "bound by the slots", limit: 8, oob: 1, count: 7, want: 2},
		{name: "bound by the quota headroom", limit: 16, oob: 0, count: 4, want: 13},
		{name: "no out-of-band slot yet", limit: 8, oob: 0, count: 8, want: 1},
		{name: "at the floor", limit: 8, oob: 7, count: 1, wantErr: "needs 2 or more"},
		{name: "count above the slots", limit: 8, oob: 4, count: 5, wantErr: "above the instance's 4 slots"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := loweredOutOfBand(tc.limit, tc.oob, tc.count)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("loweredOutOfBand(%d, %d, %d) = %d, %v; want %d", tc.limit, tc.oob, tc.count, got, err, tc.want)
			}
			if slots := tc.limit - got; slots != int(tc.count)-1 {
				t.Fatalf("leaves %d slots, want the count minus one, %d", slots, tc.count-1)
			}
		})
	}
}
