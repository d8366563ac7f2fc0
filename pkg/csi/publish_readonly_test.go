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

// TestControllerPublishReadOnly: PUBLISH_READONLY. readonly (or the SINGLE_NODE_READER_ONLY
// access mode) attaches read-only in the cloud and says so in publish_context; a repeat in
// the same mode is OK; the other mode on the same node is ALREADY_EXISTS and leaves the
// attachment as it was; after an unpublish the other mode attaches.
func TestControllerPublishReadOnly(t *testing.T) {
	ctx := context.Background()
	s, f := newController(t)
	caps, err := s.ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
	wantCode(t, err, codes.OK)
	advertised := false
	for _, c := range caps.GetCapabilities() {
		advertised = advertised || c.GetRpc().GetType() == csi.ControllerServiceCapability_RPC_PUBLISH_READONLY
	}
	if !advertised {
		t.Fatal("PUBLISH_READONLY is not advertised")
	}
	v1, v2 := mustCreate(t, s, "v1").GetVolumeId(), mustCreate(t, s, "v2").GetVolumeId()
	reader := mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY)
	pub := func(vol string, c *csi.VolumeCapability, ro bool) *csi.ControllerPublishVolumeRequest {
		return &csi.ControllerPublishVolumeRequest{VolumeId: vol, NodeId: "i-1", VolumeCapability: c, Readonly: ro}
	}
	for _, c := range []struct {
		name   string
		req    *csi.ControllerPublishVolumeRequest
		want   codes.Code
		wantRO bool
	}{
		{name: "read-only", req: pub(v1, rwo, true), want: codes.OK, wantRO: true},
		{name: "read-only again", req: pub(v1, rwo, true), want: codes.OK, wantRO: true},
		{name: "read-write on the same node", req: pub(v1, rwo, false), want: codes.AlreadyExists, wantRO: true},
		{name: "reader-only access mode", req: pub(v2, reader, false), want: codes.OK, wantRO: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, err := s.ControllerPublishVolume(ctx, c.req)
			wantCode(t, err, c.want)
			if err == nil {
				if got := resp.GetPublishContext()[PublishContextReadOnly] == "true"; got != c.wantRO {
					t.Errorf("publish_context %v: read-only %v, want %v", resp.GetPublishContext(), got, c.wantRO)
				}
			}
			v, err := f.GetVolume(ctx, c.req.GetVolumeId())
			if err != nil {
				t.Fatal(err)
			}
			if v.AttachedTo != "i-1" || v.ReadOnly != c.wantRO {
				t.Errorf("cloud volume on %q read-only %v, want on i-1 read-only %v", v.AttachedTo, v.ReadOnly, c.wantRO)
			}
		})
	}
	_, err = s.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: v1, NodeId: "i-1"})
	wantCode(t, err, codes.OK)
	resp, err := s.ControllerPublishVolume(ctx, pub(v1, rwo, false))
	wantCode(t, err, codes.OK)
	if _, ro := resp.GetPublishContext()[PublishContextReadOnly]; ro {
		t.Errorf("read-write publish after unpublish: publish_context %v", resp.GetPublishContext())
	}
	if v, _ := f.GetVolume(ctx, v1); v.ReadOnly {
		t.Errorf("cloud volume %+v still read-only", v)
	}
	if _, err := f.Attach(ctx, v1, cloud.AttachRequest{InstanceID: "i-1", ReadOnly: true}); cloud.CodeOf(err) != cloud.CodeAlreadyExists {
		t.Errorf("the fake's read-only attach of a read-write attachment: %v, want AlreadyExists", err)
	}
}

// TestNodePublishFollowsReadOnlyAttachment: publish_context readOnly makes the node publish
// read-only although the request's readonly is false; without it the publish is read-write.
// With real mounts (root), a write through the read-only target fails.
func TestNodePublishFollowsReadOnlyAttachment(t *testing.T) {
	mounters(t, func(t *testing.T, m mount.Mounter) {
		ctx := context.Background()
		e := newNode(t, m, nil)
		staging := filepath.Join(e.dir, "staging")
		roTarget, rwTarget := filepath.Join(e.dir, "pods", "ro"), filepath.Join(e.dir, "pods", "rw")
		cleanupMounts(t, m, roTarget, rwTarget, staging)
		_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging, VolumeCapability: rwo})
		wantCode(t, err, codes.OK)
		for _, c := range []struct {
			target string
			pc     map[string]string
			wantRO bool
		}{
			{roTarget, map[string]string{PublishContextDevicePath: "/dev/x", PublishContextReadOnly: "true"}, true},
			{rwTarget, map[string]string{PublishContextDevicePath: "/dev/x"}, false},
		} {
			_, err := e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging, TargetPath: c.target,
				VolumeCapability: rwo, PublishContext: c.pc})
			wantCode(t, err, codes.OK)
			mp, err := m.MountPoint(c.target)
			if err != nil || mp == nil {
				t.Fatalf("%s not mounted: %v", c.target, err)
			}
			if mp.ReadOnly != c.wantRO {
				t.Errorf("%s mounted read-only %v, want %v", c.target, mp.ReadOnly, c.wantRO)
			}
		}
		if e.real {
			if err := os.WriteFile(filepath.Join(roTarget, "x"), nil, 0o640); err == nil {
				t.Error("wrote through the publish of a read-only attachment")
			}
		}
	})
}
