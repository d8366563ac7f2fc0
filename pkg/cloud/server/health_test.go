package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

// TestInstanceHealthRefusesAttaches: an impaired or stopped instance refuses attaches with
// its retryable code (never AttachmentLimitExceeded) while it has free slots; GET, the
// capacity reading, /v1/events and /metrics show the health; ok again takes attaches.
func TestInstanceHealthRefusesAttaches(t *testing.T) {
	for _, h := range []struct {
		health cloud.InstanceHealth
		code   cloud.Code
	}{{cloud.InstanceHealthImpaired, cloud.CodeInstanceImpaired}, {cloud.InstanceHealthStopped, cloud.CodeInstanceStopped}} {
		t.Run(string(h.health), func(t *testing.T) {
			tc := startCloud(t, server.Config{})
			ctx := context.Background()
			v := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "v", SizeBytes: 1, Zone: "zone-a"}))
			inst := must[*cloud.Instance](t)(tc.admin.SetInstanceHealth(ctx, "node-a", h.health, "maintenance"))
			if inst.Health != h.health || inst.HealthMessage != "maintenance" {
				t.Errorf("PUT answered health %q %q", inst.Health, inst.HealthMessage)
			}
			if got := must[*cloud.Instance](t)(tc.reader.GetInstance(ctx, "node-a")); got.Health != h.health {
				t.Errorf("GET instance health = %q, want %q", got.Health, h.health)
			}
			if got := must[*cloud.Capacity](t)(tc.reader.GetCapacity(ctx, "node-a")); got.Health != h.health || got.AttachLimit-got.OutOfBandSlots-got.Attached != 3 {
				t.Errorf("capacity = %+v, want health %q and 3 free slots", got, h.health)
			}
			_, err := tc.driver.AttachVolume(ctx, v.ID, "node-a")
			var ce *cloud.Error
			if !errors.As(err, &ce) || ce.Code != h.code || !ce.Retryable || ce.HTTPStatus != http.StatusConflict {
				t.Fatalf("attach to a %s instance: %v, want %s (409, retryable)", h.health, err, h.code)
			}
			if errors.Is(err, cloud.ErrAttachmentLimitExceeded) {
				t.Fatal("an unhealthy instance answered AttachmentLimitExceeded")
			}
			if got := must[*cloud.Volume](t)(tc.reader.GetVolume(ctx, v.ID)); got.AttachedTo != "" {
				t.Errorf("refused attach left the volume attached to %q", got.AttachedTo)
			}
			metrics := string(tc.do(t, http.MethodGet, "/metrics", readerToken, "").body)
			if want := `fakecloud_instance_health{instance_id="node-a"} ` + strconv.Itoa(h.health.Rank()); !strings.Contains(metrics, want) {
				t.Errorf("metrics lack %s", want)
			}
			evs := must[[]cloud.Event](t)(tc.reader.ListEvents(ctx, 0))
			types := map[string]bool{}
			for _, e := range evs {
				types[e.Type] = true
			}
			if !types["InstanceHealthSet"] || !types["AttachRefusedUnhealthy"] {
				t.Errorf("events %v lack InstanceHealthSet or AttachRefusedUnhealthy", types)
			}
			must[*cloud.Instance](t)(tc.admin.SetInstanceHealth(ctx, "node-a", cloud.InstanceHealthOK, ""))
			must[*cloud.Attachment](t)(tc.driver.AttachVolume(ctx, v.ID, "node-a"))
			if metrics := string(tc.do(t, http.MethodGet, "/metrics", readerToken, "").body); !strings.Contains(metrics, `fakecloud_instance_health{instance_id="node-a"} 0`) {
				t.Error("a healthy instance does not read 0 in fakecloud_instance_health")
			}
		})
	}
}

// TestHealthRulesExpire: a health fault rule sets health for its TTL, the worse of the rule
// and what was set holds, and the volume's health shows in GET and the list.
func TestHealthRulesExpire(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	tc := startCloud(t, server.Config{Now: clock.now})
	ctx := context.Background()
	v := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "v", SizeBytes: 1, Zone: "zone-a"}))
	must[*cloud.Volume](t)(tc.admin.SetVolumeHealth(ctx, v.ID, cloud.VolumeHealthDegraded, "one replica lost"))
	rule := must[*cloud.FaultRule](t)(tc.admin.CreateFault(ctx, cloud.FaultRule{VolumeID: v.ID, Health: string(cloud.VolumeHealthFailed), TTLSeconds: 10}))
	if rule.Operation != cloud.OperationAny {
		t.Errorf("health rule operation = %q, want \"*\"", rule.Operation)
	}
	must[*cloud.FaultRule](t)(tc.admin.CreateFault(ctx, cloud.FaultRule{InstanceID: "node-b", Health: string(cloud.InstanceHealthImpaired), TTLSeconds: 5}))
	steps := []struct {
		advance time.Duration
		vol     cloud.VolumeHealth
		inst    cloud.InstanceHealth
	}{
		{0, cloud.VolumeHealthFailed, cloud.InstanceHealthImpaired},
		{5 * time.Second, cloud.VolumeHealthFailed, cloud.InstanceHealthOK},
		{5 * time.Second, cloud.VolumeHealthDegraded, cloud.InstanceHealthOK},
	}
	for i, st := range steps {
		clock.advance(st.advance)
		got := must[*cloud.Volume](t)(tc.reader.GetVolume(ctx, v.ID))
		list := must[*cloud.VolumeList](t)(tc.reader.ListVolumes(ctx, 0, ""))
		if got.Health != st.vol || len(list.Volumes) != 1 || list.Volumes[0].Health != st.vol {
			t.Errorf("step %d: volume health GET %q, list %+v, want %q", i, got.Health, list.Volumes, st.vol)
		}
		if inst := must[*cloud.Instance](t)(tc.reader.GetInstance(ctx, "node-b")); inst.Health.Rank() != st.inst.Rank() {
			t.Errorf("step %d: instance health %q, want %q", i, inst.Health, st.inst)
		}
		// A health rule fires on no call: the volume's own operations pass.
		if _, err := tc.driver.ResizeVolume(ctx, v.ID, int64(2+i)); err != nil {
			t.Errorf("step %d: resize of an unhealthy volume: %v", i, err)
		}
	}
}

// TestHealthBadInput: every refused health request is the right code and changes nothing.
func TestHealthBadInput(t *testing.T) {
	tc := startCloud(t, server.Config{})
	ctx := context.Background()
	v := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "v", SizeBytes: 1, Zone: "zone-a"}))
	for _, c := range []struct {
		name, method, path, token, body string
		want                            cloud.Code
	}{
		{"volume health of an instance", http.MethodPut, "/v1/volumes/" + v.ID + "/health", adminToken, `{"health":"impaired"}`, cloud.CodeInvalidArgument},
		{"instance health of a volume", http.MethodPut, "/v1/instances/node-a/health", adminToken, `{"health":"degraded"}`, cloud.CodeInvalidArgument},
		{"no health", http.MethodPut, "/v1/instances/node-a/health", adminToken, `{}`, cloud.CodeInvalidArgument},
		{"message too long", http.MethodPut, "/v1/instances/node-a/health", adminToken, `{"health":"impaired","message":"` + strings.Repeat("x", cloud.MaxHealthMessageBytes+1) + `"}`, cloud.CodeInvalidArgument},
		{"unknown field", http.MethodPut, "/v1/instances/node-a/health", adminToken, `{"health":"impaired","ttl":3}`, cloud.CodeInvalidArgument},
		{"unknown volume", http.MethodPut, "/v1/volumes/vol-404/health", adminToken, `{"health":"failed"}`, cloud.CodeVolumeNotFound},
		{"unknown instance", http.MethodPut, "/v1/instances/node-z/health", adminToken, `{"health":"stopped"}`, cloud.CodeInstanceNotFound},
		{"driver may not", http.MethodPut, "/v1/instances/node-a/health", driverToken, `{"health":"stopped"}`, cloud.CodeAccessDenied},
		{"health rule on both", http.MethodPost, "/v1/faults", adminToken, `{"instanceId":"node-a","volumeId":"` + v.ID + `","health":"failed"}`, cloud.CodeInvalidArgument},
		{"health rule on nothing", http.MethodPost, "/v1/faults", adminToken, `{"health":"impaired"}`, cloud.CodeInvalidArgument},
		{"health rule with an error", http.MethodPost, "/v1/faults", adminToken, `{"instanceId":"node-a","health":"impaired","error":"Throttled"}`, cloud.CodeInvalidArgument},
		{"health rule on one operation", http.MethodPost, "/v1/faults", adminToken, `{"operation":"AttachVolume","instanceId":"node-a","health":"impaired"}`, cloud.CodeInvalidArgument},
		{"health rule of the wrong kind", http.MethodPost, "/v1/faults", adminToken, `{"volumeId":"` + v.ID + `","health":"stopped"}`, cloud.CodeInvalidArgument},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := tc.do(t, c.method, c.path, c.token, c.body)
			if got := r.errorBody(t).Code; got != c.want {
				t.Errorf("%s %s: code %s, want %s", c.method, c.path, got, c.want)
			}
		})
	}
	if inst := must[*cloud.Instance](t)(tc.reader.GetInstance(ctx, "node-a")); !inst.Health.Normal() {
		t.Errorf("refused requests changed the health to %q", inst.Health)
	}
	if rules := must[[]cloud.FaultRule](t)(tc.reader.ListFaults(ctx)); len(rules) != 0 {
		t.Errorf("refused rules were stored: %+v", rules)
	}
}

// TestHealthMessageRefusesControlCharacters: a health message is stored and answered, so,
// like an ID, it holds no control character (NUL, ESC, a newline, DEL, C1): 400 naming the
// field and the character, and the health stays as it was. Before, all were stored and echoed.
func TestHealthMessageRefusesControlCharacters(t *testing.T) {
	tc := startCloud(t, server.Config{})
	ctx := context.Background()
	tests := []struct{ name, message, want string }{
		{"NUL", `a\u0000b`, "message has the control character U+0000 at byte 1"},
		{"ESC", `\u001b[2J`, "message has the control character U+001B at byte 0"},
		{"newline", `line one\nline two`, "message has the control character U+000A at byte 8"},
		{"tab", `a\tb`, "message has the control character U+0009"},
		{"DEL", `a\u007f`, "message has the control character U+007F"},
		{"C1", `a\u0085`, "message has the control character U+0085"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tc.do(t, http.MethodPut, "/v1/instances/node-a/health", adminToken, `{"health":"impaired","message":"`+tt.message+`"}`)
			e := r.errorBody(t)
			if r.status != http.StatusBadRequest || e.Code != cloud.CodeInvalidArgument || !strings.Contains(e.Message, tt.want) {
				t.Fatalf("got %d %s %q, want 400 InvalidArgument containing %q", r.status, e.Code, e.Message, tt.want)
			}
			if inst := must[*cloud.Instance](t)(tc.reader.GetInstance(ctx, "node-a")); !inst.Health.Normal() || inst.HealthMessage != "" {
				t.Fatalf("a refused message changed the instance: %q %q", inst.Health, inst.HealthMessage)
			}
		})
	}
	if r := tc.do(t, http.MethodPut, "/v1/instances/node-a/health", adminToken, `{"health":"impaired","message":"host maintenance, é"}`); r.status != http.StatusOK {
		t.Fatalf("a plain message: %d %s", r.status, r.body)
	}
}

// TestCloneOverHTTP: a clone is in its source's zone (an empty zone means it) and at least its
// size; the same request again is the same volume; a missing source, a smaller size, another
// zone, both sources at once and the same name from another source are refused.
func TestCloneOverHTTP(t *testing.T) {
	tc := startCloud(t, server.Config{})
	ctx := context.Background()
	src := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "src", SizeBytes: 10, Zone: "zone-b"}))
	clone := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "clone", SizeBytes: 10, SourceVolumeID: src.ID}))
	if clone.Zone != "zone-b" || clone.SourceVolumeID != src.ID {
		t.Errorf("clone = %+v, want zone-b and source %s", clone, src.ID)
	}
	again := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "clone", SizeBytes: 10, SourceVolumeID: src.ID}))
	if again.ID != clone.ID {
		t.Errorf("repeated clone is %s, first %s", again.ID, clone.ID)
	}
	if got := must[*cloud.Volume](t)(tc.reader.GetVolume(ctx, clone.ID)); got.SourceVolumeID != src.ID {
		t.Errorf("GET clone source %q, want %q", got.SourceVolumeID, src.ID)
	}
	for _, c := range []struct {
		name string
		req  cloud.CreateVolumeRequest
		want cloud.Code
	}{
		{"missing source", cloud.CreateVolumeRequest{Name: "c1", SizeBytes: 10, SourceVolumeID: "vol-404"}, cloud.CodeVolumeNotFound},
		{"smaller", cloud.CreateVolumeRequest{Name: "c2", SizeBytes: 9, SourceVolumeID: src.ID}, cloud.CodeInvalidArgument},
		{"other zone", cloud.CreateVolumeRequest{Name: "c3", SizeBytes: 10, Zone: "zone-a", SourceVolumeID: src.ID}, cloud.CodeInvalidArgument},
		{"both sources", cloud.CreateVolumeRequest{Name: "c4", SizeBytes: 10, SourceVolumeID: src.ID, SourceSnapshotID: "snap-1"}, cloud.CodeInvalidArgument},
		{"same name, no source", cloud.CreateVolumeRequest{Name: "clone", SizeBytes: 10, Zone: "zone-b"}, cloud.CodeAlreadyExists},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := tc.driver.CreateVolume(ctx, c.req)
			wantCode(t, err, c.want)
		})
	}
	if list := must[*cloud.VolumeList](t)(tc.reader.ListVolumes(ctx, 0, "")); len(list.Volumes) != 2 {
		t.Errorf("%d volumes after the refused clones, want 2", len(list.Volumes))
	}
}

// TestCreateVolumeAnswerIsTheVolume: the 201 of POST /v1/volumes is the JSON a GET right
// after answers, state and health included ("detached", "ok"); a retried create of a volume
// whose health was set answers that health too (it lives in memory, not in the store).
func TestCreateVolumeAnswerIsTheVolume(t *testing.T) {
	tc := startCloud(t, server.Config{})
	const body = `{"name":"v","sizeBytes":1,"zone":"zone-a"}`
	decodeVolume := func(r rawResponse) map[string]any {
		t.Helper()
		var v map[string]any
		if err := json.Unmarshal(r.body, &v); err != nil {
			t.Fatalf("volume %s: %v", r.body, err)
		}
		return v
	}
	check := func(what string, wantHealth cloud.VolumeHealth) string {
		t.Helper()
		r := tc.do(t, "POST", "/v1/volumes", driverToken, body)
		if r.status != http.StatusCreated {
			t.Fatalf("%s: status %d (body %s)", what, r.status, r.body)
		}
		created := decodeVolume(r)
		id, _ := created["id"].(string)
		got := tc.do(t, "GET", "/v1/volumes/"+id, readerToken, "")
		if got.status != http.StatusOK {
			t.Fatalf("GET %s: status %d (body %s)", id, got.status, got.body)
		}
		if after := decodeVolume(got); !reflect.DeepEqual(created, after) {
			t.Errorf("%s answered %s, a GET right after %s", what, r.body, got.body)
		}
		if created["state"] != string(cloud.StateDetached) || created["health"] != string(wantHealth) || created["stateSince"] == nil {
			t.Errorf("%s: state %v since %v, health %v; want detached since its creation, %s", what, created["state"], created["stateSince"], created["health"], wantHealth)
		}
		return id
	}
	id := check("create", cloud.VolumeHealthOK)
	if r := tc.do(t, "PUT", "/v1/volumes/"+id+"/health", adminToken, `{"health":"degraded","message":"test"}`); r.status != http.StatusOK {
		t.Fatalf("set health: status %d (body %s)", r.status, r.body)
	}
	if again := check("create again", cloud.VolumeHealthDegraded); again != id {
		t.Errorf("create again answered %s, want %s", again, id)
	}
}
