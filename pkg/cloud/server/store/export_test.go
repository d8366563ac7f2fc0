package store

import bolt "go.etcd.io/bbolt"

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
