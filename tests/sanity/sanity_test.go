// Package sanity_test runs csi-sanity and our own publish checks in process against the real
// pair: the driver (mode all) talking HTTP to a real fake cloud on loopback.
package sanity_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
	csidriver "github.com/fakecloud/fakecloud-csi/pkg/csi"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

const (
	nodeID      = "sanity-node"
	driverToken = "driver-token"
	adminToken  = "admin-token"
	gib         = int64(1) << 30
)

// stack is one fake cloud and one driver process (in goroutines), stopped by t.Cleanup.
type stack struct {
	endpoint string           // unix:///... of the driver
	admin    *cloud.Client    // admin role, to change the cloud behind the driver's back
	conn     *grpc.ClientConn // to the driver
}

// startStack starts a fake cloud whose only instance has limit slots, one of them out of
// band, and a driver in mode all for that instance.
func startStack(t *testing.T, limit int) *stack {
	t.Helper()
	// Unix socket paths are limited to 108 bytes; t.TempDir() under a long test name is not.
	dir, err := os.MkdirTemp("", "sanity")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })

	srv, err := server.New(server.Config{
		Seed: server.Seed{
			InstanceTypes: []cloud.InstanceType{{Name: "sanity", MaxAttachments: limit}},
			Instances:     []store.SeedInstance{{CreateInstanceRequest: cloud.CreateInstanceRequest{ID: nodeID, Zone: "zone-a", InstanceType: "sanity", OutOfBandSlots: 1}}},
			Quotas:        &store.Limits{Attachments: 1000, Volumes: 10000, CapacityBytes: 100 << 40},
		},
		Tokens: []server.Token{{Token: driverToken, Role: server.RoleDriver}, {Token: adminToken, Role: server.RoleAdmin}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cloudDone := make(chan error, 1)
	go func() { cloudDone <- srv.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String()

	driverClient, err := cloud.NewClient(url, cloud.WithToken(driverToken))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := cloud.NewClient(url, cloud.WithToken(adminToken))
	if err != nil {
		t.Fatal(err)
	}

	var m mount.Mounter = mount.NewFake()
	if os.Geteuid() == 0 {
		m = mount.NewLinux() // real bind mounts; as another user the fake stands in
	}
	opts := csidriver.DefaultOptions()
	opts.Mode, opts.NodeID, opts.Version = csidriver.ModeAll, nodeID, "v0.0.0-sanity"
	opts.Endpoint = "unix://" + filepath.Join(dir, "csi.sock")
	opts.StateDir = filepath.Join(dir, "state")
	opts.CloudURL = url
	opts.CapacityMinInterval = time.Millisecond
	d, err := csidriver.NewForCloud(opts, driverClient, m, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	driverDone := make(chan error, 1)
	go func() { driverDone <- d.Run(ctx) }()

	conn, err := grpc.NewClient(opts.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		cancel()
		if err := <-driverDone; err != nil {
			t.Errorf("driver Run: %v", err)
		}
		if err := <-cloudDone; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("fake cloud Serve: %v", err)
		}
		_ = srv.Close()
	})
	waitReady(t, conn)
	return &stack{endpoint: opts.Endpoint, admin: admin, conn: conn}
}

func waitReady(t *testing.T, conn *grpc.ClientConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		resp, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{}, grpc.WaitForReady(true))
		if err == nil && resp.GetReady().GetValue() {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("driver not ready: last probe %v, %v", resp, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestSanity runs every csi-sanity spec that applies, including the node attach-limit spec
// (publish max_volumes_per_node volumes, then one more must fail).
func TestSanity(t *testing.T) {
	if testing.Short() {
		t.Skip("csi-sanity against the real pair takes a few seconds")
	}
	s := startStack(t, 8)
	dir, err := os.MkdirTemp("", "sanity-paths")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })

	cfg := sanity.NewTestConfig()
	cfg.Address = s.endpoint
	cfg.TargetPath = filepath.Join(dir, "target")
	cfg.StagingPath = filepath.Join(dir, "staging")
	cfg.TestVolumeSize = 2 * gib
	cfg.TestVolumeExpandSize = 4 * gib
	cfg.IdempotentCount = 2
	cfg.TestNodeVolumeAttachLimit = true
	sanity.Test(t, cfg)
}

// TestPublishOverLimit demands exactly RESOURCE_EXHAUSTED for the publish past the node's
// capacity, the code the external-attacher turns into attachError.errorCode 8 and the kubelet
// into a pod rejection; a volume already published stays publishable (idempotent); after an
// unpublish the slot is usable again.
func TestPublishOverLimit(t *testing.T) {
	s := startStack(t, 4) // 4 slots, 1 out of band: 3 for the driver
	ctx := context.Background()
	ctrl, node := csi.NewControllerClient(s.conn), csi.NewNodeClient(s.conn)

	info, err := node.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := info.GetMaxVolumesPerNode(); got != 3 {
		t.Fatalf("max_volumes_per_node = %d, want 3 (limit 4 - 1 out of band)", got)
	}
	var vols []string
	for i := range 4 {
		vols = append(vols, createVolume(t, ctrl, fmt.Sprintf("over-limit-%d", i)))
	}
	for _, v := range vols[:3] {
		if _, err := ctrl.ControllerPublishVolume(ctx, publishReq(v)); err != nil {
			t.Fatalf("publish %s: %v", v, err)
		}
	}
	if _, err := ctrl.ControllerPublishVolume(ctx, publishReq(vols[3])); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("publish past the limit: got %v, want code ResourceExhausted", err)
	}
	if _, err := ctrl.ControllerPublishVolume(ctx, publishReq(vols[0])); err != nil {
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
	if _, err := ctrl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: vols[1], NodeId: nodeID}); err != nil {
		t.Fatalf("unpublish: %v", err)
	}
	if _, err := ctrl.ControllerPublishVolume(ctx, publishReq(vols[3])); err != nil {
		t.Fatalf("publish after a slot was freed: %v", err)
	}
	inst, err := s.admin.GetInstance(ctx, nodeID)
	if err != nil {
		t.Fatal(err)
	}
	if len(inst.Attachments) != 3 {
		t.Fatalf("cloud holds %d attachments on %s (%v), want 3", len(inst.Attachments), nodeID, inst.Attachments)
	}
}

// TestPublishFaultCodes injects each kind of AttachVolume fault into the real cloud and checks
// the gRPC code the attacher sees (domain.md, "Error classes"): only a capacity shortage is
// RESOURCE_EXHAUSTED; permission, topology, throttling and outages are not.
func TestPublishFaultCodes(t *testing.T) {
	s := startStack(t, 8)
	ctx := context.Background()
	ctrl := csi.NewControllerClient(s.conn)
	tests := []struct {
		fault cloud.Code
		want  codes.Code
	}{
		{cloud.CodeAccessDenied, codes.PermissionDenied},
		{cloud.CodeUnauthenticated, codes.Unauthenticated},
		{cloud.CodeZoneMismatch, codes.FailedPrecondition},
		{cloud.CodeVolumeInUse, codes.FailedPrecondition},
		{cloud.CodeThrottled, codes.Unavailable},
		{cloud.CodeUnavailable, codes.Unavailable},
		{cloud.CodeInternalError, codes.Internal},
		{cloud.CodeAttachmentLimitExceeded, codes.ResourceExhausted},
		{cloud.CodeAttachmentQuotaExceeded, codes.ResourceExhausted},
	}
	for _, tc := range tests {
		t.Run(string(tc.fault), func(t *testing.T) {
			vol := createVolume(t, ctrl, "fault-"+string(tc.fault))
			rule, err := s.admin.CreateFault(ctx, cloud.FaultRule{Operation: cloud.OperationAttachVolume, VolumeID: vol, Error: tc.fault, Count: 1})
			if err != nil {
				t.Fatal(err)
			}
			_, err = ctrl.ControllerPublishVolume(ctx, publishReq(vol))
			if status.Code(err) != tc.want {
				t.Fatalf("publish with fault %s: got %v, want code %s", tc.fault, err, tc.want)
			}
			if _, err := s.admin.GetVolume(ctx, vol); err != nil {
				t.Fatal(err)
			}
			// The rule fired once; with it spent, the same publish must now succeed.
			if _, err := ctrl.ControllerPublishVolume(ctx, publishReq(vol)); err != nil {
				t.Fatalf("publish after fault %s (rule %s) was spent: %v", tc.fault, rule.ID, err)
			}
			got, err := s.admin.GetVolume(ctx, vol)
			if err != nil {
				t.Fatal(err)
			}
			if got.AttachedTo != nodeID {
				t.Fatalf("volume %s attached to %q, want %q", vol, got.AttachedTo, nodeID)
			}
			if _, err := ctrl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: vol, NodeId: nodeID}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func createVolume(t *testing.T, ctrl csi.ControllerClient, name string) string {
	t.Helper()
	resp, err := ctrl.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
		Name:               name,
		CapacityRange:      &csi.CapacityRange{RequiredBytes: gib},
		VolumeCapabilities: []*csi.VolumeCapability{mountCapability()},
	})
	if err != nil {
		t.Fatalf("create volume %s: %v", name, err)
	}
	return resp.GetVolume().GetVolumeId()
}

func publishReq(volumeID string) *csi.ControllerPublishVolumeRequest {
	return &csi.ControllerPublishVolumeRequest{VolumeId: volumeID, NodeId: nodeID, VolumeCapability: mountCapability()}
}

func mountCapability() *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}
