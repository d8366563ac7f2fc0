package store

import (
	"errors"
	"fmt"
	"strings"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// DevicePrefix is where an attached volume appears on its instance: DevicePrefix + volume ID.
// The name depends only on the volume, so it is the same for every attach of it.
const DevicePrefix = "/dev/disk/by-id/fakecloud-"

// volumeRec is a stored volume; RequestedSizeBytes keeps the size of the create request so
// that a repeated create after a resize is still recognised as the same request.
type volumeRec struct {
	cloud.Volume
	RequestedSizeBytes int64 `json:"requestedSizeBytes"`
}

func (t *txn) getVolume(id string) (*volumeRec, error) {
	var v volumeRec
	ok, err := getJSON(t.tx.Bucket(bucketVolumes), []byte(id), &v)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, cloud.NewError(cloud.CodeVolumeNotFound, "volume %q not found", id)
	}
	return &v, nil
}

func (t *txn) putVolume(v *volumeRec) error {
	return t.putJSON(bucketVolumes, []byte(v.ID), v)
}

// CreateVolume creates a volume, idempotent on Name: the same name with the same size, zone
// and source returns the existing volume; different parameters are AlreadyExists. Errors:
// InvalidArgument (empty name or zone, size ≤ 0, size below the source snapshot's),
// SnapshotNotFound, VolumeQuotaExceeded, CapacityQuotaExceeded.
func (s *Store) CreateVolume(req cloud.CreateVolumeRequest) (*cloud.Volume, error) {
	var errs []error
	if strings.TrimSpace(req.Name) == "" {
		errs = append(errs, errors.New("name is required"))
	}
	if strings.TrimSpace(req.Zone) == "" {
		errs = append(errs, errors.New("zone is required"))
	}
	if req.SizeBytes <= 0 {
		errs = append(errs, fmt.Errorf("sizeBytes must be > 0, got %d", req.SizeBytes))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "create volume: %v", err)
	}
	var out *cloud.Volume
	err := s.update(func(t *txn) error {
		if id := t.tx.Bucket(bucketVolNames).Get([]byte(req.Name)); id != nil {
			v, err := t.getVolume(string(id))
			if err != nil {
				return err
			}
			if v.RequestedSizeBytes != req.SizeBytes || v.Zone != req.Zone || v.SourceSnapshotID != req.SourceSnapshotID {
				return cloud.NewError(cloud.CodeAlreadyExists, "volume %q exists as %s with sizeBytes %d, zone %q, sourceSnapshotId %q",
					req.Name, v.ID, v.RequestedSizeBytes, v.Zone, v.SourceSnapshotID)
			}
			out = &v.Volume
			return nil
		}
		if req.SourceSnapshotID != "" {
			snap, err := t.getSnapshot(req.SourceSnapshotID)
			if err != nil {
				return err
			}
			if req.SizeBytes < snap.SizeBytes {
				return cloud.NewError(cloud.CodeInvalidArgument, "sizeBytes %d is smaller than snapshot %s (%d bytes)", req.SizeBytes, snap.ID, snap.SizeBytes)
			}
		}
		q, err := t.quotas()
		if err != nil {
			return err
		}
		if q.Volumes.Used >= q.Volumes.Limit {
			return cloud.NewError(cloud.CodeVolumeQuotaExceeded, "volume quota %d reached", q.Volumes.Limit)
		}
		if q.CapacityBytes.Used+req.SizeBytes > q.CapacityBytes.Limit {
			return cloud.NewError(cloud.CodeCapacityQuotaExceeded, "capacity quota %d bytes: %d used, %d requested",
				q.CapacityBytes.Limit, q.CapacityBytes.Used, req.SizeBytes)
		}
		id, err := t.nextID(keyNextVolume, "vol-")
		if err != nil {
			return err
		}
		rev, err := t.bump()
		if err != nil {
			return err
		}
		v := &volumeRec{Volume: cloud.Volume{
			ID: id, Name: req.Name, SizeBytes: req.SizeBytes, Zone: req.Zone,
			SourceSnapshotID: req.SourceSnapshotID, CreatedAt: t.now, Revision: rev,
		}, RequestedSizeBytes: req.SizeBytes}
		if err := t.putVolume(v); err != nil {
			return err
		}
		if err := t.put(bucketVolNames, []byte(req.Name), []byte(id)); err != nil {
			return fmt.Errorf("index volume name: %w", err)
		}
		q.Volumes.Used++
		q.CapacityBytes.Used += req.SizeBytes
		if err := t.putQuotas(q); err != nil {
			return err
		}
		if err := t.event(cloud.Event{Type: "VolumeCreated", VolumeID: id, Detail: fmt.Sprintf("name=%s sizeBytes=%d zone=%s", req.Name, req.SizeBytes, req.Zone)}); err != nil {
			return err
		}
		out = &v.Volume
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("create volume %q: %w", req.Name, err)
	}
	return out, nil
}

// GetVolume returns one volume; VolumeNotFound if absent.
func (s *Store) GetVolume(id string) (*cloud.Volume, error) {
	var out *cloud.Volume
	err := s.view(func(t *txn) error {
		v, err := t.getVolume(id)
		if err != nil {
			return err
		}
		out = &v.Volume
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("get volume %s: %w", id, err)
	}
	return out, nil
}

// ListVolumes returns up to maxResults volumes in creation order after the page token.
// maxResults 0 means DefaultPageSize; sizes above MaxPageSize are capped. A malformed token
// or negative maxResults is InvalidArgument.
func (s *Store) ListVolumes(maxResults int, pageToken string) (*cloud.VolumeList, error) {
	out := &cloud.VolumeList{Volumes: []cloud.Volume{}}
	err := s.view(func(t *txn) error {
		all := func([]byte) (bool, error) { return true, nil }
		return t.page(bucketVolumes, "vol-", maxResults, pageToken, all, func(v []byte) error {
			var rec volumeRec
			if err := jsonUnmarshal(v, &rec); err != nil {
				return err
			}
			out.Volumes = append(out.Volumes, rec.Volume)
			return nil
		}, &out.NextPageToken)
	})
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	return out, nil
}

// DeleteVolume deletes a volume. Errors: VolumeNotFound (already gone: callers that want
// idempotent deletion treat it as done), VolumeInUse while attached.
func (s *Store) DeleteVolume(id string) (uint64, error) {
	var rev uint64
	err := s.update(func(t *txn) error {
		v, err := t.getVolume(id)
		if err != nil {
			return err
		}
		if v.AttachedTo != "" {
			return cloud.NewError(cloud.CodeVolumeInUse, "volume %s is attached to %s", id, v.AttachedTo)
		}
		q, err := t.quotas()
		if err != nil {
			return err
		}
		if rev, err = t.bump(); err != nil {
			return err
		}
		if err := t.delete(bucketVolumes, []byte(id)); err != nil {
			return fmt.Errorf("delete volume: %w", err)
		}
		if err := t.delete(bucketVolNames, []byte(v.Name)); err != nil {
			return fmt.Errorf("delete volume name: %w", err)
		}
		q.Volumes.Used--
		q.CapacityBytes.Used -= v.SizeBytes
		if err := t.putQuotas(q); err != nil {
			return err
		}
		return t.event(cloud.Event{Type: "VolumeDeleted", VolumeID: id, Detail: "name=" + v.Name})
	})
	if err != nil {
		return 0, fmt.Errorf("delete volume %s: %w", id, err)
	}
	return rev, nil
}

// Attach attaches a volume to an instance, checking in one transaction: instance and volume
// exist (InstanceNotFound, VolumeNotFound), the volume is not on another instance (VolumeInUse;
// on the same one the existing attachment is returned and nothing changes), zones agree
// (ZoneMismatch), the instance has a free slot (attached + outOfBandSlots < attachLimit,
// else AttachmentLimitExceeded) and the account quota has room (AttachmentQuotaExceeded).
// With register != nil a missing instance is created from it in the same transaction.
func (s *Store) Attach(volumeID, instanceID string, register *cloud.CreateInstanceRequest) (*cloud.Attachment, error) {
	if volumeID == "" || instanceID == "" {
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "attach: volume ID and instanceId are required")
	}
	var out *cloud.Attachment
	err := s.update(func(t *txn) error {
		var inst *cloud.Instance
		var err error
		if register != nil {
			inst, err = t.ensureInstance(*register)
		} else {
			inst, err = t.getInstance(instanceID)
		}
		if err != nil {
			return err
		}
		v, err := t.getVolume(volumeID)
		if err != nil {
			return err
		}
		if v.AttachedTo == instanceID {
			out = &cloud.Attachment{VolumeID: v.ID, InstanceID: instanceID, Device: v.Device, Revision: v.Revision}
			return nil
		}
		if v.AttachedTo != "" {
			return cloud.NewError(cloud.CodeVolumeInUse, "volume %s is attached to %s", v.ID, v.AttachedTo)
		}
		if v.Zone != inst.Zone {
			return cloud.NewError(cloud.CodeZoneMismatch, "volume %s is in zone %q, instance %s in %q", v.ID, v.Zone, inst.ID, inst.Zone)
		}
		if len(inst.Attachments)+inst.OutOfBandSlots >= inst.AttachLimit {
			return cloud.NewError(cloud.CodeAttachmentLimitExceeded, "instance %s: %d attached + %d out-of-band slots of limit %d",
				inst.ID, len(inst.Attachments), inst.OutOfBandSlots, inst.AttachLimit)
		}
		q, err := t.quotas()
		if err != nil {
			return err
		}
		if q.Attachments.Used >= q.Attachments.Limit {
			return cloud.NewError(cloud.CodeAttachmentQuotaExceeded, "attachment quota %d reached", q.Attachments.Limit)
		}
		rev, err := t.bump()
		if err != nil {
			return err
		}
		v.AttachedTo = inst.ID
		v.Device = DevicePrefix + v.ID
		v.Revision = rev
		if err := t.putVolume(v); err != nil {
			return err
		}
		inst.Attachments = insertSorted(inst.Attachments, v.ID)
		inst.Revision = rev
		if err := t.putInstance(inst); err != nil {
			return err
		}
		q.Attachments.Used++
		if err := t.putQuotas(q); err != nil {
			return err
		}
		attached, limit := len(inst.Attachments), inst.AttachLimit-inst.OutOfBandSlots
		if err := t.event(cloud.Event{Type: "VolumeAttached", VolumeID: v.ID, InstanceID: inst.ID, Attached: &attached, Limit: &limit, Detail: v.Device}); err != nil {
			return err
		}
		out = &cloud.Attachment{VolumeID: v.ID, InstanceID: inst.ID, Device: v.Device, Revision: rev}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("attach %s to %s: %w", volumeID, instanceID, err)
	}
	return out, nil
}

// Detach detaches a volume from an instance. It is idempotent: a volume not attached to that
// instance (or a missing instance) is success with no change. A missing volume is
// VolumeNotFound. The returned revision is the new one, or the current one when nothing
// changed.
func (s *Store) Detach(volumeID, instanceID string) (uint64, error) {
	if volumeID == "" || instanceID == "" {
		return 0, cloud.NewError(cloud.CodeInvalidArgument, "detach: volume ID and instanceId are required")
	}
	var rev uint64
	err := s.update(func(t *txn) error {
		rev = t.rev
		v, err := t.getVolume(volumeID)
		if err != nil {
			return err
		}
		if v.AttachedTo != instanceID {
			return nil
		}
		inst, err := t.getInstance(instanceID)
		if err != nil {
			return err
		}
		q, err := t.quotas()
		if err != nil {
			return err
		}
		if rev, err = t.bump(); err != nil {
			return err
		}
		v.AttachedTo, v.Device, v.Revision = "", "", rev
		if err := t.putVolume(v); err != nil {
			return err
		}
		inst.Attachments = removeSorted(inst.Attachments, v.ID)
		inst.Revision = rev
		if err := t.putInstance(inst); err != nil {
			return err
		}
		q.Attachments.Used--
		if err := t.putQuotas(q); err != nil {
			return err
		}
		attached, limit := len(inst.Attachments), inst.AttachLimit-inst.OutOfBandSlots
		return t.event(cloud.Event{Type: "VolumeDetached", VolumeID: v.ID, InstanceID: inst.ID, Attached: &attached, Limit: &limit})
	})
	if err != nil {
		return 0, fmt.Errorf("detach %s from %s: %w", volumeID, instanceID, err)
	}
	return rev, nil
}

// Resize grows a volume to sizeBytes. The same size is success with no change; a smaller
// size or sizeBytes ≤ 0 is InvalidArgument; growth past the bytes quota is
// CapacityQuotaExceeded; a missing volume is VolumeNotFound.
func (s *Store) Resize(volumeID string, sizeBytes int64) (*cloud.Volume, error) {
	if sizeBytes <= 0 {
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "resize %s: sizeBytes must be > 0, got %d", volumeID, sizeBytes)
	}
	var out *cloud.Volume
	err := s.update(func(t *txn) error {
		v, err := t.getVolume(volumeID)
		if err != nil {
			return err
		}
		switch {
		case sizeBytes == v.SizeBytes:
			out = &v.Volume
			return nil
		case sizeBytes < v.SizeBytes:
			return cloud.NewError(cloud.CodeInvalidArgument, "volume %s is %d bytes; volumes only grow, %d asked", v.ID, v.SizeBytes, sizeBytes)
		}
		q, err := t.quotas()
		if err != nil {
			return err
		}
		grow := sizeBytes - v.SizeBytes
		if q.CapacityBytes.Used+grow > q.CapacityBytes.Limit {
			return cloud.NewError(cloud.CodeCapacityQuotaExceeded, "capacity quota %d bytes: %d used, %d more requested", q.CapacityBytes.Limit, q.CapacityBytes.Used, grow)
		}
		rev, err := t.bump()
		if err != nil {
			return err
		}
		old := v.SizeBytes
		v.SizeBytes, v.Revision = sizeBytes, rev
		if err := t.putVolume(v); err != nil {
			return err
		}
		q.CapacityBytes.Used += grow
		if err := t.putQuotas(q); err != nil {
			return err
		}
		if err := t.event(cloud.Event{Type: "VolumeResized", VolumeID: v.ID, Detail: fmt.Sprintf("sizeBytes %d -> %d", old, sizeBytes)}); err != nil {
			return err
		}
		out = &v.Volume
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("resize %s: %w", volumeID, err)
	}
	return out, nil
}
