package store

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// Format is the on-disk layout this package writes, stored in meta under "format".
//
// Format 1 (no "format" key) kept everything a volume or an instance is in one JSON record,
// and the quotas in one JSON record, so every attach and detach re-encoded the volume, the
// instance with its whole attachment list, and the quotas. Format 2 keeps those JSON records
// for what only a create, patch or resize changes, and moves what every attach and detach
// changes into narrow fixed-width records:
//
//   - volumeStates: volume ID → volumeState (revision, attached instance);
//   - instanceStates: instance ID → instanceState (revision, attachment count);
//   - attachments: one nested bucket per instance, its attached volume IDs as keys, so the
//     instance's sorted attachment list is a cursor walk;
//   - meta "quotas": the quota limits, uses and revision as fixed-width integers.
//
// Format 3 adds what asynchronous attach and detach need (docs/attach.md), in buckets of
// their own so that no record of format 2 changes:
//
//   - volumePhases: volume ID → phase, the volume's attach state, since when, and the
//     transition under way (when it is due, how it ends, the fault rule holding it);
//   - pendingTransitions: the IDs of the volumes attaching or detaching, which the
//     transition worker walks.
//
// A volume without a phase is attached when its volumeState names an instance and detached
// otherwise, which is what every format 2 volume is.
//
// Format 4 adds group snapshots (CSI's VolumeGroupSnapshot), again in buckets of their own:
//
//   - groupSnapshots: group snapshot ID → its JSON record (name, sorted source volumes,
//     member snapshot IDs);
//   - groupSnapshotNames: name → group snapshot ID, the idempotency index;
//
// and a snapshot record may carry groupSnapshotId. A format 3 fakecloud would let a member be
// deleted on its own and leave its group naming a snapshot that is gone, hence the new number.
//
// Open migrates a format 1 store to Format in one transaction (a crash midway leaves format
// 1 intact), stamps a format 2 or 3 store as Format (the buckets it lacks are created empty),
// and refuses a store of a later format than it knows.
const Format = 4

var (
	keyFormat = []byte("format")

	bucketVolStates  = []byte("volumeStates")
	bucketInstStates = []byte("instanceStates")
	bucketAttach     = []byte("attachments")
	bucketPhases     = []byte("volumePhases")
	bucketPending    = []byte("pendingTransitions")
)

// checkFormat brings a store opened in tx to Format: a new store is stamped with it, a format
// 1 store is migrated, a later format is refused. The state buckets exist already.
func checkFormat(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	v := meta.Get(keyFormat)
	switch {
	case v == nil:
		// Format 1 never wrote the key. A new store has no state, so migrating it is a no-op.
		if err := migrateV1(tx); err != nil {
			return fmt.Errorf("migrate format 1 store to format %d: %w", Format, err)
		}
		return meta.Put(keyFormat, uintKey(Format))
	case len(v) != 8:
		return fmt.Errorf("store format record is %d bytes, want 8: not a fakecloud store, or a damaged one", len(v))
	case binary.BigEndian.Uint64(v) == Format:
		return nil
	case binary.BigEndian.Uint64(v) == 2, binary.BigEndian.Uint64(v) == 3:
		// Formats 3 and 4 only add buckets, which Open has just created, and fields.
		return meta.Put(keyFormat, uintKey(Format))
	default:
		return fmt.Errorf("store has on-disk format %d; this fakecloud reads formats 1 to %d: use the fakecloud that wrote it, or a new data dir",
			binary.BigEndian.Uint64(v), Format)
	}
}

// v1Instance and v1Volume are the format 1 records: the API shapes with their attachment and
// revision fields inline.
type v1Instance = cloud.Instance

type v1Volume struct {
	cloud.Volume
	RequestedSizeBytes int64 `json:"requestedSizeBytes"`
}

// decodeAll decodes every JSON value of b in key order; what names a record in errors.
func decodeAll[T any](b *bolt.Bucket, what string) ([]T, error) {
	var out []T
	err := b.ForEach(func(k, v []byte) error {
		var rec T
		if err := jsonUnmarshal(v, &rec); err != nil {
			return fmt.Errorf("%s %s: %w", what, k, err)
		}
		out = append(out, rec)
		return nil
	})
	return out, err
}

// migrateV1 rewrites format 1 records in place: each instance and volume loses its inline
// attachment state to the narrow records, and the quotas JSON becomes fixed-width. Values
// read from a bbolt cursor are only valid until the next write, so the records are decoded
// first and written after the walk.
func migrateV1(tx *bolt.Tx) error {
	insts, err := decodeAll[v1Instance](tx.Bucket(bucketInstances), "instance")
	if err != nil {
		return err
	}
	vols, err := decodeAll[v1Volume](tx.Bucket(bucketVolumes), "volume")
	if err != nil {
		return err
	}
	t := &txn{tx: tx} // only its write helpers are used, which need no store, clock or revision
	for _, in := range insts {
		rec := instanceRec{ID: in.ID, Zone: in.Zone, InstanceType: in.InstanceType, AttachLimitOverride: in.AttachLimitOverride,
			OutOfBandSlots: in.OutOfBandSlots, CreatedAt: in.CreatedAt}
		if err := t.putJSON(bucketInstances, []byte(in.ID), rec); err != nil {
			return err
		}
		for _, volID := range in.Attachments {
			if err := t.putAttachment(in.ID, volID); err != nil {
				return err
			}
		}
		if err := t.putInstanceState(in.ID, instanceState{revision: in.Revision, attached: uint64(len(in.Attachments))}); err != nil {
			return err
		}
	}
	for _, v := range vols {
		st := volumeState{revision: v.Revision, attachedTo: v.AttachedTo}
		rec := volumeRec{ID: v.ID, Name: v.Name, SizeBytes: v.SizeBytes, Zone: v.Zone, SourceSnapshotID: v.SourceSnapshotID,
			CreatedAt: v.CreatedAt, RequestedSizeBytes: v.RequestedSizeBytes}
		if err := t.putVolume(&rec, st); err != nil {
			return err
		}
	}
	meta := tx.Bucket(bucketMeta)
	if data := meta.Get(keyQuotas); data != nil {
		var q cloud.Quotas
		if err := jsonUnmarshal(data, &q); err != nil {
			return fmt.Errorf("quotas: %w", err)
		}
		if err := meta.Put(keyQuotas, encodeQuotas(&q)); err != nil {
			return err
		}
	}
	return nil
}
