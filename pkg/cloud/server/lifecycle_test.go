package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

func TestAuthRoleMatrix(t *testing.T) {
	tc := startCloud(t, server.Config{})
	ctx := context.Background()
	vol := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "v", SizeBytes: 1, Zone: "zone-a"}))
	// Each route's request is harmless to repeat; success statuses vary, so only the
	// auth outcome is checked.
	routes := []struct {
		method, path, body string
		need               server.Role
	}{
		{"GET", "/v1/instance-types", "", server.RoleReader},
		{"GET", "/v1/instances", "", server.RoleReader},
		{"GET", "/v1/instances/node-a", "", server.RoleReader},
		{"GET", "/v1/instances/node-a/capacity", "", server.RoleReader},
		{"GET", "/v1/volumes", "", server.RoleReader},
		{"GET", "/v1/volumes/" + vol.ID, "", server.RoleReader},
		{"GET", "/v1/snapshots", "", server.RoleReader},
		{"GET", "/v1/quotas", "", server.RoleReader},
		{"GET", "/v1/faults", "", server.RoleReader},
		{"GET", "/v1/events", "", server.RoleReader},
		{"POST", "/v1/volumes", `{"name":"v","sizeBytes":1,"zone":"zone-a"}`, server.RoleDriver},
		{"POST", "/v1/volumes/" + vol.ID + "/attach", `{"instanceId":"node-a"}`, server.RoleDriver},
		{"POST", "/v1/volumes/" + vol.ID + "/resize", `{"sizeBytes":1}`, server.RoleDriver},
		{"POST", "/v1/volumes/" + vol.ID + "/detach", `{"instanceId":"node-b"}`, server.RoleDriver},
		{"POST", "/v1/snapshots", `{"name":"s","sourceVolumeId":"` + vol.ID + `"}`, server.RoleDriver},
		{"DELETE", "/v1/snapshots/snap-none", "", server.RoleDriver},
		{"DELETE", "/v1/volumes/vol-none", "", server.RoleDriver},
		{"POST", "/v1/instances", `{"id":"node-a","zone":"zone-a","instanceType":"small","outOfBandSlots":1}`, server.RoleAdmin},
		{"PATCH", "/v1/instances/node-a", `{"outOfBandSlots":1}`, server.RoleAdmin},
		{"PATCH", "/v1/quotas", `{"volumes":1000}`, server.RoleAdmin},
		{"POST", "/v1/faults", `{"operation":"GetVolume","instanceId":"x","error":"Throttled"}`, server.RoleAdmin},
		{"DELETE", "/v1/faults/fault-none", "", server.RoleAdmin},
		{"DELETE", "/v1/faults", "", server.RoleAdmin},
		{"POST", "/v1/reset", "", server.RoleAdmin},
	}
	levels := map[server.Role]int{server.RoleReader: 1, server.RoleDriver: 2, server.RoleAdmin: 3}
	callers := []struct {
		name  string
		token string
		role  server.Role
	}{{"none", "", ""}, {"unknown", "bogus", ""}, {"reader", readerToken, server.RoleReader}, {"driver", driverToken, server.RoleDriver}, {"admin", adminToken, server.RoleAdmin}}
	for _, rt := range routes {
		for _, c := range callers {
			t.Run(fmt.Sprintf("%s %s as %s", rt.method, rt.path, c.name), func(t *testing.T) {
				r := tc.do(t, rt.method, rt.path, c.token, rt.body)
				var want cloud.Code
				switch {
				case c.role == "":
					want = cloud.CodeUnauthenticated
				case levels[c.role] < levels[rt.need]:
					want = cloud.CodeAccessDenied
				}
				if want == "" {
					if r.status == http.StatusUnauthorized || r.status == http.StatusForbidden {
						t.Fatalf("allowed caller got %d %s", r.status, r.body)
					}
					return
				}
				if e := r.errorBody(t); r.status != want.HTTPStatus() || e.Code != want {
					t.Fatalf("got %d %s, want %s", r.status, e.Code, want)
				}
			})
		}
	}
	for _, path := range []string{"/healthz", "/readyz", "/openapi.json"} {
		if r := tc.do(t, "GET", path, "", ""); r.status != http.StatusOK {
			t.Errorf("GET %s without token: %d", path, r.status)
		}
	}
}

func TestAuthNoneServesEverything(t *testing.T) {
	tc := startCloud(t, server.Config{Auth: server.AuthNone})
	anon := newClient(t, tc.url, "")
	if _, err := anon.PatchQuotas(context.Background(), cloud.QuotasPatch{Volumes: ptr[int64](3)}); err != nil {
		t.Fatalf("PatchQuotas without token under --auth=none: %v", err)
	}
}

func TestIfMatch(t *testing.T) {
	tc := startCloud(t, server.Config{})
	ctx := context.Background()
	q := must[*cloud.Quotas](t)(tc.admin.GetQuotas(ctx))
	r := tc.do(t, "GET", "/v1/quotas", adminToken, "")
	if got, want := r.header.Get("ETag"), fmt.Sprintf(`"%d"`, q.Revision); got != want {
		t.Fatalf("ETag %s, want %s", got, want)
	}
	q2 := must[*cloud.Quotas](t)(tc.admin.PatchQuotasIfMatch(ctx, cloud.QuotasPatch{Attachments: ptr[int64](7)}, q.Revision))
	if q2.Revision <= q.Revision || q2.Attachments.Limit != 7 {
		t.Fatalf("patched quotas %+v", q2)
	}
	_, err := tc.admin.PatchQuotasIfMatch(ctx, cloud.QuotasPatch{Attachments: ptr[int64](9)}, q.Revision)
	wantCode(t, err, cloud.CodePreconditionFailed)
	if !errors.Is(err, cloud.ErrPreconditionFailed) {
		t.Fatalf("errors.Is(%v, ErrPreconditionFailed) = false", err)
	}

	inst := must[*cloud.Instance](t)(tc.admin.GetInstance(ctx, "node-a"))
	// Another change moves the instance's revision on, so the old ETag must fail.
	must[*cloud.Instance](t)(tc.admin.PatchInstance(ctx, "node-a", cloud.InstancePatch{OutOfBandSlots: ptr(2)}))
	_, err = tc.admin.PatchInstanceIfMatch(ctx, "node-a", cloud.InstancePatch{AttachLimit: ptr(10)}, inst.Revision)
	wantCode(t, err, cloud.CodePreconditionFailed)
	cur := must[*cloud.Instance](t)(tc.admin.GetInstance(ctx, "node-a"))
	if cur.AttachLimit != 4 || cur.OutOfBandSlots != 2 {
		t.Fatalf("a failed If-Match patch changed the instance: %+v", cur)
	}
	got := must[*cloud.Instance](t)(tc.admin.PatchInstanceIfMatch(ctx, "node-a", cloud.InstancePatch{AttachLimit: ptr(10)}, cur.Revision))
	if got.AttachLimit != 10 || got.AttachLimitOverride == nil {
		t.Fatalf("patched instance %+v", got)
	}
}

func TestIdempotency(t *testing.T) {
	tc := startCloud(t, server.Config{})
	ctx := context.Background()
	req := cloud.CreateVolumeRequest{Name: "pvc-1", SizeBytes: 1 << 30, Zone: "zone-a"}
	v1 := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, req))
	v2 := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, req))
	if v1.ID != v2.ID || v1.Revision != v2.Revision {
		t.Fatalf("repeated create: %+v then %+v", v1, v2)
	}
	// Still the same request after a resize.
	must[*cloud.Volume](t)(tc.driver.ResizeVolume(ctx, v1.ID, 2<<30))
	if v3 := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, req)); v3.ID != v1.ID {
		t.Fatalf("create after resize made %s", v3.ID)
	}
	req.Zone = "zone-b"
	_, err := tc.driver.CreateVolume(ctx, req)
	wantCode(t, err, cloud.CodeAlreadyExists)

	a1 := must[*cloud.Attachment](t)(tc.driver.AttachVolume(ctx, v1.ID, "node-a"))
	revAfterAttach := tc.snapshot(t).Revision
	a2 := must[*cloud.Attachment](t)(tc.driver.AttachVolume(ctx, v1.ID, "node-a"))
	if *a1 != *a2 || a1.Device != "/dev/disk/by-id/fakecloud-"+v1.ID {
		t.Fatalf("repeated attach: %+v then %+v", a1, a2)
	}
	if rev := tc.snapshot(t).Revision; rev != revAfterAttach {
		t.Fatalf("repeated attach bumped the revision %d -> %d", revAfterAttach, rev)
	}
	if q := must[*cloud.Quotas](t)(tc.reader.GetQuotas(ctx)); q.Attachments.Used != 1 {
		t.Fatalf("attachments used %d after a repeated attach", q.Attachments.Used)
	}
	for range 2 {
		if _, err := tc.driver.DetachVolume(ctx, v1.ID, "node-a"); err != nil {
			t.Fatalf("detach: %v", err)
		}
	}
	if _, err := tc.driver.DetachVolume(ctx, v1.ID, "node-never"); err != nil {
		t.Fatalf("detach from an instance it never was on: %v", err)
	}
	if inst := must[*cloud.Instance](t)(tc.reader.GetInstance(ctx, "node-a")); len(inst.Attachments) != 0 {
		t.Fatalf("attachments after detach: %v", inst.Attachments)
	}
	sreq := cloud.CreateSnapshotRequest{Name: "snap", SourceVolumeID: v1.ID}
	s1 := must[*cloud.Snapshot](t)(tc.driver.CreateSnapshot(ctx, sreq))
	if s2 := must[*cloud.Snapshot](t)(tc.driver.CreateSnapshot(ctx, sreq)); *s1 != *s2 {
		t.Fatalf("repeated snapshot: %+v then %+v", s1, s2)
	}
	if got := must[*cloud.Snapshot](t)(tc.driver.GetSnapshot(ctx, s1.ID)); got.Name != "snap" || got.SizeBytes != 2<<30 {
		t.Fatalf("GetSnapshot: %+v", got)
	}
	if err := tc.driver.DeleteSnapshot(ctx, s1.ID); err != nil {
		t.Fatal(err)
	}
	wantCode(t, tc.driver.DeleteSnapshot(ctx, s1.ID), cloud.CodeSnapshotNotFound)
	if err := tc.driver.DeleteVolume(ctx, v1.ID); err != nil {
		t.Fatal(err)
	}
	before := tc.snapshot(t)
	wantCode(t, tc.driver.DeleteVolume(ctx, v1.ID), cloud.CodeVolumeNotFound)
	if after := tc.snapshot(t); after.Revision != before.Revision {
		t.Fatalf("repeated delete bumped the revision")
	}
	if q := must[*cloud.Quotas](t)(tc.reader.GetQuotas(ctx)); q.Volumes.Used != 0 || q.CapacityBytes.Used != 0 {
		t.Fatalf("quota use after delete: %+v", q)
	}
	inst := cloud.CreateInstanceRequest{ID: "node-c", Zone: "zone-a", InstanceType: "small"}
	i1 := must[*cloud.Instance](t)(tc.admin.CreateInstance(ctx, inst))
	if i2 := must[*cloud.Instance](t)(tc.admin.CreateInstance(ctx, inst)); i1.Revision != i2.Revision {
		t.Fatalf("repeated instance create changed it")
	}
}

func TestQuotasAndCapacity(t *testing.T) {
	tc := startCloud(t, server.Config{})
	ctx := context.Background()
	must[*cloud.Quotas](t)(tc.admin.PatchQuotas(ctx, cloud.QuotasPatch{Attachments: ptr[int64](2), Volumes: ptr[int64](3), CapacityBytes: ptr[int64](100)}))
	var vols []*cloud.Volume
	for i := range 3 {
		vols = append(vols, must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: fmt.Sprint("v", i), SizeBytes: 30, Zone: "zone-a"})))
	}
	_, err := tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "v4", SizeBytes: 1, Zone: "zone-a"})
	wantCode(t, err, cloud.CodeVolumeQuotaExceeded)
	must[*cloud.Quotas](t)(tc.admin.PatchQuotas(ctx, cloud.QuotasPatch{Volumes: ptr[int64](10)}))
	_, err = tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "v4", SizeBytes: 11, Zone: "zone-a"})
	wantCode(t, err, cloud.CodeCapacityQuotaExceeded)

	must[*cloud.Attachment](t)(tc.driver.AttachVolume(ctx, vols[0].ID, "node-a"))
	c := must[*cloud.Capacity](t)(tc.driver.GetCapacity(ctx, "node-a"))
	if c.AttachLimit != 4 || c.OutOfBandSlots != 1 || c.Attached != 1 || c.QuotaHeadroom != 1 || c.Instances != 2 {
		t.Fatalf("capacity %+v", c)
	}
	must[*cloud.Attachment](t)(tc.driver.AttachVolume(ctx, vols[1].ID, "node-a"))
	_, err = tc.driver.AttachVolume(ctx, vols[2].ID, "node-a")
	wantCode(t, err, cloud.CodeAttachmentQuotaExceeded)
	// Lowering the quota below use refuses new use and evicts nothing; headroom is never negative.
	must[*cloud.Quotas](t)(tc.admin.PatchQuotas(ctx, cloud.QuotasPatch{Attachments: ptr[int64](0)}))
	c = must[*cloud.Capacity](t)(tc.driver.GetCapacity(ctx, "node-a"))
	if c.QuotaHeadroom != 0 || c.Attached != 2 {
		t.Fatalf("capacity after quota cut %+v", c)
	}
	must[*cloud.Quotas](t)(tc.admin.PatchQuotas(ctx, cloud.QuotasPatch{Attachments: ptr[int64](40)}))
	must[*cloud.Instance](t)(tc.admin.PatchInstance(ctx, "node-a", cloud.InstancePatch{OutOfBandSlots: ptr(2)}))
	_, err = tc.driver.AttachVolume(ctx, vols[2].ID, "node-a")
	wantCode(t, err, cloud.CodeAttachmentLimitExceeded)
}

func TestListPaging(t *testing.T) {
	tc := startCloud(t, server.Config{})
	ctx := context.Background()
	var want []string
	for i := range 7 {
		v := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: fmt.Sprint("v", i), SizeBytes: 1, Zone: "zone-a"}))
		want = append(want, v.ID)
	}
	var got []string
	token, pages := "", 0
	for {
		page := must[*cloud.VolumeList](t)(tc.reader.ListVolumes(ctx, 3, token))
		pages++
		for _, v := range page.Volumes {
			got = append(got, v.ID)
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") || pages != 3 {
		t.Fatalf("paged %v in %d pages, want %v in 3", got, pages, want)
	}
	for _, id := range want[:2] {
		must[*cloud.Snapshot](t)(tc.driver.CreateSnapshot(ctx, cloud.CreateSnapshotRequest{Name: "s" + id, SourceVolumeID: id}))
	}
	sl := must[*cloud.SnapshotList](t)(tc.reader.ListSnapshots(ctx, cloud.ListSnapshotsOptions{SourceVolumeID: want[1], MaxResults: 1}))
	if len(sl.Snapshots) != 1 || sl.Snapshots[0].SourceVolumeID != want[1] || sl.NextPageToken != "" {
		t.Fatalf("filtered snapshots %+v", sl)
	}
}

func TestAutoRegister(t *testing.T) {
	tc := startCloud(t, server.Config{AutoRegister: true, DefaultInstanceType: "medium", DefaultZone: "zone-b"})
	ctx := context.Background()
	_, err := tc.reader.GetCapacity(ctx, "kind-worker")
	wantCode(t, err, cloud.CodeInstanceNotFound)
	c := must[*cloud.Capacity](t)(tc.driver.GetCapacity(ctx, "kind-worker"))
	if c.AttachLimit != 8 || c.Instances != 3 {
		t.Fatalf("auto-registered capacity %+v", c)
	}
	v := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "v", SizeBytes: 1, Zone: "zone-b"}))
	_, err = tc.driver.AttachVolume(ctx, v.ID, "kind-worker2")
	wantCode(t, err, cloud.CodeInstanceNotFound) // an attach never registers
	a := must[*cloud.Attachment](t)(tc.driver.AttachVolume(ctx, v.ID, "kind-worker"))
	inst := must[*cloud.Instance](t)(tc.reader.GetInstance(ctx, "kind-worker"))
	if inst.Zone != "zone-b" || inst.InstanceType != "medium" || len(inst.Attachments) != 1 || a.InstanceID != "kind-worker" {
		t.Fatalf("auto-registered instance after attach: %+v", inst)
	}
	v2 := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "no-zone", SizeBytes: 1}))
	if v2.Zone != "zone-b" {
		t.Fatalf("volume created without a zone is in %q, want the default zone-b", v2.Zone)
	}
}

func TestResetReturnsToSeed(t *testing.T) {
	seed := testSeed()
	seed.Faults = []cloud.FaultRule{{Operation: cloud.OperationGetVolume, VolumeID: "vol-x", Error: cloud.CodeThrottled}}
	tc := startCloud(t, server.Config{Seed: seed})
	ctx := context.Background()
	v := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "v", SizeBytes: 1, Zone: "zone-a"}))
	must[*cloud.Attachment](t)(tc.driver.AttachVolume(ctx, v.ID, "node-a"))
	must[*cloud.Instance](t)(tc.admin.PatchInstance(ctx, "node-a", cloud.InstancePatch{AttachLimit: ptr(1)}))
	must[*cloud.FaultRule](t)(tc.admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationAny, Error: cloud.CodeUnavailable, InstanceID: "zzz"}))
	before := tc.snapshot(t)
	if err := tc.admin.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	after := tc.snapshot(t)
	if after.Revision <= before.Revision {
		t.Fatalf("revision went from %d to %d over reset", before.Revision, after.Revision)
	}
	if len(after.Volumes) != 0 || after.Quotas.Attachments.Used != 0 || len(after.Instances) != 2 || after.Instances[0].AttachLimit != 4 {
		t.Fatalf("state after reset: %s", mustJSON(t, after))
	}
	if len(after.Faults) != 1 || after.Faults[0].VolumeID != "vol-x" {
		t.Fatalf("faults after reset: %+v (want only the seeded one)", after.Faults)
	}
}

func TestConcurrentAttachesForLastSlots(t *testing.T) {
	tc := startCloud(t, server.Config{})
	ctx := context.Background()
	const n = 200
	// node-b: medium (8) with one boot disk; take 2 more slots so k = 5 are free.
	must[*cloud.Instance](t)(tc.admin.PatchInstance(ctx, "node-b", cloud.InstancePatch{OutOfBandSlots: ptr(3)}))
	const k = 8 - 3
	vols := make([]string, n)
	for i := range n {
		vols[i] = must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: fmt.Sprint("race-", i), SizeBytes: 1, Zone: "zone-b"})).ID
	}
	startRev := tc.snapshot(t).Revision
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ok       int
		limited  int
		other    []error
		start    = make(chan struct{})
		attached = map[string]string{}
	)
	for _, id := range vols {
		wg.Go(func() {
			<-start
			a, err := tc.driver.AttachVolume(ctx, id, "node-b")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
				attached[id] = a.Device
			case errors.Is(err, cloud.ErrAttachmentLimitExceeded):
				limited++
			default:
				other = append(other, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if ok != k || limited != n-k || len(other) > 0 {
		t.Fatalf("%d attached, %d AttachmentLimitExceeded, other errors %v; want %d and %d", ok, limited, other, k, n-k)
	}
	inst := must[*cloud.Instance](t)(tc.reader.GetInstance(ctx, "node-b"))
	if len(inst.Attachments) != k {
		t.Fatalf("instance holds %d attachments, want %d", len(inst.Attachments), k)
	}
	events := must[[]cloud.Event](t)(tc.reader.ListEvents(ctx, startRev))
	seen := 0
	for _, ev := range events {
		if ev.Type != "VolumeAttached" {
			continue
		}
		seen++
		if ev.Attached == nil || ev.Limit == nil || *ev.Attached > *ev.Limit {
			t.Errorf("event %+v: attached above the limit", ev)
		}
		if _, ok := attached[ev.VolumeID]; !ok {
			t.Errorf("event for %s, which the client saw fail", ev.VolumeID)
		}
	}
	if seen != k {
		t.Fatalf("%d VolumeAttached events, want %d", seen, k)
	}
}

func TestRestartKeepsAttachments(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	tc := startCloud(t, server.Config{DataDir: dir})
	v := must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "v", SizeBytes: 1, Zone: "zone-a"}))
	a := must[*cloud.Attachment](t)(tc.driver.AttachVolume(ctx, v.ID, "node-a"))
	capBefore := must[*cloud.Capacity](t)(tc.driver.GetCapacity(ctx, "node-a"))
	before := tc.snapshot(t)
	tc.stop()

	tc2 := startCloud(t, server.Config{DataDir: dir})
	capAfter := must[*cloud.Capacity](t)(tc2.driver.GetCapacity(ctx, "node-a"))
	if capBefore.Epoch == "" || capAfter.Epoch != capBefore.Epoch {
		t.Fatalf("epoch %q before restart, %q after: want the same, non-empty", capBefore.Epoch, capAfter.Epoch)
	}
	fresh := startCloud(t, server.Config{DataDir: t.TempDir()})
	if e := must[*cloud.Capacity](t)(fresh.driver.GetCapacity(ctx, "node-a")).Epoch; e == "" || e == capBefore.Epoch {
		t.Fatalf("a new data dir has epoch %q, the old one %q: want a new, non-empty one", e, capBefore.Epoch)
	}
	after := tc2.snapshot(t)
	if after.Revision < before.Revision {
		t.Fatalf("revision went back from %d to %d", before.Revision, after.Revision)
	}
	if mustJSON(t, after) != mustJSON(t, before) {
		t.Fatalf("state differs after restart:\nbefore %s\nafter  %s", mustJSON(t, before), mustJSON(t, after))
	}
	again := must[*cloud.Attachment](t)(tc2.driver.AttachVolume(ctx, v.ID, "node-a"))
	if *again != *a {
		t.Fatalf("attach after restart %+v, before %+v", again, a)
	}
	if rev := tc2.snapshot(t).Revision; rev != before.Revision {
		t.Fatalf("idempotent attach after restart moved the revision %d -> %d", before.Revision, rev)
	}
	// The next volume gets a fresh ID: counters survive too.
	if v2 := must[*cloud.Volume](t)(tc2.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "v2", SizeBytes: 1, Zone: "zone-a"})); v2.ID == v.ID {
		t.Fatalf("volume ID %s reused after restart", v2.ID)
	}
}

func ptr[T any](v T) *T { return &v }
