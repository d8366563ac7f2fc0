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
