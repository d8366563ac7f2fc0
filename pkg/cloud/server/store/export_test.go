package store

import (
	"time"

	bolt "go.etcd.io/bbolt"
)

// LastTxID is the ID of the last committed write transaction; it grows by one per commit,
// so tests can count commits.
func LastTxID(s *Store) (int, error) {
	var id int
	err := s.db.View(func(tx *bolt.Tx) error {
		id = tx.ID()
		return nil
	})
	return id, err
}

// Watched is how many volumes have watchers (WatchVolume), so tests can check that none is
// left behind.
func Watched(s *Store) int {
	s.watch.mu.Lock()
	defer s.watch.mu.Unlock()
	return len(s.watch.vols)
}

// QueuedMutations is how many mutations wait for a shared commit.
func QueuedMutations(s *Store) int {
	s.commits.mu.Lock()
	defer s.commits.mu.Unlock()
	return len(s.commits.queue)
}

// OldBatchDelay is the 1 ms bbolt's DB.Batch waited for a batch to fill before the store
// committed on its own (issue 28).
const OldBatchDelay = time.Millisecond
