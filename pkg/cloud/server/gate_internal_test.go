package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// TestHeavyReadsAreBounded: at most MaxHeavyReads answers that grow with the fleet
// (GET /metrics, the unpaged GET /v1/instances) are rendered and written at once; a reader
// that finds every turn taken for longer than the wait is answered 429 Throttled with
// Retry-After, and is served again once a turn is free (issue 24, item 9: 64 readers of
// /metrics at 10,000 instances took the fake cloud to 1,248 MiB, 128 to 2,014 MiB).
func TestHeavyReadsAreBounded(t *testing.T) {
	const turns = 2
	s, err := New(Config{Auth: AuthNone, MaxHeavyReads: turns})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.heavy.wait = time.Millisecond // the turns below are held for the whole request
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	// Every turn taken, as by readers still writing their answers.
	for range turns {
		s.heavy.slots <- struct{}{}
	}
	for _, path := range []string{"/metrics", "/v1/instances"} {
		rec := get(path)
		if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
			t.Fatalf("GET %s with every turn taken: %d (Retry-After %q) %s, want 429 with Retry-After", path, rec.Code, rec.Header().Get("Retry-After"), rec.Body)
		}
		if !strings.Contains(rec.Body.String(), string(cloud.CodeThrottled)) {
			t.Fatalf("GET %s with every turn taken: %s, want Throttled", path, rec.Body)
		}
	}
	// Other reads are not heavy: they do not wait for a turn.
	if rec := get("/v1/quotas"); rec.Code != http.StatusOK {
		t.Fatalf("GET /v1/quotas with every heavy turn taken: %d %s", rec.Code, rec.Body)
	}
	<-s.heavy.slots // one reader finished
	for _, path := range []string{"/metrics", "/v1/instances"} {
		if rec := get(path); rec.Code != http.StatusOK {
			t.Fatalf("GET %s with a turn free: %d %s", path, rec.Code, rec.Body)
		}
	}
	<-s.heavy.slots

	// Many readers at once: every one is served (they wait for a turn), and every turn is
	// given back.
	s.heavy.wait = heavyReadWait
	var wg sync.WaitGroup
	codes := make(chan int, 32)
	for range cap(codes) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- get("/metrics").Code
		}()
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Fatalf("one of %d parallel readers: %d, want 200", cap(codes), c)
		}
	}
	if n := len(s.heavy.slots); n != 0 {
		t.Fatalf("%d turns still held after every reader finished", n)
	}
}
