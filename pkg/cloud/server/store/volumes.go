package store

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// DevicePrefix is where an attached volume appears on its instance: DevicePrefix + volume ID.
// The name depends only on the volume, so it is the same for every attach of it.
const DevicePrefix = "/dev/disk/by-id/fakecloud-"

// volumeRec is the stored JSON record of a volume: what only a create or a resize changes.
// RequestedSizeBytes keeps the size of the create request so that a repeated create after a
// resize is still recognised as the same request. The volume's revision and attachment, which
// every attach and detach changes, are a volumeState of their own (see Format).
type volumeRec struct {
	ID                 string    `json:"id"`
	Name               string    `json:"name"`
	SizeBytes          int64     `json:"sizeBytes"`
	Zone               string    `json:"zone"`
	SourceSnapshotID   string    `json:"sourceSnapshotId,omitempty"`
	SourceVolumeID     string    `json:"sourceVolumeId,omitempty"`
	Type               string    `json:"type,omitempty"`
	IOPS               int       `json:"iops,omitempty"`
	CreatedAt          time.Time `json:"createdAt"`
	RequestedSizeBytes int64     `json:"requestedSizeBytes"`
}

// volView is a volume as a mutation sees it: its record and its state.
type volView struct {
	rec   volumeRec
	state volumeState
	phase phase
}

// volume is vv in the API's shape.
func (vv *volView) volume() *cloud.Volume {
	v := &cloud.Volume{
		ID: vv.rec.ID, Name: vv.rec.Name, SizeBytes: vv.rec.SizeBytes, Zone: vv.rec.Zone, SourceSnapshotID: vv.rec.SourceSnapshotID,
		SourceVolumeID: vv.rec.SourceVolumeID, Type: vv.rec.Type, IOPS: vv.rec.IOPS, AttachedTo: vv.state.attachedTo, CreatedAt: vv.rec.CreatedAt, Revision: vv.state.revision,
	}
	if v.AttachedTo != "" {
		v.Device = DevicePrefix + v.ID
	}
	vv.phase.apply(v)
	if v.StateSince == nil && v.State == cloud.StateDetached {
		// Never attached since this store kept phases: detached since it was created.
		v.StateSince = &v.CreatedAt
	}
	return v
}

// zoneKnown reports whether zone is one of Options.Zones or the zone of an instance. Zones
// only come into being with the instances in them, so a typo ("zone-q") cannot create a volume
// that no instance could ever attach.
func (t *txn) zoneKnown(zone string) (bool, error) {
	if slices.Contains(t.s.zones, zone) {
		return true, nil
	}
	c := t.tx.Bucket(bucketInstances).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		var rec struct {
			Zone string `json:"zone"`
		}
		if err := jsonUnmarshal(v, &rec); err != nil {
			return false, fmt.Errorf("instance %s: %w", k, err)
		}
		if rec.Zone == zone {
			return true, nil
		}
	}
	return false, nil
}

func (t *txn) getVolume(id string) (*volView, error) {
	data := t.tx.Bucket(bucketVolumes).Get([]byte(id))
	if data == nil {
		return nil, cloud.NewError(cloud.CodeVolumeNotFound, "volume %s not found", cloud.Quote(id))
	}
	return t.decodeVolume(data)
}

// decodeVolume decodes a stored volume record and reads its state.
func (t *txn) decodeVolume(data []byte) (*volView, error) {
	vv := &volView{}
	rec, ok := t.s.recs.volumes.get(data)
	if !ok {
		if err := jsonUnmarshal(data, &rec); err != nil {
			return nil, err
		}
		t.s.recs.volumes.put(data, rec)
	}
	vv.rec = rec
	var err error
	if vv.state, err = decodeVolumeState(t.tx.Bucket(bucketVolStates).Get([]byte(vv.rec.ID))); err != nil {
		return nil, fmt.Errorf("volume %s: %w", vv.rec.ID, err)
	}
	if vv.phase, err = t.getPhase(vv.rec.ID, vv.state); err != nil {
		return nil, err
	}
	return vv, nil
}

// putVolume writes a volume's record and its state.
func (t *txn) putVolume(rec *volumeRec, st volumeState) error {
	if err := t.putJSON(bucketVolumes, []byte(rec.ID), rec); err != nil {
		return err
	}
	return t.putVolumeState(rec.ID, st)
}

// CreateVolume creates a volume, idempotent on Name: the same name with the same size, zone
// and source returns the existing volume; different parameters are AlreadyExists. Errors:
// InvalidArgument (a name that is empty, over MaxNameBytes or holds a control character CSI
// bans; an empty zone or one no instance is in and Options.Zones does not name; size ≤ 0;
// size below the source snapshot's), SnapshotNotFound, VolumeQuotaExceeded,
// CapacityQuotaExceeded.
func (s *Store) CreateVolume(req cloud.CreateVolumeRequest) (*cloud.Volume, error) {
	if err := checkCreateVolume(req); err != nil {
		return nil, err
	}
	var out *cloud.Volume
	err := s.update(func(t *txn) error {
		var err error
		out, err = t.volumeFor(req)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create volume %q: %w", req.Name, err)
	}
	return out, nil
}

// checkCreateVolume checks what req says by itself, every problem at once: InvalidArgument
// for a bad name (checkName), an empty zone, sizeBytes ≤ 0, or both sources.
func checkCreateVolume(req cloud.CreateVolumeRequest) error {
	var errs []error
	if err := checkName("name", req.Name); err != nil {
		errs = append(errs, err)
	}
	if strings.TrimSpace(req.Zone) == "" {
		errs = append(errs, errors.New("zone is required"))
	}
	if req.SizeBytes <= 0 {
		errs = append(errs, fmt.Errorf("sizeBytes must be > 0, got %d", req.SizeBytes))
	}
	if req.SourceSnapshotID != "" && req.SourceVolumeID != "" {
		errs = append(errs, errors.New("sourceSnapshotId and sourceVolumeId are exclusive"))
	}
	if err := errors.Join(errs...); err != nil {
		return cloud.NewError(cloud.CodeInvalidArgument, "create volume: %v", err)
	}
	return nil
}

// volumeFor is CreateVolume's mutation: the volume of the same name when there is one
// (sameVolume), else, once the zone, the source (checkVolumeSource) and the quotas
// (checkVolumeQuotas) allow it, a new volume with its name index entry, its share of the
// quotas and a VolumeCreated event.
func (t *txn) volumeFor(req cloud.CreateVolumeRequest) (*cloud.Volume, error) {
	if id := t.tx.Bucket(bucketVolNames).Get([]byte(req.Name)); id != nil {
		return t.sameVolume(string(id), req)
	}
	if err := t.checkVolumeSource(req); err != nil {
		return nil, err
	}
	q, err := t.quotas()
	if err != nil {
		return nil, err
	}
	if err := checkVolumeQuotas(q, req.SizeBytes); err != nil {
		return nil, err
	}
	id, err := t.nextID(keyNextVolume, "vol-")
	if err != nil {
		return nil, err
	}
	rev, err := t.bump()
	if err != nil {
		return nil, err
	}
	v := &volView{
		rec: volumeRec{ID: id, Name: req.Name, SizeBytes: req.SizeBytes, Zone: req.Zone, SourceSnapshotID: req.SourceSnapshotID,
			SourceVolumeID: req.SourceVolumeID, CreatedAt: t.now, RequestedSizeBytes: req.SizeBytes},
		state: volumeState{revision: rev},
		// No phase is stored for a volume never attached (getPhase derives detached);
		// the answer says so as a GetVolume would.
		phase: phase{State: cloud.StateDetached},
	}
	if err := t.putVolume(&v.rec, v.state); err != nil {
		return nil, err
	}
	if err := t.put(bucketVolNames, []byte(req.Name), []byte(id)); err != nil {
		return nil, fmt.Errorf("index volume name: %w", err)
	}
	q.Volumes.Used++
	q.CapacityBytes.Used += req.SizeBytes
	if err := t.putQuotas(q); err != nil {
		return nil, err
	}
	if err := t.event(cloud.Event{Type: "VolumeCreated", VolumeID: id, Detail: fmt.Sprintf("name=%s sizeBytes=%d zone=%s", req.Name, req.SizeBytes, req.Zone)}); err != nil {
		return nil, err
	}
	return v.volume(), nil
}

// sameVolume answers a create whose name volume id already has: that volume when the request
// asks what it was created with (size, zone, sources), else AlreadyExists.
func (t *txn) sameVolume(id string, req cloud.CreateVolumeRequest) (*cloud.Volume, error) {
	v, err := t.getVolume(id)
	if err != nil {
		return nil, err
	}
	if v.rec.RequestedSizeBytes != req.SizeBytes || v.rec.Zone != req.Zone || v.rec.SourceSnapshotID != req.SourceSnapshotID ||
		v.rec.SourceVolumeID != req.SourceVolumeID {
		return nil, cloud.NewError(cloud.CodeAlreadyExists, "volume %s exists as %s with sizeBytes %d, zone %s, sourceSnapshotId %s, sourceVolumeId %s",
			cloud.Quote(req.Name), cloud.Quote(v.rec.ID), v.rec.RequestedSizeBytes, cloud.Quote(v.rec.Zone), cloud.Quote(v.rec.SourceSnapshotID), cloud.Quote(v.rec.SourceVolumeID))
	}
	return v.volume(), nil
}

// checkVolumeSource checks where a new volume comes from: its zone is known (zoneKnown, else
// InvalidArgument), its source snapshot exists (SnapshotNotFound) and is no larger than it
// (InvalidArgument), its source volume passes checkCloneSource.
func (t *txn) checkVolumeSource(req cloud.CreateVolumeRequest) error {
	// After the name lookup: a retried create of an existing volume must find it even if
	// its zone is no longer known (a restart with another default zone).
	known, err := t.zoneKnown(req.Zone)
	if err != nil {
		return err
	}
	if !known {
		return cloud.NewError(cloud.CodeInvalidArgument, "create volume: unknown zone %s: no instance is in it (zones come with their instances, see POST /v1/instances)", cloud.Quote(req.Zone))
	}
	if req.SourceSnapshotID != "" {
		snap, err := t.getSnapshot(req.SourceSnapshotID)
		if err != nil {
			return err
		}
		if req.SizeBytes < snap.SizeBytes {
			return cloud.NewError(cloud.CodeInvalidArgument, "sizeBytes %d is smaller than snapshot %s (%d bytes)", req.SizeBytes, cloud.Quote(snap.ID), snap.SizeBytes)
		}
	}
	if req.SourceVolumeID != "" {
		return t.checkCloneSource(req)
	}
	return nil
}

// checkCloneSource checks a clone's source volume: it exists (VolumeNotFound), is in the
// clone's zone and is no larger than the clone (InvalidArgument). The cloud copies no data:
// the driver's node side copies the source's backing data when it first stages the clone.
func (t *txn) checkCloneSource(req cloud.CreateVolumeRequest) error {
	src, err := t.getVolume(req.SourceVolumeID)
	if err != nil {
		return err
	}
	if src.rec.Zone != req.Zone {
		return cloud.NewError(cloud.CodeInvalidArgument, "clone of %s must be in its zone %s, not %s", src.rec.ID, cloud.Quote(src.rec.Zone), cloud.Quote(req.Zone))
	}
	if req.SizeBytes < src.rec.SizeBytes {
		return cloud.NewError(cloud.CodeInvalidArgument, "sizeBytes %d is smaller than source volume %s (%d bytes)", req.SizeBytes, cloud.Quote(src.rec.ID), src.rec.SizeBytes)
	}
	return nil
}

// checkVolumeQuotas checks that q has room for one more volume of sizeBytes bytes:
// VolumeQuotaExceeded, CapacityQuotaExceeded.
func checkVolumeQuotas(q *cloud.Quotas, sizeBytes int64) error {
	if q.Volumes.Used >= q.Volumes.Limit {
		return cloud.NewError(cloud.CodeVolumeQuotaExceeded, "volume quota %d reached", q.Volumes.Limit)
	}
	// Limit - Used cannot overflow (both ≥ 0); Used + size can, and a wrapped sum would
	// pass the check and turn Used negative.
	if sizeBytes > q.CapacityBytes.Limit-q.CapacityBytes.Used {
		return cloud.NewError(cloud.CodeCapacityQuotaExceeded, "capacity quota %d bytes: %d used, %d requested",
			q.CapacityBytes.Limit, q.CapacityBytes.Used, sizeBytes)
	}
	return nil
}

// GetVolume returns one volume; VolumeNotFound if absent.
func (s *Store) GetVolume(id string) (*cloud.Volume, error) {
	var out *cloud.Volume
	err := s.view(func(t *txn) error {
		v, err := t.getVolume(id)
		if err != nil {
			return err
		}
		out = v.volume()
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
		return t.page(bucketVolumes, idKeys("vol-"), pageRequest{maxResults: maxResults, token: pageToken}, all, func(v []byte) error {
			vv, err := t.decodeVolume(v)
			if err != nil {
				return err
			}
			out.Volumes = append(out.Volumes, *vv.volume())
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
		if v.state.attachedTo != "" {
			return cloud.NewError(cloud.CodeVolumeInUse, "volume %s is %s %s", cloud.Quote(id), boundPhrase(v.phase.State), cloud.Quote(v.state.attachedTo))
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
		if err := t.delete(bucketVolStates, []byte(id)); err != nil {
			return fmt.Errorf("delete volume state: %w", err)
		}
		if err := t.delete(bucketVolNames, []byte(v.rec.Name)); err != nil {
			return fmt.Errorf("delete volume name: %w", err)
		}
		if err := t.delete(bucketPhases, []byte(id)); err != nil {
			return fmt.Errorf("delete volume phase: %w", err)
		}
		q.Volumes.Used--
		q.CapacityBytes.Used -= v.rec.SizeBytes
		if err := t.putQuotas(q); err != nil {
			return err
		}
		return t.event(cloud.Event{Type: "VolumeDeleted", VolumeID: id, Detail: "name=" + v.rec.Name})
	})
	if err != nil {
		return 0, fmt.Errorf("delete volume %s: %w", id, err)
	}
	return rev, nil
}

// Resize grows a volume to sizeBytes. The same size is success with no change; a smaller
// size or sizeBytes ≤ 0 is InvalidArgument; growth past the bytes quota is
// CapacityQuotaExceeded; a missing volume is VolumeNotFound.
func (s *Store) Resize(volumeID string, sizeBytes int64) (*cloud.Volume, error) {
	if sizeBytes <= 0 {
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "resize %s: sizeBytes must be > 0, got %d", cloud.Quote(volumeID), sizeBytes)
	}
	var out *cloud.Volume
	err := s.update(func(t *txn) error {
		v, err := t.getVolume(volumeID)
		if err != nil {
			return err
		}
		switch {
		case sizeBytes == v.rec.SizeBytes:
			out = v.volume()
			return nil
		case sizeBytes < v.rec.SizeBytes:
			return cloud.NewError(cloud.CodeInvalidArgument, "volume %s is %d bytes; volumes only grow, %d asked", cloud.Quote(v.rec.ID), v.rec.SizeBytes, sizeBytes)
		}
		q, err := t.quotas()
		if err != nil {
			return err
		}
		grow := sizeBytes - v.rec.SizeBytes
		if grow > q.CapacityBytes.Limit-q.CapacityBytes.Used { // see checkVolumeQuotas: no overflow
			return cloud.NewError(cloud.CodeCapacityQuotaExceeded, "capacity quota %d bytes: %d used, %d more requested", q.CapacityBytes.Limit, q.CapacityBytes.Used, grow)
		}
		rev, err := t.bump()
		if err != nil {
			return err
		}
		old := v.rec.SizeBytes
		v.rec.SizeBytes, v.state.revision = sizeBytes, rev
		if err := t.putVolume(&v.rec, v.state); err != nil {
			return err
		}
		q.CapacityBytes.Used += grow
		if err := t.putQuotas(q); err != nil {
			return err
		}
		if err := t.event(cloud.Event{Type: "VolumeResized", VolumeID: v.rec.ID, Detail: fmt.Sprintf("sizeBytes %d -> %d", old, sizeBytes)}); err != nil {
			return err
		}
		out = v.volume()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("resize %s: %w", volumeID, err)
	}
	return out, nil
}

// ModifyVolume sets a volume's mutable parameters (cloud.ModifyVolumeRequest): the fields
// given replace the volume's, and the result must pass cloud.CheckVolumeParameters
// (InvalidArgument, nothing changed). What the volume already has is a success without a
// revision or an event; a change is a VolumeModified event. VolumeNotFound if absent. The
// type never changes the slots a volume takes (one), so attachments are not looked at.
func (s *Store) ModifyVolume(volumeID string, req cloud.ModifyVolumeRequest) (*cloud.Volume, error) {
	var out *cloud.Volume
	err := s.update(func(t *txn) error {
		v, err := t.getVolume(volumeID)
		if err != nil {
			return err
		}
		typ, iops, changed, err := req.Apply(v.rec.Type, v.rec.IOPS)
		if err != nil {
			return cloud.NewError(cloud.CodeInvalidArgument, "%v", err)
		}
		if !changed {
			out = v.volume()
			return nil
		}
		rev, err := t.bump()
		if err != nil {
			return err
		}
		old := fmt.Sprintf("type=%s iops=%d", cmp.Or(v.rec.Type, cloud.VolumeTypeStandard), v.rec.IOPS)
		v.rec.Type, v.rec.IOPS, v.state.revision = typ, iops, rev
		if err := t.putVolume(&v.rec, v.state); err != nil {
			return err
		}
		if err := t.event(cloud.Event{Type: "VolumeModified", VolumeID: v.rec.ID, Detail: fmt.Sprintf("%s -> type=%s iops=%d", old, typ, iops)}); err != nil {
			return err
		}
		out = v.volume()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("modify %s: %w", volumeID, err)
	}
	return out, nil
}
