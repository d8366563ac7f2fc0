package store

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/paging"
)

// Events returns every retained audit event with Revision > sinceRevision, oldest first,
// unpaged (for tests and tools in process; the API pages with ListEvents). Only the last
// MaxEvents events (and at most MaxEventBytes of them) are kept. A FaultFired event carries
// the revision it saw without bumping it, so a poller that wants every fault should pass the
// last revision it saw minus one, or use EventsSinceSeq.
// It also returns the revision current when the events were read.
func (s *Store) Events(sinceRevision uint64) ([]cloud.Event, uint64, error) {
	return s.events(func(ev *cloud.Event) bool { return ev.Revision > sinceRevision })
}

// EventsSinceSeq returns the retained audit events with Seq > seq, oldest first, and the
// revision current when they were read (unpaged, like Events).
func (s *Store) EventsSinceSeq(seq uint64) ([]cloud.Event, uint64, error) {
	return s.events(func(ev *cloud.Event) bool { return ev.Seq > seq })
}

func (s *Store) events(keep func(*cloud.Event) bool) ([]cloud.Event, uint64, error) {
	out := []cloud.Event{}
	var rev uint64
	err := s.view(func(t *txn) error {
		rev = t.rev
		return t.tx.Bucket(bucketEvents).ForEach(func(_, v []byte) error {
			var ev cloud.Event
			if err := jsonUnmarshal(v, &ev); err != nil {
				return err
			}
			if keep(&ev) {
				out = append(out, ev)
			}
			return nil
		})
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list events: %w", err)
	}
	return out, rev, nil
}

// EventQuery selects one page of the audit log: events with Revision > SinceRevision and
// Seq > SinceSeq, oldest first, at most MaxResults (0: DefaultPageSize, capped at
// MaxPageSize) after PageToken.
type EventQuery struct {
	SinceRevision uint64
	SinceSeq      uint64
	MaxResults    int
	PageToken     string
}

// ListEvents returns one page of retained events and the revision current when it was read;
// NextPageToken is set when more matching events exist. Truncated and OldestSeq say that the
// log dropped events the page asks for, on every page: a first page's are those after
// SinceSeq or SinceRevision, a later page's those after its token's event. A page holds at most MaxPageSize
// events of at most MaxEventRecordBytes each, so an answer has a size bound whatever the log
// holds. Errors: InvalidArgument (negative maxResults, malformed token).
func (s *Store) ListEvents(q EventQuery) (*cloud.EventList, error) {
	out := &cloud.EventList{Events: []cloud.Event{}}
	err := s.view(func(t *txn) error {
		out.Revision = t.rev
		// A later page continues after its token's event: whatever the first page asked,
		// the events this page asks for are those after that one, so the log may have
		// dropped some of them since (a slow reader) and the page must say so too.
		tq := q
		if q.PageToken != "" {
			seq, err := tokenSeq(q.PageToken)
			if err != nil {
				return err
			}
			tq = EventQuery{SinceSeq: seq}
		}
		if err := t.truncation(tq, out); err != nil {
			return err
		}
		keep := func(v []byte) (bool, error) {
			var ev cloud.Event
			if err := jsonUnmarshal(v, &ev); err != nil {
				return false, err
			}
			return ev.Revision > q.SinceRevision, nil
		}
		// Keys are sequence numbers, so Seq > SinceSeq is where the walk starts.
		return t.page(bucketEvents, seqKeys, pageRequest{maxResults: q.MaxResults, token: q.PageToken, after: uintKey(q.SinceSeq)},
			keep, func(v []byte) error {
				var ev cloud.Event
				if err := jsonUnmarshal(v, &ev); err != nil {
					return err
				}
				out.Events = append(out.Events, ev)
				return nil
			}, &out.NextPageToken)
	})
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return out, nil
}

// tokenSeq is the seq of the event a page token of the events list names (the last one of
// the page before). Errors: InvalidArgument for a malformed token.
func tokenSeq(token string) (uint64, error) {
	key, err := paging.Parse(token, func(s string) bool { _, ok := seqKeys.key(s); return ok })
	if err != nil {
		return 0, err
	}
	k, _ := seqKeys.key(key)
	return binary.BigEndian.Uint64(k), nil
}

// truncation sets out.Truncated and out.OldestSeq when the log has dropped events q asks for
// (cloud.EventList): the oldest retained event is past SinceSeq+1, or, for SinceRevision, is
// past that revision while older events were dropped. Seqs start at 1, so an oldest seq above
// 1 means some were dropped.
func (t *txn) truncation(q EventQuery, out *cloud.EventList) error {
	k, v := t.tx.Bucket(bucketEvents).Cursor().First()
	if k == nil {
		return nil
	}
	var oldest cloud.Event
	if err := jsonUnmarshal(v, &oldest); err != nil {
		return fmt.Errorf("oldest event: %w", err)
	}
	dropped := oldest.Seq > 1
	if oldest.Seq > q.SinceSeq+1 && (q.SinceSeq > 0 || (dropped && oldest.Revision > q.SinceRevision)) {
		out.Truncated, out.OldestSeq = true, oldest.Seq
	}
	return nil
}

// RecordEvent appends an event that is not a mutation (a fault that fired) at the current
// revision, without bumping it, and returns it as stored.
func (s *Store) RecordEvent(ev cloud.Event) (cloud.Event, error) {
	out, err := s.RecordEvents([]cloud.Event{ev})
	if err != nil {
		return cloud.Event{}, err
	}
	return out[0], nil
}

// RecordEvents appends events that are not mutations (the faults that fired for one
// request) at the current revision in one transaction, so a request that fires many rules
// costs one commit, and returns them as stored.
func (s *Store) RecordEvents(evs []cloud.Event) ([]cloud.Event, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	out := make([]cloud.Event, len(evs))
	err := s.update(func(t *txn) error {
		for i, ev := range evs {
			if err := t.event(ev); err != nil {
				return err
			}
			// Read back what event stamped, for the caller's log line.
			ev.Revision = t.rev
			ev.Time = t.now
			ev.Seq = getUint(t.tx.Bucket(bucketMeta), keySeq)
			out[i] = ev
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record %d %s events: %w", len(evs), evs[0].Type, err)
	}
	return out, nil
}

// seqKeys are the keys of the events bucket: a sequence number as 8 big-endian bytes, as
// "seq-" plus 16 hex digits in a token.
var seqKeys = pageKeys{
	token: func(k []byte) string { return fmt.Sprintf("seq-%016x", binary.BigEndian.Uint64(k)) },
	key: func(s string) ([]byte, bool) {
		if !paging.HexKey(s, "seq-", 16) {
			return nil, false
		}
		n, _ := strconv.ParseUint(s[len("seq-"):], 16, 64)
		return uintKey(n), true
	},
}

// RecordMutation records a change made outside the store (a fault rule added or removed): it
// bumps the revision, appends ev at it and returns the new revision.
func (s *Store) RecordMutation(ev cloud.Event) (uint64, error) {
	var rev uint64
	err := s.update(func(t *txn) error {
		var err error
		if rev, err = t.bump(); err != nil {
			return err
		}
		return t.event(ev)
	})
	if err != nil {
		return 0, fmt.Errorf("record %s event: %w", ev.Type, err)
	}
	return rev, nil
}
