// Package store is the fake cloud's durable state: instance types, instances, volumes,
// attachments, snapshots, account quotas, the global revision and the bounded audit log, all
// in one bbolt file.
//
// Every mutation checks, writes, bumps the revision and appends its event in one bbolt
// transaction, so a check can never be overtaken by a concurrent writer (bbolt admits one
// writer at a time, and mutations that share a transaction run one after the other in it,
// each seeing the writes of those before it) and an acknowledged change survives a crash: a
// mutation returns only after the commit that holds it was fsynced.
//
// Concurrent mutations go through the store's group commit (groupCommit, which works like
// bbolt's DB.Batch but starts each commit as soon as the writer is free): they share one
// commit and so one pair of fdatasyncs, which is what bounds a durable store's throughput; a
// lone one commits at once in its own Update (see update). A shared commit may run a
// mutation more than once (when a sibling in it fails, the rest re-run), so a mutation
// computes everything from the transaction and its results are only trusted once update
// returned nil.
// Domain failures are *cloud.Error values. One found before the mutation wrote anything is
// recorded as the mutation's result and the transaction goes on for the siblings; one found
// after a write is returned to the group commit, which re-runs that mutation alone in its own
// transaction and rolls it back. Either way bad input changes nothing.
//
// The records an attach or detach changes are narrow fixed-width values apart from the JSON
// records of instances and volumes (see Format), so a commit of many attaches re-encodes and
// writes little besides the events.
package store

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// DefaultMaxEvents is how many audit events the store keeps; older ones are dropped.
const DefaultMaxEvents = 10000

// DefaultMaxEventBytes is how many bytes of audit events (their stored JSON) the store keeps
// at most; older events are dropped first. Typical events are 150-300 bytes, so the count
// bound usually bites first; this one holds whatever the events carry.
const DefaultMaxEventBytes = 4 << 20

// DefaultMaxInstances is how many instances the store holds unless Options say otherwise;
// one more is ServerLimitExceeded (409), and auto-registration stops registering. It bounds
// GET /v1/instances, which is not paged: a few MiB at most.
const DefaultMaxInstances = 10000

// MaxEventDetailBytes bounds an event's Detail; a longer one is cut (it is built from
// bounded fields, so only a programming error gets there). With every identifier bounded
// (cloud.MaxIDBytes), a stored event has at most MaxEventRecordBytes.
const MaxEventDetailBytes = 512

// MaxEventRecordBytes bounds one stored event's JSON: two identifiers, the detail, the type
// and the fixed-width fields, with room for JSON escaping.
const MaxEventRecordBytes = 2048

// DefaultMaxBatchDelay is how long a commit waits for company before it starts with fewer
// than MaxBatchSize mutations: none. The committer (groupCommit) starts the next commit the
// moment the previous one is done, with whatever queued while it ran, so under load commits
// fill by themselves and a waiting commit would only leave the writer idle. The previous
// design (bbolt's DB.Batch, which starts a batch when it is full or after its delay, 1 ms) is
// what issue 28 measured; docs/benchmarks.md has the comparison.
const DefaultMaxBatchDelay = time.Duration(0)

// DefaultMaxBatchSize is how many mutations one commit holds at most. It bounds one
// transaction's size, and so how long its callers wait: a commit's mutations run one after
// the other on the committer's goroutine while every caller in it waits, so a commit as
// large as all the callers in flight leaves the other cores idle; with 32, the callers of
// the previous commit do their HTTP work on the other cores while the next one runs. An
// fdatasync shared by 32 mutations costs each a few microseconds.
const DefaultMaxBatchSize = 32

// DBFileName is the bbolt file's name inside the data directory.
const DBFileName = "fakecloud.db"

var (
	bucketMeta       = []byte("meta")
	bucketTypes      = []byte("instanceTypes")
	bucketInstances  = []byte("instances")
	bucketVolumes    = []byte("volumes")
	bucketVolNames   = []byte("volumeNames")
	bucketSnapshots  = []byte("snapshots")
	bucketSnapNames  = []byte("snapshotNames")
	bucketGroups     = []byte("groupSnapshots")
	bucketGroupNames = []byte("groupSnapshotNames")
	bucketEvents     = []byte("events")

	// stateBuckets are emptied by Reset; meta and events survive it so that revisions and
	// event sequence numbers never go backwards.
	stateBuckets = [][]byte{bucketTypes, bucketInstances, bucketInstStates, bucketAttach, bucketVolumes, bucketVolStates,
		bucketVolNames, bucketSnapshots, bucketSnapNames, bucketGroups, bucketGroupNames, bucketPhases, bucketPending}

	keyRevision     = []byte("revision")
	keyEpoch        = []byte("epoch")
	keySeq          = []byte("seq")
	keyNextVolume   = []byte("nextVolume")
	keyNextSnapshot = []byte("nextSnapshot")
	keyNextGroup    = []byte("nextGroupSnapshot")
	keyQuotas       = []byte("quotas")
	keySeeded       = []byte("seeded")
	keyEventBytes   = []byte("eventBytes")
)

// Options tune a Store; zero values pick the defaults.
type Options struct {
	// Now is the clock for CreatedAt, ObservedAt and event times; default time.Now.
	Now func() time.Time
	// MaxEvents bounds the audit log's count; default DefaultMaxEvents.
	MaxEvents int
	// MaxEventBytes bounds the audit log's stored bytes; default DefaultMaxEventBytes.
	MaxEventBytes int64
	// MaxInstances bounds the instances; default DefaultMaxInstances.
	MaxInstances int
	// MaxBatchDelay is how long a commit with fewer than MaxBatchSize mutations waits for
	// more to share it (and its fsyncs) with; default DefaultMaxBatchDelay (none: the next
	// commit starts as soon as the writer is free). Durability does not depend on it.
	MaxBatchDelay time.Duration
	// MaxBatchSize caps the mutations per commit; default DefaultMaxBatchSize.
	MaxBatchSize int
	// AttachDuration and DetachDuration are how long an attach stays attaching and a detach
	// detaching on instances whose type sets no duration of its own; 0 (the default)
	// completes them within the request, as a synchronous cloud would.
	AttachDuration time.Duration
	DetachDuration time.Duration
	// Zones are the zones volumes may be created in although no instance is in them yet:
	// the server's default zone, where zone-less volumes go and auto-registered instances
	// appear. The zone of every instance is known anyway.
	Zones []string
}

// Store is the durable state. It is safe for concurrent use.
type Store struct {
	db        *bolt.DB
	now       func() time.Time
	maxEvents uint64
	// maxEventBytes bounds the stored bytes of the events, tracked in meta "eventBytes".
	maxEventBytes uint64
	// maxInstances bounds the instances.
	maxInstances int
	// inFlight counts the mutations under way, to spot a lone one.
	inFlight atomic.Int64
	// commits shares commits between concurrent mutations.
	commits *groupCommit
	// tempPath is the file to remove on Close when the store is not persistent.
	tempPath string
	// zones are Options.Zones.
	zones []string
	// attachDuration and detachDuration are Options'.
	attachDuration, detachDuration time.Duration
	// epoch names this database: written once when it is created, so readers can tell a
	// store that started empty again (revisions restarting from 0) from an older reading.
	epoch string
	// recs caches the decoded JSON records every attach reads.
	recs *recCaches
	// watch wakes the callers of WatchVolume after a commit changed their volume.
	watch *watchers
}

// Open opens (creating if needed) the store in dir/fakecloud.db. With dir == "" it uses a
// temporary file that Close removes: the same code path, but nothing persists, so commits
// skip fdatasync. A store of a later Format than this package knows is refused; an older one
// is brought to Format (checkFormat).
func Open(dir string, opts Options) (*Store, error) {
	s := newStore(opts)
	path, err := s.dataFile(dir)
	if err != nil {
		return nil, err
	}
	db, err := openDB(path, s.tempPath != "")
	if err != nil {
		s.removeTemp()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	batchSize := opts.MaxBatchSize
	if batchSize <= 0 {
		batchSize = DefaultMaxBatchSize
	}
	s.commits = newGroupCommit(db, batchSize, max(DefaultMaxBatchDelay, opts.MaxBatchDelay))
	s.db = db
	if err := db.Update(s.initialise); err != nil {
		_ = db.Close()
		s.removeTemp()
		return nil, fmt.Errorf("initialise store %s: %w", path, err)
	}
	return s, nil
}

// newStore is a Store with opts' values, or the defaults where they are zero, and no
// database yet.
func newStore(opts Options) *Store {
	s := &Store{now: opts.Now, maxEvents: uint64(opts.MaxEvents), zones: slices.Clone(opts.Zones), recs: newRecCaches(), watch: newWatchers(),
		attachDuration: max(0, opts.AttachDuration), detachDuration: max(0, opts.DetachDuration)}
	if s.now == nil {
		s.now = time.Now
	}
	if s.maxEvents == 0 {
		s.maxEvents = DefaultMaxEvents
	}
	s.maxInstances = DefaultMaxInstances
	if opts.MaxInstances > 0 {
		s.maxInstances = opts.MaxInstances
	}
	s.maxEventBytes = DefaultMaxEventBytes
	if opts.MaxEventBytes > 0 {
		s.maxEventBytes = uint64(opts.MaxEventBytes)
	}
	return s
}

// dataFile is the path of the bbolt file in dir, which it creates when missing (mode 0750);
// with dir == "" it is a new temporary file, which s.tempPath then names for Close to remove.
func (s *Store) dataFile(dir string) (string, error) {
	if dir == "" {
		f, err := os.CreateTemp("", "fakecloud-*.db")
		if err != nil {
			return "", fmt.Errorf("create temporary store file: %w", err)
		}
		_ = f.Close()
		s.tempPath = f.Name()
		return f.Name(), nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("create data dir %s: %w", dir, err)
	}
	return filepath.Join(dir, DBFileName), nil
}

// openDB opens the bbolt file at path (mode 0600), waiting at most 2 s for another process's
// lock on it; a temporary store's commits skip fdatasync.
func openDB(path string, temporary bool) (*bolt.DB, error) {
	return bolt.Open(path, 0o600, &bolt.Options{
		Timeout: 2 * time.Second,
		// A temporary store is removed on Close and never read after a crash, so an fdatasync
		// per commit buys nothing; on a disk busy with other writes it can stall a commit, and
		// with it the fake cloud's start, for seconds.
		NoSync: temporary,
		// Without this every commit also rewrites the free page list, one or more pages more
		// to write and fdatasync per commit. bbolt rebuilds the list by scanning the file
		// when it opens it instead, which for a store of this size is quick. Durability does
		// not depend on it: the list is derived data.
		NoFreelistSync: true,
	})
}

// initialise readies a store opened in tx: every bucket exists, the store is at Format
// (checkFormat), the events' byte count is recounted, and s.epoch is read, or written for a
// new store.
func (s *Store) initialise(tx *bolt.Tx) error {
	for _, b := range append([][]byte{bucketMeta, bucketEvents}, stateBuckets...) {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return fmt.Errorf("create bucket %s: %w", b, err)
		}
	}
	if err := checkFormat(tx); err != nil {
		return err
	}
	meta := tx.Bucket(bucketMeta)
	// Counted again at every open: a store written by a fakecloud that did not keep
	// the count (or kept it under other bounds) starts from the truth.
	if err := recountEventBytes(tx); err != nil {
		return err
	}
	if e := meta.Get(keyEpoch); e != nil {
		s.epoch = string(e)
		return nil
	}
	s.epoch = newEpoch(s.now())
	return meta.Put(keyEpoch, []byte(s.epoch))
}

// newEpoch is a name no other store has had: the creation time plus 64 random bits.
func newEpoch(now time.Time) string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux (Go 1.24+ panics instead)
	return fmt.Sprintf("%s-%x", now.UTC().Format("20060102T150405Z"), b)
}

// Epoch names this store; see cloud.Capacity.Epoch.
func (s *Store) Epoch() string { return s.epoch }

// Path is the bbolt file's path.
func (s *Store) Path() string { return s.db.Path() }

// Close closes the database and removes it when it was temporary.
func (s *Store) Close() error {
	err := s.db.Close()
	s.removeTemp()
	if err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

func (s *Store) removeTemp() {
	if s.tempPath != "" {
		_ = os.Remove(s.tempPath)
	}
}

// Ready returns nil when the store can serve reads (the database is open).
func (s *Store) Ready() error {
	return s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketMeta) == nil {
			return errors.New("store not initialised")
		}
		return nil
	})
}

// Revision is the current global revision.
func (s *Store) Revision() (uint64, error) {
	var rev uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		rev = getUint(tx.Bucket(bucketMeta), keyRevision)
		return nil
	})
	return rev, err
}
