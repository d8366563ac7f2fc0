package server_test

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

const maxInt64 = "9223372036854775807"

// TestInvalidInputIsRefused covers input the cloud once accepted: each request must be a
// clear error with the given code and a message naming the problem, and change nothing.
func TestInvalidInputIsRefused(t *testing.T) {
	tc := startCloud(t, server.Config{})
	ctx := context.Background()
	vol := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "v", SizeBytes: 10, Zone: "zone-a"}))
	// Another volume's bytes, so that resizing vol to MaxInt64 (growing it by MaxInt64 - 10)
	// takes the used bytes past MaxInt64.
	must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "w", SizeBytes: 10, Zone: "zone-a"}))
	long := strings.Repeat("n", 129)

	tests := []struct {
		name, method, path, body string
		code                     cloud.Code
		msg                      string // a substring of the message
	}{
		// Quota sums must not wrap around.
		{name: "volume of MaxInt64 bytes", method: "POST", path: "/v1/volumes",
			body: `{"name":"huge","sizeBytes":` + maxInt64 + `,"zone":"zone-a"}`, code: cloud.CodeCapacityQuotaExceeded, msg: "capacity quota"},
		{name: "resize to MaxInt64 bytes", method: "POST", path: "/v1/volumes/" + vol.ID + "/resize",
			body: `{"sizeBytes":` + maxInt64 + `}`, code: cloud.CodeCapacityQuotaExceeded, msg: "capacity quota"},

		// Zones come with instances.
		{name: "volume in an unknown zone", method: "POST", path: "/v1/volumes",
			body: `{"name":"q","sizeBytes":1,"zone":"zone-q"}`, code: cloud.CodeInvalidArgument, msg: `unknown zone "zone-q"`},

		// Names: CSI's banned characters and size limit.
		{name: "volume name with NUL", method: "POST", path: "/v1/volumes",
			body: `{"name":"a\u0000b","sizeBytes":1,"zone":"zone-a"}`, code: cloud.CodeInvalidArgument, msg: "control character U+0000"},
		{name: "volume name with ESC", method: "POST", path: "/v1/volumes",
			body: `{"name":"a\u001bb","sizeBytes":1,"zone":"zone-a"}`, code: cloud.CodeInvalidArgument, msg: "control character U+001B"},
		{name: "volume name with DEL", method: "POST", path: "/v1/volumes",
			body: `{"name":"a\u007f","sizeBytes":1,"zone":"zone-a"}`, code: cloud.CodeInvalidArgument, msg: "control character U+007F"},
		{name: "volume name with a C1 control", method: "POST", path: "/v1/volumes",
			body: `{"name":"a\u0085","sizeBytes":1,"zone":"zone-a"}`, code: cloud.CodeInvalidArgument, msg: "control character U+0085"},
		{name: "volume name over 128 bytes", method: "POST", path: "/v1/volumes",
			body: `{"name":"` + long + `","sizeBytes":1,"zone":"zone-a"}`, code: cloud.CodeInvalidArgument, msg: "129 bytes long, at most 128"},
		{name: "snapshot name with NUL", method: "POST", path: "/v1/snapshots",
			body: `{"name":"s\u0000","sourceVolumeId":"` + vol.ID + `"}`, code: cloud.CodeInvalidArgument, msg: "control character U+0000"},
		{name: "snapshot name over 128 bytes", method: "POST", path: "/v1/snapshots",
			body: `{"name":"` + long + `","sourceVolumeId":"` + vol.ID + `"}`, code: cloud.CodeInvalidArgument, msg: "at most 128"},

		// Blank and control-character IDs and names say which they are, not "required".
		{name: "path ID of a space", method: "GET", path: "/v1/volumes/%20", code: cloud.CodeInvalidArgument, msg: `path id " " is only white space`},
		{name: "path ID of spaces", method: "GET", path: "/v1/instances/%20%20", code: cloud.CodeInvalidArgument, msg: `path id "  " is only white space`},
		{name: "path ID of a tab", method: "GET", path: "/v1/volumes/%09", code: cloud.CodeInvalidArgument, msg: "path id has the control character U+0009 at byte 0"},
		{name: "path ID of a newline", method: "GET", path: "/v1/volumes/%0a", code: cloud.CodeInvalidArgument, msg: "path id has the control character U+000A at byte 0"},
		{name: "path ID with a newline inside", method: "GET", path: "/v1/volumes/a%0ab", code: cloud.CodeInvalidArgument, msg: "path id has the control character U+000A at byte 1"},
		{name: "instance ID of a space", method: "POST", path: "/v1/instances",
			body: `{"id":" ","zone":"zone-a","instanceType":"small"}`, code: cloud.CodeInvalidArgument, msg: `id " " is only white space`},
		{name: "instance ID of a newline", method: "POST", path: "/v1/instances",
			body: `{"id":"\n","zone":"zone-a","instanceType":"small"}`, code: cloud.CodeInvalidArgument, msg: "id has the control character U+000A at byte 0"},
		{name: "empty instance ID", method: "POST", path: "/v1/instances",
			body: `{"id":"","zone":"zone-a","instanceType":"small"}`, code: cloud.CodeInvalidArgument, msg: "id is required"},
		{name: "volume name of white space", method: "POST", path: "/v1/volumes",
			body: `{"name":" \t\n","sizeBytes":1,"zone":"zone-a"}`, code: cloud.CodeInvalidArgument, msg: `name " \t\n" is only white space`},

		// Attach limits and out-of-band slots (node-a: small, 4 slots, 1 out of band).
		{name: "out-of-band slots above the limit", method: "PATCH", path: "/v1/instances/node-a",
			body: `{"outOfBandSlots":5}`, code: cloud.CodeInvalidArgument, msg: "outOfBandSlots 5 is above the attach limit 4"},
		{name: "attach limit 0", method: "PATCH", path: "/v1/instances/node-a",
			body: `{"attachLimit":0}`, code: cloud.CodeInvalidArgument, msg: "attachLimit must be >= 1"},
		{name: "attach limit of MaxInt64", method: "PATCH", path: "/v1/instances/node-a",
			body: `{"attachLimit":` + maxInt64 + `}`, code: cloud.CodeInvalidArgument, msg: "attachLimit must be in [1, 4096], got " + maxInt64},
		{name: "attach limit just over the bound", method: "PATCH", path: "/v1/instances/node-a",
			body: `{"attachLimit":4097,"outOfBandSlots":1}`, code: cloud.CodeInvalidArgument, msg: "attachLimit must be in [1, 4096], got 4097"},
		{name: "out-of-band slots of MaxInt64", method: "PATCH", path: "/v1/instances/node-a",
			body: `{"outOfBandSlots":` + maxInt64 + `}`, code: cloud.CodeInvalidArgument, msg: "outOfBandSlots must be in [0, 4096], got " + maxInt64},
		{name: "new instance with out-of-band slots of MaxInt64", method: "POST", path: "/v1/instances",
			body: `{"id":"n","zone":"zone-a","instanceType":"small","outOfBandSlots":` + maxInt64 + `}`, code: cloud.CodeInvalidArgument, msg: "outOfBandSlots must be in [0, 4096], got " + maxInt64},
		{name: "attachment quota of MaxInt64", method: "PATCH", path: "/v1/quotas",
			body: `{"attachments":` + maxInt64 + `}`, code: cloud.CodeInvalidArgument, msg: "attachments must be in [0, 1000000], got " + maxInt64},
		{name: "volume quota just over the bound", method: "PATCH", path: "/v1/quotas",
			body: `{"volumes":1000001}`, code: cloud.CodeInvalidArgument, msg: "volumes must be in [0, 1000000], got 1000001"},
		{name: "capacity quota of MaxInt64", method: "PATCH", path: "/v1/quotas",
			body: `{"capacityBytes":` + maxInt64 + `}`, code: cloud.CodeInvalidArgument, msg: "capacityBytes must be in [0, 1152921504606846976], got " + maxInt64},
		{name: "capacity quota one byte over 1 EiB", method: "PATCH", path: "/v1/quotas",
			body: `{"capacityBytes":1152921504606846977}`, code: cloud.CodeInvalidArgument, msg: "capacityBytes must be in [0, 1152921504606846976]"},
		{name: "attach limit below the out-of-band slots set with it", method: "PATCH", path: "/v1/instances/node-b",
			body: `{"attachLimit":2,"outOfBandSlots":3}`, code: cloud.CodeInvalidArgument, msg: "outOfBandSlots 3 is above the attach limit 2"},
		{name: "instance type too small for the out-of-band slots", method: "PATCH", path: "/v1/instances/node-b",
			body: `{"instanceType":"small","outOfBandSlots":5}`, code: cloud.CodeInvalidArgument, msg: "above the attach limit 4"},
		{name: "new instance with out-of-band slots above its type's limit", method: "POST", path: "/v1/instances",
			body: `{"id":"n","zone":"zone-a","instanceType":"small","outOfBandSlots":5}`, code: cloud.CodeInvalidArgument, msg: "above the attach limit 4"},
		{name: "instance ID with a control character", method: "POST", path: "/v1/instances",
			body: `{"id":"n\u0001","zone":"zone-a","instanceType":"small"}`, code: cloud.CodeInvalidArgument, msg: "control character U+0001"},
		{name: "instance ID over 128 bytes", method: "POST", path: "/v1/instances",
			body: `{"id":"` + strings.Repeat("i", 129) + `","zone":"zone-a","instanceType":"small"}`, code: cloud.CodeInvalidArgument, msg: "at most 128"},
		{name: "instance zone that is no topology value", method: "POST", path: "/v1/instances",
			body: `{"id":"n","zone":"zone q","instanceType":"small"}`, code: cloud.CodeInvalidArgument, msg: "not a CSI topology value"},

		// Fault rules.
		{name: "fault rule without operation", method: "POST", path: "/v1/faults",
			body: `{"error":"Unavailable"}`, code: cloud.CodeInvalidArgument, msg: "operation is required"},
		{name: "fault rule with empty operation", method: "POST", path: "/v1/faults",
			body: `{"operation":"","error":"Unavailable"}`, code: cloud.CodeInvalidArgument, msg: "operation is required"},
		{name: "fault latency that wraps a Duration", method: "POST", path: "/v1/faults",
			body: `{"operation":"*","latencyMs":` + maxInt64 + `}`, code: cloud.CodeInvalidArgument, msg: "latencyMs must be in [0, 60000]"},
		{name: "fault TTL that wraps a Duration", method: "POST", path: "/v1/faults",
			body: `{"operation":"*","error":"Unavailable","ttlSeconds":` + maxInt64 + `}`, code: cloud.CodeInvalidArgument, msg: "ttlSeconds must be in [0, 31536000]"},
		{name: "fault TTL over a year", method: "POST", path: "/v1/faults",
			body: `{"operation":"*","error":"Unavailable","ttlSeconds":31536001}`, code: cloud.CodeInvalidArgument, msg: "ttlSeconds"},
	}
	before := tc.snapshot(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tc.do(t, tt.method, tt.path, adminToken, tt.body)
			e := r.errorBody(t)
			if r.status != tt.code.HTTPStatus() || e.Code != tt.code || !strings.Contains(e.Message, tt.msg) {
				t.Errorf("got %d %s %q, want %d %s with a message containing %q", r.status, e.Code, e.Message, tt.code.HTTPStatus(), tt.code, tt.msg)
			}
			if after := tc.snapshot(t); !reflect.DeepEqual(before, after) {
				t.Fatalf("state changed:\nbefore %s\nafter  %s", mustJSON(t, before), mustJSON(t, after))
			}
		})
	}
}

// TestValidInputAtTheLimits checks the values next to the refused ones still work: names CSI
// allows, out-of-band slots equal to the limit (a full node, e2e S11), the capacity quota
// filled to the byte, and zones known through an instance or as the default zone.
func TestValidInputAtTheLimits(t *testing.T) {
	tc := startCloud(t, server.Config{DefaultZone: "zone-c"})
	ctx := context.Background()
	tests := []struct {
		name, method, path, body string
		status                   int
	}{
		{"volume name of 128 bytes", "POST", "/v1/volumes", `{"name":"` + strings.Repeat("n", 128) + `","sizeBytes":1,"zone":"zone-a"}`, 201},
		{"volume name with tab, newline and non-ASCII", "POST", "/v1/volumes", `{"name":"pvc\t\n\r-é-ü","sizeBytes":1,"zone":"zone-a"}`, 201},
		{"volume in the default zone, no instance there", "POST", "/v1/volumes", `{"name":"c1","sizeBytes":1,"zone":"zone-c"}`, 201},
		{"volume without zone goes to the default zone", "POST", "/v1/volumes", `{"name":"c2","sizeBytes":1}`, 201},
		{"new instance in a new zone", "POST", "/v1/instances", `{"id":"node-q","zone":"zone-q","instanceType":"small","outOfBandSlots":4}`, 201},
		{"volume in the zone of the new instance", "POST", "/v1/volumes", `{"name":"q","sizeBytes":1,"zone":"zone-q"}`, 201},
		{"out-of-band slots equal to the limit", "PATCH", "/v1/instances/node-a", `{"outOfBandSlots":4}`, 200},
		{"limit and out-of-band slots lowered together", "PATCH", "/v1/instances/node-b", `{"attachLimit":2,"outOfBandSlots":2}`, 200},
		{"attach limit 1", "PATCH", "/v1/instances/node-b", `{"attachLimit":1,"outOfBandSlots":0}`, 200},
		{"capacity quota of 1 EiB, the largest", "PATCH", "/v1/quotas", `{"capacityBytes":1152921504606846976}`, 200},
		{"count quotas at their bound", "PATCH", "/v1/quotas", `{"attachments":1000000,"volumes":1000000}`, 200},
		{"attach limit and out-of-band slots at their bound", "PATCH", "/v1/instances/node-b", `{"attachLimit":4096,"outOfBandSlots":4096}`, 200},
		{"volume of MaxInt64 bytes while some are used", "POST", "/v1/volumes", `{"name":"fill","sizeBytes":` + maxInt64 + `,"zone":"zone-a"}`, 409},
		{"fault rule with a TTL of a year", "POST", "/v1/faults", `{"operation":"GetVolume","error":"Unavailable","ttlSeconds":31536000}`, 201},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := tc.do(t, tt.method, tt.path, adminToken, tt.body); r.status != tt.status {
				t.Fatalf("got %d %s, want %d", r.status, r.body, tt.status)
			}
		})
	}
	// The MaxInt64 volume is refused because the ones before use some bytes; a volume of
	// exactly the free bytes fits, and then one byte more does not.
	q := must[*cloud.Quotas](t)(tc.reader.GetQuotas(ctx))
	used := q.CapacityBytes.Used
	if used <= 0 {
		t.Fatalf("capacity used %d, want > 0", used)
	}
	if _, err := tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "fill", SizeBytes: q.CapacityBytes.Limit - used, Zone: "zone-a"}); err != nil {
		t.Fatalf("volume of exactly the free bytes: %v", err)
	}
	_, err := tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "one-more", SizeBytes: 1, Zone: "zone-a"})
	wantCode(t, err, cloud.CodeCapacityQuotaExceeded)
	if q := must[*cloud.Quotas](t)(tc.reader.GetQuotas(ctx)); q.CapacityBytes.Used != q.CapacityBytes.Limit {
		t.Fatalf("capacity quota %+v, want used == limit", q.CapacityBytes)
	}
}

func TestConfigRefusesBadDefaultZone(t *testing.T) {
	for _, zone := range []string{"zone a", "-zone", strings.Repeat("z", 64)} {
		if _, err := server.New(server.Config{Auth: server.AuthNone, DefaultZone: zone}); err == nil || !strings.Contains(err.Error(), "default zone") {
			t.Errorf("DefaultZone %q: err = %v, want a default zone error", zone, err)
		}
	}
}

// fakeClock is a settable clock shared by the server's goroutines.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestExpiredRuleLeavesNoMetric: when a rule's TTL passes, its fakecloud_faults_fired_total
// series goes with it, seen by a scrape alone (nobody lists the rules in between), while a
// rule without TTL keeps its series.
func TestExpiredRuleLeavesNoMetric(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	tc := startCloud(t, server.Config{Now: clock.now})
	ctx := context.Background()
	ttl := must[*cloud.FaultRule](t)(tc.admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationGetVolume, Error: cloud.CodeThrottled, TTLSeconds: 10}))
	forever := must[*cloud.FaultRule](t)(tc.admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationAny, VolumeID: "vol-x", Error: cloud.CodeUnavailable}))
	_, err := tc.driver.GetVolume(ctx, "vol-y")
	wantCode(t, err, cloud.CodeThrottled)
	_, err = tc.driver.GetVolume(ctx, "vol-x")
	wantCode(t, err, cloud.CodeThrottled) // the first rule that fires decides
	wantCode(t, tc.driver.DeleteVolume(ctx, "vol-x"), cloud.CodeUnavailable)
	_, err = tc.driver.AttachVolume(ctx, "vol-x", "node-a")
	wantCode(t, err, cloud.CodeUnavailable)

	series := func() string {
		return grepLines(string(tc.do(t, http.MethodGet, "/metrics", readerToken, "").body), "fakecloud_faults_fired_total{")
	}
	steps := []struct {
		name    string
		advance time.Duration
		want    []string
		absent  []string
	}{
		{name: "both rules live", want: []string{
			`fakecloud_faults_fired_total{operation="GetVolume",rule="` + ttl.ID + `"} 2`,
			`fakecloud_faults_fired_total{operation="AttachVolume",rule="` + forever.ID + `"} 1`,
			`fakecloud_faults_fired_total{operation="DeleteVolume",rule="` + forever.ID + `"} 1`,
		}},
		{name: "a second before the TTL", advance: 9 * time.Second, want: []string{`rule="` + ttl.ID + `"`}},
		{name: "TTL passed", advance: time.Second,
			want:   []string{`fakecloud_faults_fired_total{operation="DeleteVolume",rule="` + forever.ID + `"} 1`},
			absent: []string{`rule="` + ttl.ID + `"`}},
	}
	for _, st := range steps {
		clock.advance(st.advance)
		got := series()
		for _, w := range st.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: fakecloud_faults_fired_total lacks %s; has:\n%s", st.name, w, got)
			}
		}
		for _, a := range st.absent {
			if strings.Contains(got, a) {
				t.Errorf("%s: fakecloud_faults_fired_total still has %s:\n%s", st.name, a, got)
			}
		}
	}
	if rules := must[[]cloud.FaultRule](t)(tc.admin.ListFaults(ctx)); len(rules) != 1 || rules[0].ID != forever.ID {
		t.Fatalf("rules after the TTL: %+v, want only %s", rules, forever.ID)
	}
}
