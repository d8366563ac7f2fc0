package csi

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// The sources a volume is seeded from at its first stage (nodeclone.go): named by
// volume_context, which the CO passes along but anyone able to call the node can write, so
// the node checks them with the cloud before any data is copied.

// cloneSource is the source volume named by volume_context (VolumeContextSourceVolume), ""
// for a volume that is no clone. A source that cannot name a volume is INVALID_ARGUMENT,
// checked before any file is touched.
func cloneSource(id string, vc map[string]string) (string, error) {
	src, ok := vc[VolumeContextSourceVolume]
	if !ok {
		return "", nil
	}
	if err := firstError(validateNodeVolumeID(src), checkCloudVolumeShape(src)); err != nil {
		return "", invalid("volume_context %s: %s", VolumeContextSourceVolume, status.Convert(err).Message())
	}
	if src == id {
		return "", invalid("volume_context %s names the volume itself", VolumeContextSourceVolume)
	}
	return src, nil
}

// restoreSource is the snapshot named by volume_context (VolumeContextSourceSnapshot), "" for
// a volume not restored from one. A source that cannot name a folder is INVALID_ARGUMENT,
// checked before any file is touched.
func restoreSource(vc map[string]string) (string, error) {
	src, ok := vc[VolumeContextSourceSnapshot]
	if !ok {
		return "", nil
	}
	if err := validateNodeVolumeID(src); err != nil {
		return "", invalid("volume_context %s: %s", VolumeContextSourceSnapshot, status.Convert(err).Message())
	}
	return src, nil
}

// checkSources makes sure the clone source src and the snapshot snap named by volume_context
// (either may be "") are what the controller created volume id from: the cloud's record of
// the volume (cloud.Volume.SourceVolumeID, SourceSnapshotID, set by CreateVolume from the
// request's content source) must name exactly these. Otherwise a caller could have another
// tenant's volume or snapshot copied into the volume it stages. Nothing is asked when
// neither is set. Errors: a volume the cloud does not know, NOT_FOUND; a record that names
// another source, or none, INVALID_ARGUMENT; the cloud unreachable, UNAVAILABLE (the other
// cloud errors as in docs/errors.md).
func (n *NodeServer) checkSources(ctx context.Context, id, src, snap string) error {
	if src == "" && snap == "" {
		return nil
	}
	v, err := n.cfg.Cloud.GetVolume(ctx, id)
	if err != nil {
		return cloudStatus(opDefault, err, "volume %s, to check the source its volume_context names", cloud.Quote(id))
	}
	if v.SourceVolumeID != src || v.SourceSnapshotID != snap {
		return status.Errorf(codes.InvalidArgument, "volume_context names source volume %s and snapshot %s, but the cloud created volume %s from volume %s and snapshot %s: the node copies only the source the controller named",
			cloud.Quote(src), cloud.Quote(snap), cloud.Quote(id), cloud.Quote(v.SourceVolumeID), cloud.Quote(v.SourceSnapshotID))
	}
	return nil
}
