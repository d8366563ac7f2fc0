package store_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
)

// storedBytes is the JSON size of the retained events as the store keeps them.
func storedBytes(t *testing.T, events []cloud.Event) int {
	t.Helper()
	n := 0
	for _, ev := range events {
		data, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		n += len(data)
	}
	return n
}

// TestEventLogIsBoundedInBytes: with events of the largest size the log keeps at most
// MaxEventBytes of them (and the newest one always), and the count bound still holds; the
// bound survives a reopen, counted again from the file. Before, only the count was bounded
// (10,000 events of 1 MB each were kept).
func TestEventLogIsBoundedInBytes(t *testing.T) {
	dir := t.TempDir()
	const maxBytes = 16 << 10
	open := func() *store.Store {
		s, err := store.Open(dir, store.Options{MaxEvents: 1000, MaxEventBytes: maxBytes})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	if _, err := s.SeedIfEmpty(testState()); err != nil {
		t.Fatal(err)
	}
	id := strings.Repeat("i", cloud.MaxIDBytes)
	for i := range 200 {
		if _, err := s.RecordEvent(cloud.Event{Type: "FaultFired", InstanceID: id, VolumeID: id, Detail: strings.Repeat("d", 2000) + fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	events, _, err := s.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	if n := storedBytes(t, events); n > maxBytes || len(events) < 10 {
		t.Fatalf("%d events of %d bytes kept, want at most %d bytes and more than a few events", len(events), n, maxBytes)
	}
	for _, ev := range events {
		if len(ev.Detail) > store.MaxEventDetailBytes {
			t.Fatalf("detail of %d bytes kept, want at most %d", len(ev.Detail), store.MaxEventDetailBytes)
		}
		if data, _ := json.Marshal(ev); len(data) > store.MaxEventRecordBytes {
			t.Fatalf("event of %d bytes, over MaxEventRecordBytes %d", len(data), store.MaxEventRecordBytes)
		}
	}
	last := events[len(events)-1]
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A reopened store with a smaller byte bound trims on the next event.
	s, err = store.Open(dir, store.Options{MaxEvents: 1000, MaxEventBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.RecordEvent(cloud.Event{Type: "FaultFired"}); err != nil {
		t.Fatal(err)
	}
	events, _, err = s.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	if n := storedBytes(t, events); n > 4<<10 || events[len(events)-1].Seq != last.Seq+1 {
		t.Fatalf("after reopen: %d events of %d bytes, last seq %d", len(events), n, events[len(events)-1].Seq)
	}
}

// TestListEventsPages: pages of the audit log by revision and by sequence, with tokens that
// continue where the page ended and refuse to be forged.
func TestListEventsPages(t *testing.T) {
	s, err := store.Open("", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.SeedIfEmpty(testState()); err != nil {
		t.Fatal(err)
	}
	for range 25 {
		if _, err := s.RecordMutation(cloud.Event{Type: "FaultCreated"}); err != nil {
			t.Fatal(err)
		}
	}
	all, _, err := s.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	var walked []cloud.Event
	token := ""
	for {
		page, err := s.ListEvents(store.EventQuery{MaxResults: 4, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Events) > 4 {
			t.Fatalf("page of %d, want at most 4", len(page.Events))
		}
		walked = append(walked, page.Events...)
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	if len(walked) != len(all) {
		t.Fatalf("walked %d events, want %d", len(walked), len(all))
	}
	page, err := s.ListEvents(store.EventQuery{SinceRevision: all[len(all)-3].Revision - 1, MaxResults: 2})
	if err != nil || len(page.Events) != 2 || page.NextPageToken == "" {
		t.Fatalf("sinceRevision page: %+v %v", page, err)
	}
	page, err = s.ListEvents(store.EventQuery{SinceSeq: all[len(all)-2].Seq})
	if err != nil || len(page.Events) != 1 || page.NextPageToken != "" {
		t.Fatalf("sinceSeq page: %+v %v", page, err)
	}
	for _, bad := range []string{"x", "djE6c2VxLTE", strings.Repeat("A", 200)} {
		if _, err := s.ListEvents(store.EventQuery{PageToken: bad}); cloud.CodeOf(err) != cloud.CodeInvalidArgument {
			t.Errorf("token %.20q: %v, want InvalidArgument", bad, err)
		}
	}
}

// TestListEventsSaysWhenTruncated: with a log of 10 events that has dropped the older ones, a
// first page that asks for dropped events says so (truncated, and the oldest retained seq);
// one that asks only for retained events, or a later page, does not. Before, the answer
// silently started later than asked.
func TestListEventsSaysWhenTruncated(t *testing.T) {
	s, err := store.Open("", store.Options{MaxEvents: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.SeedIfEmpty(testState()); err != nil {
		t.Fatal(err)
	}
	for range 30 {
		if _, err := s.RecordMutation(cloud.Event{Type: "FaultCreated"}); err != nil {
			t.Fatal(err)
		}
	}
	all, _, err := s.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	oldest := all[0]
	if oldest.Seq <= 1 || len(all) > 10 {
		t.Fatalf("%d events from seq %d: want the oldest dropped", len(all), oldest.Seq)
	}
	first, err := s.ListEvents(store.EventQuery{MaxResults: 2})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		q    store.EventQuery
		want bool
	}{
		{"whole log", store.EventQuery{}, true},
		{"sinceSeq 1", store.EventQuery{SinceSeq: 1}, true},
		{"sinceSeq just before the oldest dropped one", store.EventQuery{SinceSeq: oldest.Seq - 2}, true},
		{"sinceSeq of the newest dropped one", store.EventQuery{SinceSeq: oldest.Seq - 1}, false},
		{"sinceSeq of the oldest retained one", store.EventQuery{SinceSeq: oldest.Seq}, false},
		{"sinceSeq past the newest", store.EventQuery{SinceSeq: all[len(all)-1].Seq + 5}, false},
		{"sinceRevision 0", store.EventQuery{SinceRevision: 0}, true},
		{"sinceRevision before the oldest retained one", store.EventQuery{SinceRevision: oldest.Revision - 2}, true},
		{"sinceRevision of the oldest retained one", store.EventQuery{SinceRevision: oldest.Revision}, false},
		{"a later page", store.EventQuery{MaxResults: 2, PageToken: first.NextPageToken}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page, err := s.ListEvents(tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if page.Truncated != tt.want {
				t.Fatalf("truncated %v, want %v (%+v)", page.Truncated, tt.want, page)
			}
			if want := map[bool]uint64{true: oldest.Seq}[tt.want]; page.OldestSeq != want {
				t.Fatalf("oldestSeq %d, want %d", page.OldestSeq, want)
			}
		})
	}
}

// TestListEventsPageTokenSaysWhenTruncated: a reader following pageToken while the bounded
// log drops the events after its token is told so, as one asking with sinceSeq is (issue
// 24, item 13): truncated, and the seq of the oldest retained event. Before, the later page
// silently skipped the dropped range.
func TestListEventsPageTokenSaysWhenTruncated(t *testing.T) {
	s, err := store.Open("", store.Options{MaxEvents: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.SeedIfEmpty(testState()); err != nil {
		t.Fatal(err)
	}
	record := func(n int) {
		t.Helper()
		for range n {
			if _, err := s.RecordMutation(cloud.Event{Type: "FaultCreated"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	record(10)
	all, _, err := s.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.ListEvents(store.EventQuery{SinceSeq: all[0].Seq - 1, MaxResults: 2})
	if err != nil || first.NextPageToken == "" || first.Truncated {
		t.Fatalf("first page: %+v %v", first, err)
	}
	lastSeen := first.Events[len(first.Events)-1].Seq
	record(30) // the log keeps 10: everything after the token's event is dropped
	all, _, err = s.Events(0)
	if err != nil {
		t.Fatal(err)
	}
	oldest := all[0].Seq
	if oldest <= lastSeen+1 {
		t.Fatalf("oldest retained seq %d: want the events after %d dropped", oldest, lastSeen)
	}
	next, err := s.ListEvents(store.EventQuery{SinceSeq: all[0].Seq - 1, MaxResults: 2, PageToken: first.NextPageToken})
	if err != nil {
		t.Fatal(err)
	}
	if !next.Truncated || next.OldestSeq != oldest {
		t.Fatalf("page after a dropped range: truncated %v oldestSeq %d, want true and %d (%+v)", next.Truncated, next.OldestSeq, oldest, next)
	}
	// The same position asked with sinceSeq gives the same answer.
	bySeq, err := s.ListEvents(store.EventQuery{SinceSeq: lastSeen, MaxResults: 2})
	if err != nil {
		t.Fatal(err)
	}
	if bySeq.Truncated != next.Truncated || bySeq.OldestSeq != next.OldestSeq {
		t.Fatalf("sinceSeq %d: truncated %v oldestSeq %d; pageToken: %v %d", lastSeen, bySeq.Truncated, bySeq.OldestSeq, next.Truncated, next.OldestSeq)
	}
	// A reader that keeps up is not told of a truncation.
	keep, err := s.ListEvents(store.EventQuery{SinceSeq: oldest - 1, MaxResults: 2})
	if err != nil || keep.NextPageToken == "" {
		t.Fatalf("in-range page: %+v %v", keep, err)
	}
	after, err := s.ListEvents(store.EventQuery{SinceSeq: oldest - 1, MaxResults: 2, PageToken: keep.NextPageToken})
	if err != nil || after.Truncated || after.OldestSeq != 0 {
		t.Fatalf("page after retained events: %+v %v, want no truncation", after, err)
	}
}
