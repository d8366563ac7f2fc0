package localcluster

import (
	"errors"
	"sync"
)

// registrar serves the registration sockets of started node plugins in the background,
// in start order, one node at a time: waiting for a plugin's socket takes seconds, which
// the next batch's start overlaps. The first error stops it; later nodes are skipped.
type registrar struct {
	register func(i int) error

	next chan int
	done chan struct{}
	once sync.Once

	mu  sync.Mutex
	err error
}

// newRegistrar starts the goroutine that calls register for each index add hands it;
// stop (or wait) ends it.
func newRegistrar(register func(i int) error) *registrar {
	r := &registrar{register: register, next: make(chan int, 1024), done: make(chan struct{})}
	go r.loop()
	return r
}

func (r *registrar) loop() {
	defer close(r.done)
	for i := range r.next {
		if r.failed() != nil {
			continue
		}
		if err := r.register(i); err != nil {
			r.mu.Lock()
			r.err = err
			r.mu.Unlock()
		}
	}
}

func (r *registrar) failed() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// add queues the nodes of [lo, hi) and returns the first error of those registered so far,
// so that a start stops at a failed node rather than after every batch.
func (r *registrar) add(lo, hi int) error {
	if err := r.failed(); err != nil {
		return err
	}
	for i := lo; i < hi; i++ {
		select {
		case r.next <- i:
		case <-r.done:
			return r.failed()
		}
	}
	return nil
}

// wait returns once every queued node is registered (or the first failed), with that
// error. add may not be called after it.
func (r *registrar) wait() error {
	r.stop()
	<-r.done
	if err := r.failed(); err != nil {
		return err
	}
	return nil
}

// stop ends the loop once the queued nodes are done; safe to call more than once.
func (r *registrar) stop() {
	r.once.Do(func() { close(r.next) })
}

// abort skips the nodes still queued (a start that failed elsewhere) and ends the loop;
// the caller cancels the context register waits under. Safe after wait.
func (r *registrar) abort() {
	r.mu.Lock()
	if r.err == nil {
		r.err = errors.New("node start stopped")
	}
	r.mu.Unlock()
	r.stop()
}
