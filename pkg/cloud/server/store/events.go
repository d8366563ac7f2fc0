package store

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// Page sizes of the list operations.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// Events returns the retained audit events with Revision > sinceRevision, oldest first. Only
// the last MaxEvents events are kept. A FaultFired event carries the revision it saw without
// bumping it, so a poller that wants every fault should pass the last revision it saw minus one,
// or use EventsSinceSeq.
// It also returns the revision current when the events were read.
func (s *Store) Events(sinceRevision uint64) ([]cloud.Event, uint64, error) {
	return s.events(func(ev *cloud.Event) bool { return ev.Revision > sinceRevision })
}

// EventsSinceSeq returns the retained audit events with Seq > seq, oldest first, and the
// revision current when they were read.
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

// RecordEvent appends an event that is not a mutation (a fault that fired) at the current
// revision, without bumping it, and returns it as stored.
func (s *Store) RecordEvent(ev cloud.Event) (cloud.Event, error) {
	err := s.update(func(t *txn) error {
		if err := t.event(ev); err != nil {
			return err
		}
		// Read back what event stamped, for the caller's log line.
		ev.Revision = t.rev
		ev.Time = t.now
		ev.Seq = getUint(t.tx.Bucket(bucketMeta), keySeq)
		return nil
	})
	if err != nil {
		return cloud.Event{}, fmt.Errorf("record %s event: %w", ev.Type, err)
	}
	return ev, nil
}

// page walks bucket b in key order after the key encoded in pageToken. Each value for which
// match reports true is handed to take, at most maxResults of them; *next is set only when a
// further matching value exists, so the last page never promises another.
func (t *txn) page(b []byte, idPrefix string, maxResults int, pageToken string,
	match func(v []byte) (bool, error), take func(v []byte) error, next *string) error {
	if maxResults < 0 {
		return cloud.NewError(cloud.CodeInvalidArgument, "maxResults must be >= 0, got %d", maxResults)
	}
	if maxResults == 0 {
		maxResults = DefaultPageSize
	}
	maxResults = min(maxResults, MaxPageSize)
	c := t.tx.Bucket(b).Cursor()
	k, v := c.First()
	if pageToken != "" {
		after, err := decodePageToken(pageToken, idPrefix)
		if err != nil {
			return err
		}
		k, v = c.Seek([]byte(after))
		if k != nil && string(k) == after {
			k, v = c.Next()
		}
	}
	taken := 0
	var last string
	for ; k != nil; k, v = c.Next() {
		ok, err := match(v)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if taken == maxResults {
			*next = encodePageToken(last)
			return nil
		}
		if err := take(v); err != nil {
			return err
		}
		taken++
		last = string(k)
	}
	return nil
}

func encodePageToken(id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte("v1:" + id))
}

func decodePageToken(token, idPrefix string) (string, error) {
	bad := cloud.NewError(cloud.CodeInvalidArgument, "invalid pageToken %q", token)
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return "", bad
	}
	id, ok := strings.CutPrefix(string(raw), "v1:")
	if !ok {
		return "", bad
	}
	hex, ok := strings.CutPrefix(id, idPrefix)
	if !ok || len(hex) != 8 {
		return "", bad
	}
	if _, err := strconv.ParseUint(hex, 16, 64); err != nil {
		return "", bad
	}
	return id, nil
}

func jsonUnmarshal(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode stored record: %w", err)
	}
	return nil
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
