package csi

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

func healthStatuses(h *csi.VolumeHealth) []csi.VolumeHealthErrorType {
	var out []csi.VolumeHealthErrorType
	for _, e := range h.GetHealthStatuses() {
		out = append(out, e.GetStatus())
	}
	return out
}

// TestControllerVolumeHealth: GET_VOLUME_HEALTH and LIST_VOLUME_HEALTH report the cloud's
// volume health (none for ok, DEGRADED, DATA_LOSS); a missing volume is NOT_FOUND, bad input
// INVALID_ARGUMENT; the list holds only the abnormal volumes.
func TestControllerVolumeHealth(t *testing.T) {
	ctx := context.Background()
	s, f := newController(t)
	okVol, degraded, failed := mustCreate(t, s, "ok").GetVolumeId(), mustCreate(t, s, "d").GetVolumeId(), mustCreate(t, s, "f").GetVolumeId()
	f.SetVolumeHealth(degraded, cloud.VolumeHealthDegraded, "one replica lost")
	f.SetVolumeHealth(failed, cloud.VolumeHealthFailed, "")
	for _, c := range []struct {
		name string
		id   string
		want codes.Code
		st   []csi.VolumeHealthErrorType
	}{
		{"ok", okVol, codes.OK, nil},
		{"degraded", degraded, codes.OK, []csi.VolumeHealthErrorType{csi.VolumeHealthErrorType_DEGRADED}},
		{"failed", failed, codes.OK, []csi.VolumeHealthErrorType{csi.VolumeHealthErrorType_DATA_LOSS}},
		{"missing", "vol-404", codes.NotFound, nil},
		{"no id", "", codes.InvalidArgument, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, err := s.ControllerGetVolumeHealth(ctx, &csi.ControllerGetVolumeHealthRequest{VolumeId: c.id})
			wantCode(t, err, c.want)
			if c.want != codes.OK {
				return
			}
			if got := healthStatuses(resp.GetVolumeHealth()); len(got) != len(c.st) || (len(got) > 0 && got[0] != c.st[0]) || resp.GetVolumeHealth().GetVolumeId() != c.id {
				t.Errorf("health of %s = %v, want %v", c.id, resp.GetVolumeHealth(), c.st)
			}
		})
	}
	list, err := s.ControllerListVolumeHealth(ctx, &csi.ControllerListVolumeHealthRequest{})
	wantCode(t, err, codes.OK)
	got := map[string]bool{}
	for _, e := range list.GetEntries() {
		got[e.GetVolumeId()] = true
	}
	if len(got) != 2 || !got[degraded] || !got[failed] {
		t.Errorf("listed %v, want the degraded and the failed volume", got)
	}
	_, err = s.ControllerListVolumeHealth(ctx, &csi.ControllerListVolumeHealthRequest{MaxEntries: -1})
	wantCode(t, err, codes.InvalidArgument)
}

// TestNodeVolumeHealth: the node reports the cloud's health and, for a volume staged here,
// INACCESSIBLE when its backing data is gone.
func TestNodeVolumeHealth(t *testing.T) {
	ctx := context.Background()
	e := newNode(t, mount.NewFake(), nil)
	vol := e.fake.AddVolume(cloud.CreateVolumeRequest{Name: "v1", SizeBytes: GiB, Zone: "zone-a"}).ID
	staging := filepath.Join(e.dir, "staging")
	_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol, StagingTargetPath: staging, VolumeCapability: rwo})
	wantCode(t, err, codes.OK)
	get := func(id string) (*csi.NodeGetVolumeHealthResponse, error) {
		return e.srv.NodeGetVolumeHealth(ctx, &csi.NodeGetVolumeHealthRequest{VolumeId: id})
	}
	resp, err := get(vol)
	wantCode(t, err, codes.OK)
	if st := healthStatuses(resp.GetVolumeHealth()); len(st) != 0 {
		t.Errorf("healthy staged volume reports %v", st)
	}
	e.fake.SetVolumeHealth(vol, cloud.VolumeHealthDegraded, "slow")
	if err := os.RemoveAll(e.srv.dataDir(vol)); err != nil {
		t.Fatal(err)
	}
	resp, err = get(vol)
	wantCode(t, err, codes.OK)
	st := healthStatuses(resp.GetVolumeHealth())
	if len(st) != 2 || st[0] != csi.VolumeHealthErrorType_DEGRADED || st[1] != csi.VolumeHealthErrorType_INACCESSIBLE {
		t.Errorf("degraded volume without its data reports %v, want DEGRADED and INACCESSIBLE", st)
	}
	_, err = get("vol-404")
	wantCode(t, err, codes.NotFound)
	_, err = get("")
	wantCode(t, err, codes.InvalidArgument)
	_, err = get("a/b")
	wantCode(t, err, codes.InvalidArgument)
}

// TestNodeStorageHealth: no entry while the instance is ok and the data folder takes files;
// an impaired instance is STORAGE_DEGRADED, a stopped one STORAGE_UNREACHABLE; a data folder
// that takes no file is STORAGE_UNREACHABLE; a cloud outage is UNAVAILABLE.
func TestNodeStorageHealth(t *testing.T) {
	ctx := context.Background()
	e := newNode(t, mount.NewFake(), nil)
	get := func() []csi.StorageHealthErrorType {
		t.Helper()
		resp, err := e.srv.NodeGetStorageHealth(ctx, &csi.NodeGetStorageHealthRequest{})
		wantCode(t, err, codes.OK)
		var out []csi.StorageHealthErrorType
		for _, b := range resp.GetBackendHealth() {
			out = append(out, b.GetStatus())
		}
		return out
	}
	if st := get(); len(st) != 0 {
		t.Errorf("healthy node reports %v", st)
	}
	e.fake.SetInstanceHealth("i-1", cloud.InstanceHealthImpaired, "maintenance")
	if st := get(); len(st) != 1 || st[0] != csi.StorageHealthErrorType_STORAGE_DEGRADED {
		t.Errorf("impaired instance reports %v, want STORAGE_DEGRADED", st)
	}
	e.fake.SetInstanceHealth("i-1", cloud.InstanceHealthStopped, "")
	if st := get(); len(st) != 1 || st[0] != csi.StorageHealthErrorType_STORAGE_UNREACHABLE {
		t.Errorf("stopped instance reports %v, want STORAGE_UNREACHABLE", st)
	}
	e.fake.SetInstanceHealth("i-1", cloud.InstanceHealthOK, "")
	// The data folder's place taken by a file: nothing can be created in it.
	root := e.srv.volumesRoot()
	if err := os.MkdirAll(filepath.Dir(root), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	if st := get(); len(st) != 1 || st[0] != csi.StorageHealthErrorType_STORAGE_UNREACHABLE {
		t.Errorf("unusable data folder reports %v, want STORAGE_UNREACHABLE", st)
	}
	e.fake.FailNext(cloud.OperationGetInstance, cloud.NewError(cloud.CodeUnavailable, "down"))
	_, err := e.srv.NodeGetStorageHealth(ctx, &csi.NodeGetStorageHealthRequest{})
	wantCode(t, err, codes.Unavailable)
}
