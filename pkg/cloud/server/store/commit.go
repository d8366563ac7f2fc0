package store

import (
	"errors"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// errSolo tells a queued mutation that it failed in a shared transaction and must run again
// in one of its own (as bbolt's DB.Batch does).
var errSolo = errors.New("mutation failed in a shared commit; run it alone")

// groupCommit shares commits, and so the fdatasyncs that bound a durable store's throughput,
// between concurrent mutations. It replaces bbolt's DB.Batch, which starts a batch only when
// it is full (MaxBatchSize) or its timer (MaxBatchDelay) fires: with slow fdatasyncs
// (0.1-0.3 ms on a busy disk, two per commit) and callers that spend part of their time in
// HTTP, batches often did not fill, so the writer sat idle for the rest of the timer while
// mutations waited; and every full batch started a goroutine of its own that then queued for
// bbolt's writer lock behind the batch before it. Here one committer takes whatever is
// queued, up to max mutations, the moment it holds bbolt's writer lock (the previous commit,
// or a lone mutation's own, done): under load the queue fills while a commit runs and the
// next commit takes all of it, and with a lone caller nothing waits for company. The mutations of one commit run one after the other, in arrival order,
// in one bbolt transaction, and each is answered only after that transaction was committed
// (and fsynced), so durability is bbolt's own.
type groupCommit struct {
	db *bolt.DB
	// max caps the mutations per commit (Options.MaxBatchSize).
	max int
	// delay, when positive, is how long the committer waits for a commit to fill before it
	// starts one with fewer than max mutations (Options.MaxBatchDelay).
	delay time.Duration

	mu sync.Mutex
	// queue holds the mutations waiting for a commit, oldest first.
	queue []queuedMutation
	// running says a committer goroutine is draining the queue; there is at most one.
	running bool
	// full wakes a committer that waits out delay once the queue holds max mutations.
	full chan struct{}
}

// queuedMutation is one caller's mutation and where its result goes.
type queuedMutation struct {
	fn   func(*bolt.Tx) error
	done chan error // buffered: the committer never blocks on a caller
}

func newGroupCommit(db *bolt.DB, maxSize int, delay time.Duration) *groupCommit {
	return &groupCommit{db: db, max: maxSize, delay: delay, full: make(chan struct{}, 1)}
}

// run commits fn together with the mutations queued with it and returns once that commit was
// fsynced, with fn's error or the commit's. Like DB.Batch, fn may run more than once: when a
// mutation sharing its transaction fails, the transaction is rolled back and the others run
// again without it, and a failed fn runs again alone in a transaction of its own.
func (g *groupCommit) run(fn func(*bolt.Tx) error) error {
	done := make(chan error, 1)
	g.mu.Lock()
	g.queue = append(g.queue, queuedMutation{fn: fn, done: done})
	if len(g.queue) >= g.max {
		select {
		case g.full <- struct{}{}:
		default:
		}
	}
	if !g.running {
		g.running = true
		go g.drain()
	}
	g.mu.Unlock()
	err := <-done
	if errors.Is(err, errSolo) {
		err = g.db.Update(fn)
	}
	return err
}

// drain commits the queue, max mutations at a time, until it is empty. It takes the
// mutations of a commit only once it holds bbolt's writer lock: those that arrive while the
// writer is busy (a lone mutation's Update, or the previous commit) all go in the next
// commit.
func (g *groupCommit) drain() {
	for {
		g.mu.Lock()
		waiting := len(g.queue)
		if waiting == 0 {
			g.running = false
			g.queue = nil // lets a burst's large backing array go
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		if g.delay > 0 && waiting < g.max {
			g.waitForCompany()
		}
		tx, err := g.db.Begin(true)
		g.mu.Lock()
		// Only this goroutine takes from the queue, so it still holds at least waiting.
		n := min(len(g.queue), g.max)
		batch := g.queue[:n:n]
		g.queue = g.queue[n:]
		g.mu.Unlock()
		if err != nil {
			for _, m := range batch {
				m.done <- err
			}
			continue
		}
		g.commit(tx, batch)
	}
}

// waitForCompany waits up to delay for the queue to fill.
func (g *groupCommit) waitForCompany() {
	select {
	case <-g.full: // a stale wake-up from an earlier full queue only shortens the wait
	default:
	}
	g.mu.Lock()
	full := len(g.queue) >= g.max
	g.mu.Unlock()
	if full {
		return
	}
	t := time.NewTimer(g.delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-g.full:
	}
}

// commit runs batch's mutations in tx, a writable transaction, commits it and answers each.
// A mutation that fails rolls the transaction back: it is told to run alone (errSolo) and
// the rest run again without it in a new transaction, as in bbolt's DB.Batch.
func (g *groupCommit) commit(tx *bolt.Tx, batch []queuedMutation) {
	for {
		failed := -1
		var err error
		for i, m := range batch {
			if err = callSafely(m.fn, tx); err != nil {
				failed = i
				break
			}
		}
		if failed < 0 {
			err = tx.Commit()
			for _, m := range batch {
				m.done <- err
			}
			return
		}
		_ = tx.Rollback() // nothing of it was acknowledged; a rollback error changes nothing
		batch[failed].done <- errSolo
		batch = append(batch[:failed:failed], batch[failed+1:]...)
		if len(batch) == 0 {
			return
		}
		if tx, err = g.db.Begin(true); err != nil {
			for _, m := range batch {
				m.done <- err
			}
			return
		}
	}
}

// callSafely runs fn, turning a panic into an error: the committer runs other callers'
// mutations, and one that panics must fail alone (its solo run then panics in its own
// caller's goroutine) rather than take the committer and every waiting caller with it.
func callSafely(fn func(*bolt.Tx) error, tx *bolt.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("mutation panicked: %v", p)
		}
	}()
	return fn(tx)
}
