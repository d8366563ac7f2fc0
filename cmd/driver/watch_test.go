package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestWatch: one line per plugin per round, with the reporter's numbers and the cloud's facts;
// a plugin that does not answer with its state says why, and the others still show.
func TestWatch(t *testing.T) {
	plugin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/debug/capacity":
			_, _ = w.Write([]byte(`{"nodeId":"node-a2","mode":"ramping","reported":3,"target":5,
				"inputs":{"instanceId":"node-a2","attachLimit":8,"outOfBandSlots":1,"attached":2,"quotaHeadroom":3,"revision":42},
				"stabilityWindow":"2m0s","damping":2,"lastErrorClass":"server","lastError":"GetCapacity: 503 Unavailable"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer plugin.Close()
	controller := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no capacity reporter in mode controller", http.StatusNotFound)
	}))
	defer controller.Close()

	var out bytes.Buffer
	err := run(context.Background(), []string{"watch", "--count=2", "--interval=100ms", plugin.URL + "/", controller.URL}, &out, &out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 2 rounds of 2:\n%s", len(lines), out.String())
	}
	for _, w := range []string{"node-a2", "reported=3 target=5 mode=ramping",
		"(cloud: limit 8, out of band 1, attached 2, quota headroom 3, revision 42)", "window 2m0s (flap damping ×4)",
		"last lookup failed: server (GetCapacity: 503 Unavailable)"} {
		if !strings.Contains(lines[0], w) || !strings.Contains(lines[2], w) {
			t.Errorf("plugin lines lack %q:\n%s", w, out.String())
		}
	}
	// It answered: not "unreachable" (that was the defect), but what it is not.
	if !strings.Contains(lines[1], controller.URL+" is not a node plugin's debug endpoint: /debug/capacity answered 404: no capacity reporter in mode controller (make run's node plugins listen on 127.0.0.1:9809 and up") {
		t.Errorf("controller line %q", lines[1])
	}

	// The fake cloud's URL given by mistake: its API's JSON 404, named as such.
	fakeCloud := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"code":"NotFound","message":"no route GET /debug/capacity","retryable":false,"requestId":"req-1"}`))
	}))
	defer fakeCloud.Close()
	out.Reset()
	if err := run(context.Background(), []string{"watch", "--count=1", fakeCloud.URL}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if w := fakeCloud.URL + " answers like the fake cloud's API (404 NotFound), not a node plugin's /debug/capacity: watch a node plugin's --http-addr (make run's listen on 127.0.0.1:9809 and up"; !strings.Contains(out.String(), w) || strings.Contains(out.String(), "unreachable") {
		t.Errorf("fake cloud line %q, want %q", out.String(), w)
	}

	for _, args := range [][]string{{"watch"}, {"watch", "ftp://x"}, {"watch", "--interval=1ms", plugin.URL}} {
		if err := run(context.Background(), args, &out, &out); err == nil {
			t.Errorf("run %v accepted", args)
		}
	}
}
