package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// txn is one mutation (or read) inside a bbolt transaction, which in a batch it shares with
// other mutations: it bumps the revision at most once and appends events stamped with it.
// Mutations write only through its methods (bump, event, nextID, put, putJSON, delete,
// emptyBucket, putAttachment, deleteAttachment), which is how update knows whether a rejected
// mutation left writes behind.
type txn struct {
	s      *Store
	tx     *bolt.Tx
	now    time.Time
	rev    uint64
	bumped bool
	wrote  bool
	// touched names the volumes whose state or phase the mutation wrote, touchedAll says it
	// replaced them all (a reset): their watchers are woken after the commit (watchers).
	touched    []string
	touchedAll bool
}

// update runs fn as one mutation, committed (and fsynced) together with the concurrent
// mutations of other callers. fn may run more than once; each run must compute everything,
// including its results, from t, and the caller may use them only when update returned nil.
//
// A mutation with no other in flight runs in its own Update at once: batching it would only
// add MaxBatchDelay to a lone caller's every request. Those that arrive while it commits find
// it in flight and gather in a batch, which commits right after it.
func (s *Store) update(fn func(t *txn) error) error {
	alone := s.inFlight.Add(1) == 1
	defer s.inFlight.Add(-1)
	var (
		rejected error
		last     *txn
	)
	run := func(tx *bolt.Tx) error {
		rejected = nil
		t := &txn{s: s, tx: tx, now: s.now().UTC(), rev: getUint(tx.Bucket(bucketMeta), keyRevision)}
		last = t
		err := fn(t)
		var ce *cloud.Error
		if err != nil && !alone && !t.wrote && errors.As(err, &ce) {
			// Returning a domain failure to the group commit would roll back the whole
			// commit and re-run every sibling; having written nothing, this mutation can fail
			// on its own.
			rejected = err
			return nil
		}
		return err
	}
	var err error
	if alone {
		err = s.db.Update(run)
	} else {
		err = s.commits.run(run)
	}
	if err != nil {
		return err
	}
	if rejected == nil && last != nil {
		// Committed: the run that counts is the last one (the group commit may have run fn
		// again).
		s.watch.notify(last.touched, last.touchedAll)
	}
	return rejected
}

func (s *Store) view(fn func(t *txn) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		t := &txn{s: s, tx: tx, now: s.now().UTC(), rev: getUint(tx.Bucket(bucketMeta), keyRevision)}
		return fn(t)
	})
}

// bump makes this transaction a mutation: the global revision grows by one (once per
// transaction) and the new value is returned.
func (t *txn) bump() (uint64, error) {
	if t.bumped {
		return t.rev, nil
	}
	t.rev++
	t.bumped = true
	if err := t.putUint(bucketMeta, keyRevision, t.rev); err != nil {
		return 0, err
	}
	return t.rev, nil
}

// event appends ev to the audit log at the transaction's revision and drops the oldest
// events beyond the bounds: more than maxEvents, or more than maxEventBytes of stored JSON.
func (t *txn) event(ev cloud.Event) error {
	meta := t.tx.Bucket(bucketMeta)
	seq := getUint(meta, keySeq) + 1
	if err := t.putUint(bucketMeta, keySeq, seq); err != nil {
		return err
	}
	ev.Seq = seq
	ev.Revision = t.rev
	ev.Time = t.now
	if len(ev.Detail) > MaxEventDetailBytes {
		ev.Detail = ev.Detail[:MaxEventDetailBytes-3] + "..."
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	events := t.tx.Bucket(bucketEvents)
	// Event keys only ever grow, so pages need no room for later inserts: bbolt's default
	// (split pages half full) would write twice the pages per commit for the same events.
	events.FillPercent = 1.0
	if err := t.put(bucketEvents, uintKey(seq), data); err != nil {
		return err
	}
	total := getUint(meta, keyEventBytes) + uint64(len(data))
	// Keys are contiguous (only the oldest are ever deleted), so the count is seq minus the
	// first key plus one. The newest event always stays.
	c := events.Cursor()
	for k, v := c.First(); k != nil && binary.BigEndian.Uint64(k) < seq; k, v = c.First() {
		if seq-binary.BigEndian.Uint64(k)+1 <= t.s.maxEvents && total <= t.s.maxEventBytes {
			break
		}
		total -= min(total, uint64(len(v)))
		if err := c.Delete(); err != nil {
			return fmt.Errorf("trim events: %w", err)
		}
	}
	return t.putUint(bucketMeta, keyEventBytes, total)
}

// recountEventBytes sets meta "eventBytes" to the stored size of the events bucket.
func recountEventBytes(tx *bolt.Tx) error {
	var total uint64
	if err := tx.Bucket(bucketEvents).ForEach(func(_, v []byte) error {
		total += uint64(len(v))
		return nil
	}); err != nil {
		return fmt.Errorf("count event bytes: %w", err)
	}
	return tx.Bucket(bucketMeta).Put(keyEventBytes, uintKey(total))
}

// nextID allocates the next ID from a counter in meta, e.g. "vol-0000002a". IDs are fixed
// width hex so that bbolt's byte order is creation order, which paging relies on.
func (t *txn) nextID(counter []byte, prefix string) (string, error) {
	meta := t.tx.Bucket(bucketMeta)
	n := getUint(meta, counter) + 1
	if err := t.putUint(bucketMeta, counter, n); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s%08x", prefix, n), nil
}

func (t *txn) put(bucket, key, value []byte) error {
	t.wrote = true
	t.touch(bucket, key)
	if err := t.tx.Bucket(bucket).Put(key, value); err != nil {
		return fmt.Errorf("put %s/%s: %w", bucket, key, err)
	}
	return nil
}

func (t *txn) putUint(bucket, key []byte, v uint64) error {
	return t.put(bucket, key, uintKey(v))
}

func (t *txn) putJSON(bucket, key []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s/%s: %w", bucket, key, err)
	}
	return t.put(bucket, key, data)
}

func (t *txn) delete(bucket, key []byte) error {
	t.wrote = true
	t.touch(bucket, key)
	if err := t.tx.Bucket(bucket).Delete(key); err != nil {
		return fmt.Errorf("delete %s/%s: %w", bucket, key, err)
	}
	return nil
}

// emptyBucket replaces bucket with an empty one.
func (t *txn) emptyBucket(bucket []byte) error {
	t.wrote = true
	t.touchAll(bucket)
	if err := t.tx.DeleteBucket(bucket); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
		return fmt.Errorf("drop bucket %s: %w", bucket, err)
	}
	if _, err := t.tx.CreateBucket(bucket); err != nil {
		return fmt.Errorf("create bucket %s: %w", bucket, err)
	}
	return nil
}

// touch records that the transaction wrote bucket's key: a write of a volume's state or
// phase is a change its watchers hear of once the commit is done.
func (t *txn) touch(bucket, key []byte) {
	if isVolumeBucket(bucket) {
		t.touched = append(t.touched, string(key))
	}
}

// touchAll records that the transaction replaced bucket: every volume's watchers hear of it.
func (t *txn) touchAll(bucket []byte) {
	if isVolumeBucket(bucket) {
		t.touchedAll = true
	}
}

func isVolumeBucket(bucket []byte) bool {
	return string(bucket) == string(bucketVolStates) || string(bucket) == string(bucketPhases)
}

// getJSON decodes key into v and reports whether it existed.
func getJSON(b *bolt.Bucket, key []byte, v any) (bool, error) {
	data := b.Get(key)
	if data == nil {
		return false, nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("decode %s: %w", key, err)
	}
	return true, nil
}

func jsonUnmarshal(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode stored record: %w", err)
	}
	return nil
}

func uintKey(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

func getUint(b *bolt.Bucket, key []byte) uint64 {
	v := b.Get(key)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}
