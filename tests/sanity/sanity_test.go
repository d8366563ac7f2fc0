// Package sanity_test runs csi-sanity and our own publish checks in process against the real
// pair: the driver (mode all) talking HTTP to a real fake cloud on loopback.
package sanity_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/tests/teststack"
)

const gib = int64(1) << 30

// TestSanity runs every csi-sanity spec that applies, including the node attach-limit spec
// (publish max_volumes_per_node volumes, then one more must fail).
func TestSanity(t *testing.T) {
	if testing.Short() {
		t.Skip("csi-sanity against the real pair takes a few seconds")
	}
	dir, err := os.MkdirTemp("", "sanity-paths")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	// csi-sanity's staging and target paths lie in dir: the node plugin's kubelet root.
	s := teststack.Start(t, teststack.Config{AttachLimit: 8, Instances: []string{"sanity-node"}, KubeletRoot: dir})

	cfg := sanity.NewTestConfig()
	cfg.Address = s.Endpoint
	cfg.TargetPath = filepath.Join(dir, "target")
	cfg.StagingPath = filepath.Join(dir, "staging")
	cfg.TestVolumeSize = 2 * gib
	cfg.TestVolumeExpandSize = 4 * gib
	cfg.IdempotentCount = 2
	cfg.TestNodeVolumeAttachLimit = true
	// A VolumeAttributesClass's parameters (MODIFY_VOLUME), as deploy/kind's "fast" class.
	cfg.TestVolumeMutableParameters = map[string]string{"type": "ssd", "iops": "3000"}
	sanity.Test(t, cfg)
}

// TestPublishOverLimit demands exactly RESOURCE_EXHAUSTED for the publish past the node's
// capacity, the code the external-attacher turns into attachError.errorCode 8 and the kubelet
// into a pod rejection; a volume already published stays publishable (idempotent); after an
// unpublish the slot is usable again.
func TestPublishOverLimit(t *testing.T) {
	s := teststack.Start(t, teststack.Config{AttachLimit: 4, Instances: []string{"node-1"}}) // 1 slot out of band: 3 for the driver
	ctx := context.Background()
	ctrl, node := csi.NewControllerClient(s.Conn), csi.NewNodeClient(s.Conn)

	info, err := node.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := info.GetMaxVolumesPerNode(); got != 3 {
		t.Fatalf("max_volumes_per_node = %d, want 3 (limit 4 - 1 out of band)", got)
	}
	var vols []string
	for i := range 4 {
		vols = append(vols, s.CreateVolume(t, fmt.Sprintf("over-limit-%d", i)))
	}
	for _, v := range vols[:3] {
		if _, err := ctrl.ControllerPublishVolume(ctx, teststack.PublishRequest(v, s.NodeID)); err != nil {
			t.Fatalf("publish %s: %v", v, err)
		}
	}
	if _, err := ctrl.ControllerPublishVolume(ctx, teststack.PublishRequest(vols[3], s.NodeID)); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("publish past the limit: got %v, want code ResourceExhausted", err)
	}
	if _, err := ctrl.ControllerPublishVolume(ctx, teststack.PublishRequest(vols[0], s.NodeID)); err != nil {
		t.Fatalf("re-publish of an attached volume on a full node: %v", err)
	}
	// The count is the total this driver may use, not the free slots: still 3 when full.
	info, err = node.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := info.GetMaxVolumesPerNode(); got != 3 {
		t.Fatalf("max_volumes_per_node on a full node = %d, want 3 (total, not free)", got)
	}
	if _, err := ctrl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: vols[1], NodeId: s.NodeID}); err != nil {
		t.Fatalf("unpublish: %v", err)
	}
	if _, err := ctrl.ControllerPublishVolume(ctx, teststack.PublishRequest(vols[3], s.NodeID)); err != nil {
		t.Fatalf("publish after a slot was freed: %v", err)
	}
	inst, err := s.Admin.GetInstance(ctx, s.NodeID)
	if err != nil {
		t.Fatal(err)
	}
	if len(inst.Attachments) != 3 {
		t.Fatalf("cloud holds %d attachments on %s (%v), want 3", len(inst.Attachments), s.NodeID, inst.Attachments)
	}
}

// TestPublishFaultCodes injects each kind of AttachVolume fault into the real cloud and checks
// the gRPC code the attacher sees (docs/errors.md): only a capacity shortage is
// RESOURCE_EXHAUSTED; permission, topology, throttling and outages are not, and once such a
// fault is gone the publish goes through. After a capacity refusal the node is in its backoff
// window: the next publish is refused without reaching the cloud.
func TestPublishFaultCodes(t *testing.T) {
	tests := []struct {
		fault    cloud.Code
		want     codes.Code
		capacity bool
	}{
		{cloud.CodeAccessDenied, codes.PermissionDenied, false},
		{cloud.CodeUnauthenticated, codes.Unauthenticated, false},
		{cloud.CodeZoneMismatch, codes.FailedPrecondition, false},
		{cloud.CodeVolumeInUse, codes.FailedPrecondition, false},
		{cloud.CodeThrottled, codes.Unavailable, false},
		{cloud.CodeUnavailable, codes.Unavailable, false},
		{cloud.CodeInternalError, codes.Internal, false},
		{cloud.CodeAttachmentLimitExceeded, codes.ResourceExhausted, true},
		{cloud.CodeAttachmentQuotaExceeded, codes.ResourceExhausted, true},
	}
	for _, tc := range tests {
		t.Run(string(tc.fault), func(t *testing.T) {
			s := teststack.Start(t, teststack.Config{AttachLimit: 8, Instances: []string{"node-1"}})
			ctx := context.Background()
			ctrl := csi.NewControllerClient(s.Conn)
			vol := s.CreateVolume(t, "fault-"+string(tc.fault))
			// Count: 1, so a second call that reaches the cloud is attached.
			if _, err := s.Admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationAttachVolume, VolumeID: vol, Error: tc.fault, Count: 1}); err != nil {
				t.Fatal(err)
			}
			_, err := ctrl.ControllerPublishVolume(ctx, teststack.PublishRequest(vol, s.NodeID))
			if status.Code(err) != tc.want {
				t.Fatalf("publish with fault %s: got %v, want code %s", tc.fault, err, tc.want)
			}
			if tc.capacity {
				_, err := ctrl.ControllerPublishVolume(ctx, teststack.PublishRequest(vol, s.NodeID))
				if status.Code(err) != codes.ResourceExhausted {
					t.Fatalf("publish inside the node's backoff window: got %v, want code ResourceExhausted", err)
				}
				if got := attachedTo(t, s, vol); got != "" {
					t.Fatalf("volume %s attached to %q: the publish inside the backoff window reached the cloud", vol, got)
				}
				return
			}
			// The rule is spent; retries (the attacher's) must go through, never via
			// RESOURCE_EXHAUSTED, once any per-volume backoff has passed.
			deadline := time.Now().Add(10 * time.Second)
			for {
				_, err := ctrl.ControllerPublishVolume(ctx, teststack.PublishRequest(vol, s.NodeID))
				if err == nil {
					break
				}
				if status.Code(err) == codes.ResourceExhausted || time.Now().After(deadline) {
					t.Fatalf("publish after fault %s was spent: %v", tc.fault, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if got := attachedTo(t, s, vol); got != s.NodeID {
				t.Fatalf("volume %s attached to %q, want %q", vol, got, s.NodeID)
			}
		})
	}
}

func attachedTo(t *testing.T, s *teststack.Stack, volumeID string) string {
	t.Helper()
	v, err := s.Admin.GetVolume(context.Background(), volumeID)
	if err != nil {
		t.Fatal(err)
	}
	return v.AttachedTo
}
