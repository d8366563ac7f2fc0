package server

import (
	"context"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// Bounds of the routes whose answer grows with the fleet (GET /metrics, the unpaged
// GET /v1/instances): at the 10,000-instance bound one answer is several megabytes and its
// rendering several times that, so many readers at once once took the fake cloud past 2 GiB.
const (
	// DefaultMaxHeavyReads is how many such answers are rendered and written at once; a
	// reader beyond it waits for a turn.
	DefaultMaxHeavyReads = 4
	// heavyReadWait bounds that wait: past it the reader is answered 429 Throttled with
	// Retry-After. Several answers of a full fleet are written in it, and it stays under
	// Prometheus's default scrape timeout (10 s).
	heavyReadWait = 5 * time.Second
)

// gate admits at most cap(slots) heavy reads at once.
type gate struct {
	slots chan struct{}
	wait  time.Duration
}

func newGate(n int, wait time.Duration) *gate {
	return &gate{slots: make(chan struct{}, n), wait: wait}
}

// enter waits up to g.wait for a turn and returns the function that ends it. Errors:
// Throttled (429, Retry-After) when no turn came in time; Unavailable when ctx ended first
// (the caller left).
func (g *gate) enter(ctx context.Context) (func(), error) {
	leave := func() { <-g.slots }
	select {
	case g.slots <- struct{}{}:
		return leave, nil
	default:
	}
	t := time.NewTimer(g.wait)
	defer t.Stop()
	select {
	case g.slots <- struct{}{}:
		return leave, nil
	case <-t.C:
		return nil, cloud.NewError(cloud.CodeThrottled, "%d answers of the whole fleet (/metrics, GET /v1/instances) are being written; retry later", cap(g.slots))
	case <-ctx.Done():
		return nil, cloud.NewError(cloud.CodeUnavailable, "waiting for a turn: %v", ctx.Err())
	}
}
