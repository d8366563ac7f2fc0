package sanity_test

import (
	"context"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/tests/teststack"
)

// eventually polls fn until it returns true or 30 s pass; the driver's capacity lookups and
// publish backoff run on their own clocks.
func eventually(t *testing.T, what string, fn func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !fn() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestImpairedInstance drives the whole health story through the real fake cloud: an
// impaired instance refuses the attach with UNAVAILABLE (retried by the attacher, never
// RESOURCE_EXHAUSTED, so no pod is rejected), the node reports its floor so the scheduler
// places nothing new there, the node's storage health says so, and when health returns the
// count comes back at once and the publish goes through.
func TestImpairedInstance(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: a real fake cloud and driver")
	}
	s := teststack.Start(t, teststack.Config{AttachLimit: 8, Instances: []string{"node-1"}})
	ctx := context.Background()
	ctrl, node := csi.NewControllerClient(s.Conn), csi.NewNodeClient(s.Conn)
	count := func() int64 {
		info, err := node.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return info.GetMaxVolumesPerNode()
	}
	eventually(t, "count 7 at start", func() bool { return count() == 7 })
	a, b := s.CreateVolume(t, "impaired-a"), s.CreateVolume(t, "impaired-b")
	if _, err := ctrl.ControllerPublishVolume(ctx, teststack.PublishRequest(a, s.NodeID)); err != nil {
		t.Fatalf("publish before the impairment: %v", err)
	}

	if _, err := s.Admin.SetInstanceHealth(ctx, s.NodeID, cloud.InstanceHealthImpaired, "host maintenance"); err != nil {
		t.Fatal(err)
	}
	_, err := ctrl.ControllerPublishVolume(ctx, teststack.PublishRequest(b, s.NodeID))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("publish to an impaired instance: %v, want UNAVAILABLE (never RESOURCE_EXHAUSTED)", err)
	}
	eventually(t, "count at the floor while impaired", func() bool { return count() == 1 })
	sh, err := node.NodeGetStorageHealth(ctx, &csi.NodeGetStorageHealthRequest{})
	if err != nil || len(sh.GetBackendHealth()) != 1 || sh.GetBackendHealth()[0].GetStatus() != csi.StorageHealthErrorType_STORAGE_DEGRADED {
		t.Errorf("storage health of an impaired node: %v, %v; want one STORAGE_DEGRADED", sh, err)
	}

	if _, err := s.Admin.SetInstanceHealth(ctx, s.NodeID, cloud.InstanceHealthOK, ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, "count back to 7 without a ramp", func() bool { return count() == 7 })
	eventually(t, "publish after health returned", func() bool {
		_, err := ctrl.ControllerPublishVolume(ctx, teststack.PublishRequest(b, s.NodeID))
		if c := status.Code(err); c == codes.ResourceExhausted {
			t.Fatalf("publish answered RESOURCE_EXHAUSTED: %v", err)
		}
		return err == nil
	})
}

// TestVolumeHealthThroughTheCloud: the cloud's volume health reaches both services.
func TestVolumeHealthThroughTheCloud(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: a real fake cloud and driver")
	}
	s := teststack.Start(t, teststack.Config{AttachLimit: 8, Instances: []string{"node-1"}})
	ctx := context.Background()
	ctrl, node := csi.NewControllerClient(s.Conn), csi.NewNodeClient(s.Conn)
	v := s.CreateVolume(t, "health")
	if _, err := s.Admin.SetVolumeHealth(ctx, v, cloud.VolumeHealthFailed, "disk lost"); err != nil {
		t.Fatal(err)
	}
	ch, err := ctrl.ControllerGetVolumeHealth(ctx, &csi.ControllerGetVolumeHealthRequest{VolumeId: v})
	if err != nil || len(ch.GetVolumeHealth().GetHealthStatuses()) != 1 || ch.GetVolumeHealth().GetHealthStatuses()[0].GetStatus() != csi.VolumeHealthErrorType_DATA_LOSS {
		t.Errorf("controller health: %v, %v; want DATA_LOSS", ch, err)
	}
	nh, err := node.NodeGetVolumeHealth(ctx, &csi.NodeGetVolumeHealthRequest{VolumeId: v})
	if err != nil || len(nh.GetVolumeHealth().GetHealthStatuses()) != 1 || nh.GetVolumeHealth().GetHealthStatuses()[0].GetStatus() != csi.VolumeHealthErrorType_DATA_LOSS {
		t.Errorf("node health: %v, %v; want DATA_LOSS", nh, err)
	}
	list, err := ctrl.ControllerListVolumeHealth(ctx, &csi.ControllerListVolumeHealthRequest{})
	if err != nil || len(list.GetEntries()) != 1 || list.GetEntries()[0].GetVolumeId() != v {
		t.Errorf("list health: %v, %v; want the one failed volume", list, err)
	}
}
