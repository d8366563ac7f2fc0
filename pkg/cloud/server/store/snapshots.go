package store

import (
	"errors"
	"fmt"
	"strings"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

func (t *txn) getSnapshot(id string) (*cloud.Snapshot, error) {
	var sn cloud.Snapshot
	ok, err := getJSON(t.tx.Bucket(bucketSnapshots), []byte(id), &sn)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, cloud.NewError(cloud.CodeSnapshotNotFound, "snapshot %s not found", cloud.Quote(id))
	}
	return &sn, nil
}

// CreateSnapshot snapshots a volume, idempotent on Name: the same name and source return the
// existing snapshot, another source is AlreadyExists. Snapshots are ready at once. Errors:
// InvalidArgument (no source; a name that is empty, over MaxNameBytes or holds a control
// character CSI bans), VolumeNotFound.
func (s *Store) CreateSnapshot(req cloud.CreateSnapshotRequest) (*cloud.Snapshot, error) {
	var errs []error
	if err := checkName("name", req.Name); err != nil {
		errs = append(errs, err)
	}
	if strings.TrimSpace(req.SourceVolumeID) == "" {
		errs = append(errs, errors.New("sourceVolumeId is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "create snapshot: %v", err)
	}
	var out *cloud.Snapshot
	err := s.update(func(t *txn) error {
		if id := t.tx.Bucket(bucketSnapNames).Get([]byte(req.Name)); id != nil {
			sn, err := t.getSnapshot(string(id))
			if err != nil {
				return err
			}
			if sn.SourceVolumeID != req.SourceVolumeID {
				return cloud.NewError(cloud.CodeAlreadyExists, "snapshot %s exists as %s of volume %s", cloud.Quote(req.Name), cloud.Quote(sn.ID), cloud.Quote(sn.SourceVolumeID))
			}
			out = sn
			return nil
		}
		v, err := t.getVolume(req.SourceVolumeID)
		if err != nil {
			return err
		}
		id, err := t.nextID(keyNextSnapshot, "snap-")
		if err != nil {
			return err
		}
		rev, err := t.bump()
		if err != nil {
			return err
		}
		sn := &cloud.Snapshot{ID: id, Name: req.Name, SourceVolumeID: v.rec.ID, SizeBytes: v.rec.SizeBytes, ReadyToUse: true, CreatedAt: t.now, Revision: rev}
		if err := t.putJSON(bucketSnapshots, []byte(id), sn); err != nil {
			return err
		}
		if err := t.put(bucketSnapNames, []byte(req.Name), []byte(id)); err != nil {
			return fmt.Errorf("index snapshot name: %w", err)
		}
		if err := t.event(cloud.Event{Type: "SnapshotCreated", VolumeID: v.rec.ID, Detail: fmt.Sprintf("snapshot=%s name=%s", id, req.Name)}); err != nil {
			return err
		}
		out = sn
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("create snapshot %q: %w", req.Name, err)
	}
	return out, nil
}

// GetSnapshot returns one snapshot; SnapshotNotFound if absent.
func (s *Store) GetSnapshot(id string) (*cloud.Snapshot, error) {
	var out *cloud.Snapshot
	err := s.view(func(t *txn) error {
		var err error
		out, err = t.getSnapshot(id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get snapshot %s: %w", id, err)
	}
	return out, nil
}

// ListSnapshots pages snapshots in creation order, filtered by ID and source volume (a filter
// that matches nothing is an empty list, not an error). Paging as in ListVolumes.
func (s *Store) ListSnapshots(o cloud.ListSnapshotsOptions) (*cloud.SnapshotList, error) {
	out := &cloud.SnapshotList{Snapshots: []cloud.Snapshot{}}
	err := s.view(func(t *txn) error {
		match := func(v []byte) (bool, error) {
			var sn cloud.Snapshot
			if err := jsonUnmarshal(v, &sn); err != nil {
				return false, err
			}
			return (o.SnapshotID == "" || sn.ID == o.SnapshotID) && (o.SourceVolumeID == "" || sn.SourceVolumeID == o.SourceVolumeID), nil
		}
		return t.page(bucketSnapshots, idKeys("snap-"), pageRequest{maxResults: o.MaxResults, token: o.PageToken}, match, func(v []byte) error {
			var sn cloud.Snapshot
			if err := jsonUnmarshal(v, &sn); err != nil {
				return err
			}
			out.Snapshots = append(out.Snapshots, sn)
			return nil
		}, &out.NextPageToken)
	})
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	return out, nil
}

// DeleteSnapshot deletes a snapshot; SnapshotNotFound when it is already gone (callers that
// want idempotent deletion treat that as done), SnapshotInGroup for a group's member (it goes
// with its group: DeleteGroupSnapshot). Volumes made from it are not affected.
func (s *Store) DeleteSnapshot(id string) (uint64, error) {
	var rev uint64
	err := s.update(func(t *txn) error {
		sn, err := t.getSnapshot(id)
		if err != nil {
			return err
		}
		if sn.GroupSnapshotID != "" {
			return cloud.NewError(cloud.CodeSnapshotInGroup, "snapshot %s is a member of group snapshot %s: delete the group", cloud.Quote(id), cloud.Quote(sn.GroupSnapshotID))
		}
		if rev, err = t.bump(); err != nil {
			return err
		}
		if err := t.delete(bucketSnapshots, []byte(id)); err != nil {
			return fmt.Errorf("delete snapshot: %w", err)
		}
		if err := t.delete(bucketSnapNames, []byte(sn.Name)); err != nil {
			return fmt.Errorf("delete snapshot name: %w", err)
		}
		return t.event(cloud.Event{Type: "SnapshotDeleted", VolumeID: sn.SourceVolumeID, Detail: "snapshot=" + id})
	})
	if err != nil {
		return 0, fmt.Errorf("delete snapshot %s: %w", id, err)
	}
	return rev, nil
}
