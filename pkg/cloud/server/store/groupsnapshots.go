package store

import (
	"fmt"
	"slices"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// groupRec is the stored record of a group snapshot; its members are snapshot records of
// their own (bucketSnapshots), found by SnapshotIDs.
type groupRec struct {
	ID              string    `json:"id"`
	Name            string    `json:"name"`
	SourceVolumeIDs []string  `json:"sourceVolumeIds"`
	SnapshotIDs     []string  `json:"snapshotIds"`
	CreatedAt       time.Time `json:"createdAt"`
	Revision        uint64    `json:"revision"`
}

// groupSnapshot reads a group and its members in the API's shape; GroupSnapshotNotFound if
// the group is absent.
func (t *txn) groupSnapshot(id string) (*cloud.GroupSnapshot, error) {
	var rec groupRec
	ok, err := getJSON(t.tx.Bucket(bucketGroups), []byte(id), &rec)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, cloud.NewError(cloud.CodeGroupSnapshotNotFound, "group snapshot %s not found", cloud.Quote(id))
	}
	g := &cloud.GroupSnapshot{ID: rec.ID, Name: rec.Name, SourceVolumeIDs: rec.SourceVolumeIDs, Snapshots: []cloud.Snapshot{},
		ReadyToUse: true, CreatedAt: rec.CreatedAt, Revision: rec.Revision}
	for _, snapID := range rec.SnapshotIDs {
		sn, err := t.getSnapshot(snapID)
		if err != nil {
			// A member goes only with its group (DeleteSnapshot refuses it), so this is
			// a damaged store, not a caller's mistake.
			return nil, cloud.NewError(cloud.CodeInternalError, "group snapshot %s: member %s: %v", cloud.Quote(id), cloud.Quote(snapID), err)
		}
		g.Snapshots = append(g.Snapshots, *sn)
		g.ReadyToUse = g.ReadyToUse && sn.ReadyToUse
	}
	return g, nil
}

// CreateGroupSnapshot snapshots several volumes at one point in time, idempotent on Name: the
// same name and the same set of volumes (in any order) return the existing group, another
// set is AlreadyExists. Every member and the group are written in one transaction, with one
// revision and one creation time, so no write to the store lies between two members (the
// write-order consistency CSI asks of a group); either all are cut or none is. Members are
// ready at once and are not in the snapshot name index (their Name is "<group
// name>/<volume ID>", for reading only). The volumes must all be in one zone (a group is one
// storage system's consistency point); otherwise ZoneMismatch. Errors: InvalidArgument (see
// CreateGroupSnapshotRequest.Check), AlreadyExists, VolumeNotFound (the first missing volume), ZoneMismatch.
func (s *Store) CreateGroupSnapshot(req cloud.CreateGroupSnapshotRequest) (*cloud.GroupSnapshot, error) {
	ids, err := req.Check()
	if err != nil {
		return nil, err
	}
	var out *cloud.GroupSnapshot
	err = s.update(func(t *txn) error {
		out = nil // the batch may run this more than once
		if id := t.tx.Bucket(bucketGroupNames).Get([]byte(req.Name)); id != nil {
			g, err := t.groupSnapshot(string(id))
			if err != nil {
				return err
			}
			if !slices.Equal(g.SourceVolumeIDs, ids) {
				return cloud.NewError(cloud.CodeAlreadyExists, "group snapshot %s exists as %s of %d other volumes", cloud.Quote(req.Name), cloud.Quote(g.ID), len(g.SourceVolumeIDs))
			}
			out = g
			return nil
		}
		// Every check before the first write: a refused request changes nothing.
		vols := make([]*volView, 0, len(ids))
		for _, id := range ids {
			v, err := t.getVolume(id)
			if err != nil {
				return err
			}
			if len(vols) > 0 && v.rec.Zone != vols[0].rec.Zone {
				return cloud.NewError(cloud.CodeZoneMismatch, "group snapshot %s: volume %s is in zone %s, volume %s in zone %s; a group is taken in one zone",
					cloud.Quote(req.Name), cloud.Quote(vols[0].rec.ID), cloud.Quote(vols[0].rec.Zone), cloud.Quote(v.rec.ID), cloud.Quote(v.rec.Zone))
			}
			vols = append(vols, v)
		}
		groupID, err := t.nextID(keyNextGroup, "gsnap-")
		if err != nil {
			return err
		}
		rev, err := t.bump()
		if err != nil {
			return err
		}
		rec := groupRec{ID: groupID, Name: req.Name, SourceVolumeIDs: ids, CreatedAt: t.now, Revision: rev}
		for _, v := range vols {
			snapID, err := t.nextID(keyNextSnapshot, "snap-")
			if err != nil {
				return err
			}
			sn := &cloud.Snapshot{ID: snapID, Name: req.Name + "/" + v.rec.ID, SourceVolumeID: v.rec.ID, SizeBytes: v.rec.SizeBytes,
				ReadyToUse: true, CreatedAt: t.now, Revision: rev, GroupSnapshotID: groupID}
			if err := t.putJSON(bucketSnapshots, []byte(snapID), sn); err != nil {
				return err
			}
			rec.SnapshotIDs = append(rec.SnapshotIDs, snapID)
		}
		if err := t.putJSON(bucketGroups, []byte(groupID), rec); err != nil {
			return err
		}
		if err := t.put(bucketGroupNames, []byte(req.Name), []byte(groupID)); err != nil {
			return fmt.Errorf("index group snapshot name: %w", err)
		}
		// One event for the group: its member count is bounded, its member IDs would not
		// fit an event's detail.
		if err := t.event(cloud.Event{Type: "GroupSnapshotCreated", VolumeID: ids[0],
			Detail: fmt.Sprintf("groupSnapshot=%s name=%s volumes=%d", groupID, req.Name, len(ids))}); err != nil {
			return err
		}
		out, err = t.groupSnapshot(groupID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create group snapshot %q: %w", req.Name, err)
	}
	return out, nil
}

// GetGroupSnapshot returns a group snapshot with its members; GroupSnapshotNotFound if absent.
func (s *Store) GetGroupSnapshot(id string) (*cloud.GroupSnapshot, error) {
	var out *cloud.GroupSnapshot
	err := s.view(func(t *txn) error {
		var err error
		out, err = t.groupSnapshot(id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get group snapshot %s: %w", id, err)
	}
	return out, nil
}

// DeleteGroupSnapshot deletes a group snapshot and every member in one transaction;
// GroupSnapshotNotFound when it is already gone (callers that want idempotent deletion treat
// that as done). Volumes made from a member are not affected.
func (s *Store) DeleteGroupSnapshot(id string) (uint64, error) {
	var rev uint64
	err := s.update(func(t *txn) error {
		g, err := t.groupSnapshot(id)
		if err != nil {
			return err
		}
		if rev, err = t.bump(); err != nil {
			return err
		}
		for _, snapID := range g.SnapshotIDs() {
			if err := t.delete(bucketSnapshots, []byte(snapID)); err != nil {
				return fmt.Errorf("delete member snapshot %s: %w", snapID, err)
			}
		}
		if err := t.delete(bucketGroups, []byte(id)); err != nil {
			return fmt.Errorf("delete group snapshot: %w", err)
		}
		if err := t.delete(bucketGroupNames, []byte(g.Name)); err != nil {
			return fmt.Errorf("delete group snapshot name: %w", err)
		}
		return t.event(cloud.Event{Type: "GroupSnapshotDeleted", VolumeID: g.SourceVolumeIDs[0],
			Detail: fmt.Sprintf("groupSnapshot=%s volumes=%d", id, len(g.SourceVolumeIDs))})
	})
	if err != nil {
		return 0, fmt.Errorf("delete group snapshot %s: %w", id, err)
	}
	return rev, nil
}
