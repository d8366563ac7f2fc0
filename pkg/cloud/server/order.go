package server

import (
	"sync"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// volumeOrder keeps the attaches and detaches of one volume in the order they arrived, so
// that they take effect in the order they were answered (docs/attach.md, "Order"). Each
// request takes an arrival number before its injected latency; when it comes to be carried
// out, a request older than one already carried out on the same volume is dropped
// (Unavailable, and a RequestSuperseded event) instead of undoing what a later request,
// already answered, did: an attach whose caller gave up during the latency must not attach
// a volume a later detach was answered OK for. A repeat of the newest request carried out
// (same operation, instance and mode: a retry, or a twin sent at the same time) is not
// dropped: it cannot undo its twin, and carried out it joins what its twin started, as an
// attach repeated after it would. Dropping it answered a caller Unavailable for an attach
// under way exactly as it asked, with no other request between (a driver's retries of one
// publish, sent together, overtook one another on a loaded machine). The volume's requests
// are carried out one at a time (check and store transaction under the volume's lock), so a
// newer one can never slip between an older one's check and its commit.
//
// It holds state only for volumes with a request in flight (at most one entry per served
// request, so bounded by the connections), and forgets a volume when its last request ends:
// no older request can then be waiting.
type volumeOrder struct {
	mu sync.Mutex
	// next is the last arrival number given out; numbers are shared by all volumes and only
	// compared within one.
	next uint64
	vols map[string]*volumeTurns
}

// volumeTurns is one volume's in-flight requests.
type volumeTurns struct {
	// inflight counts the requests that took a ticket and have not ended (guarded by
	// volumeOrder.mu).
	inflight int
	// mu is held while a request is checked and carried out.
	mu sync.Mutex
	// applied is the arrival number of the newest request carried out, and appliedReq what it
	// asked (both guarded by mu).
	applied    uint64
	appliedReq orderedRequest
}

// orderedRequest is what an attach or detach asks of its volume: two requests that ask the
// same are repeats of one another, and carrying out both, in either order, leaves what one
// leaves.
type orderedRequest struct {
	op         cloud.Operation
	instanceID string
	readOnly   bool
}

// orderTicket is one request's place in its volume's order.
type orderTicket struct {
	o   *volumeOrder
	id  string
	req orderedRequest
	seq uint64
	vt  *volumeTurns
}

func newVolumeOrder() *volumeOrder { return &volumeOrder{vols: map[string]*volumeTurns{}} }

// arrive gives req, a request on volumeID, its arrival number. Call done when the request
// ends.
func (o *volumeOrder) arrive(volumeID string, req orderedRequest) *orderTicket {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.next++
	vt := o.vols[volumeID]
	if vt == nil {
		vt = &volumeTurns{}
		o.vols[volumeID] = vt
	}
	vt.inflight++
	return &orderTicket{o: o, id: volumeID, req: req, seq: o.next, vt: vt}
}

// done ends the ticket's request; the volume's entry goes with its last request.
func (t *orderTicket) done() {
	t.o.mu.Lock()
	defer t.o.mu.Unlock()
	if t.vt.inflight--; t.vt.inflight == 0 {
		delete(t.o.vols, t.id)
	}
}

// carryOut runs apply, the request's store transaction, unless a request on the volume that
// arrived later and asks something else has already been carried out: then apply does not
// run and carryOut reports false. A request older than the newest carried out that repeats
// it runs (its store transaction is the twin's idempotent repeat) and leaves the newest as
// it was. Requests on one volume are carried out one at a time.
func (t *orderTicket) carryOut(apply func()) bool {
	t.vt.mu.Lock()
	defer t.vt.mu.Unlock()
	switch {
	case t.vt.applied < t.seq:
		t.vt.applied, t.vt.appliedReq = t.seq, t.req
	case t.vt.appliedReq != t.req:
		return false
	}
	apply()
	return true
}

// supersededError is the answer to a request volumeOrder dropped. It is retryable
// (Unavailable): the request did not run, and a caller still waiting may send it again, now
// after the request that superseded it.
func supersededError(op cloud.Operation, volumeID string) error {
	return cloud.NewError(cloud.CodeUnavailable,
		"%s superseded: a later, different attach or detach of volume %s was carried out while this one waited for its turn (or its injected latency); this one did not run",
		op, volumeID)
}
