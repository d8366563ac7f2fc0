package server_test

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

// TestGroupSnapshotOverHTTP: a group snapshot is one GroupSnapshotCreated event at one
// revision; a fault rule on CreateGroupSnapshot fails the whole group and leaves no member
// behind; a reader may read a group but not create or delete one; a body that breaks the
// bounds is refused before anything is stored; the delete removes the members with it.
func TestGroupSnapshotOverHTTP(t *testing.T) {
	tc := startCloud(t, server.Config{})
	ctx := context.Background()
	var ids []string
	for _, name := range []string{"a", "b"} {
		ids = append(ids, must[*cloud.Volume](t)(tc.driver.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: name, SizeBytes: 1, Zone: "zone-a"})).ID)
	}

	// A fault fails the group as a whole: no member, no group, no name taken.
	if _, err := tc.admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationCreateGroupSnapshot, Error: cloud.CodeUnavailable, Count: 1}); err != nil {
		t.Fatal(err)
	}
	before := tc.snapshot(t)
	_, err := tc.driver.CreateGroupSnapshot(ctx, cloud.CreateGroupSnapshotRequest{Name: "g", SourceVolumeIDs: ids})
	wantCode(t, err, cloud.CodeUnavailable)
	after := tc.snapshot(t)
	if len(after.Snapshots) != 0 || !reflect.DeepEqual(before.Volumes, after.Volumes) {
		t.Fatalf("a faulted group snapshot left %d snapshots behind", len(after.Snapshots))
	}

	rev := after.Revision
	g := must[*cloud.GroupSnapshot](t)(tc.driver.CreateGroupSnapshot(ctx, cloud.CreateGroupSnapshotRequest{Name: "g", SourceVolumeIDs: ids}))
	if g.Revision != rev+1 {
		t.Errorf("group at revision %d, want %d: one transaction, one revision", g.Revision, rev+1)
	}
	created := 0
	for _, e := range must[[]cloud.Event](t)(tc.reader.ListEvents(ctx, rev)) {
		switch e.Type {
		case "GroupSnapshotCreated":
			created++
			if !strings.Contains(e.Detail, "groupSnapshot="+g.ID) || !strings.Contains(e.Detail, "volumes=2") {
				t.Errorf("event detail %q does not name the group and its 2 volumes", e.Detail)
			}
		case "SnapshotCreated":
			t.Errorf("a member has an event of its own: %+v", e)
		}
	}
	if created != 1 {
		t.Errorf("%d GroupSnapshotCreated events, want 1", created)
	}
	if got := must[*cloud.GroupSnapshot](t)(tc.reader.GetGroupSnapshot(ctx, g.ID)); !reflect.DeepEqual(got, g) {
		t.Errorf("GET answered %+v, the create %+v", got, g)
	}
	_, err = tc.reader.CreateGroupSnapshot(ctx, cloud.CreateGroupSnapshotRequest{Name: "r", SourceVolumeIDs: ids})
	wantCode(t, err, cloud.CodeAccessDenied)
	wantCode(t, tc.reader.DeleteGroupSnapshot(ctx, g.ID), cloud.CodeAccessDenied)

	for name, body := range map[string]string{
		"unknown field":   `{"name":"x","sourceVolumeIds":["` + ids[0] + `"],"parameters":{}}`,
		"id too long":     `{"name":"x","sourceVolumeIds":["` + strings.Repeat("v", cloud.MaxIDBytes+1) + `"]}`,
		"not a list":      `{"name":"x","sourceVolumeIds":"` + ids[0] + `"}`,
		"control in name": `{"name":"x\u0001","sourceVolumeIds":["` + ids[0] + `"]}`,
	} {
		t.Run(name, func(t *testing.T) {
			before := tc.snapshot(t)
			r := tc.do(t, http.MethodPost, "/v1/group-snapshots", driverToken, body)
			if r.status != http.StatusBadRequest || r.errorBody(t).Code != cloud.CodeInvalidArgument {
				t.Fatalf("status %d %s, want 400 InvalidArgument", r.status, r.body)
			}
			if after := tc.snapshot(t); !reflect.DeepEqual(before, after) {
				t.Errorf("a refused request changed the state")
			}
		})
	}

	if err := tc.driver.DeleteGroupSnapshot(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	for _, m := range g.Snapshots {
		_, err := tc.reader.GetSnapshot(ctx, m.ID)
		wantCode(t, err, cloud.CodeSnapshotNotFound)
	}
	wantCode(t, tc.driver.DeleteGroupSnapshot(ctx, g.ID), cloud.CodeGroupSnapshotNotFound)
}
