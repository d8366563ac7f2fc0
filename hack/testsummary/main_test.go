package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// events is go test -json of two packages: p1 with a pass, a skip (with its reason), a
// subtest skipped for another reason and a failure; p2 without test files.
const events = `{"Action":"start","Package":"p1"}
{"Action":"run","Package":"p1","Test":"TestA"}
{"Action":"output","Package":"p1","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"p1","Test":"TestA","Output":"noise of a passing test\n"}
{"Action":"pass","Package":"p1","Test":"TestA"}
{"Action":"run","Package":"p1","Test":"TestMount"}
{"Action":"output","Package":"p1","Test":"TestMount","Output":"    mount_test.go:12: real bind mounts need root (CAP_SYS_ADMIN)\n"}
{"Action":"output","Package":"p1","Test":"TestMount","Output":"--- SKIP: TestMount (0.00s)\n"}
{"Action":"skip","Package":"p1","Test":"TestMount"}
{"Action":"run","Package":"p1","Test":"TestT/sub"}
{"Action":"output","Package":"p1","Test":"TestT/sub","Output":"    t_test.go:3: real bind mounts need root (CAP_SYS_ADMIN)\n"}
{"Action":"skip","Package":"p1","Test":"TestT/sub"}
{"Action":"run","Package":"p1","Test":"TestLoop"}
{"Action":"output","Package":"p1","Test":"TestLoop","Output":"    loop_test.go:7: no /dev/loop-control\n"}
{"Action":"skip","Package":"p1","Test":"TestLoop"}
{"Action":"run","Package":"p1","Test":"TestB"}
{"Action":"output","Package":"p1","Test":"TestB","Output":"    b_test.go:9: got 2, want 3\n"}
{"Action":"output","Package":"p1","Test":"TestB","Output":"--- FAIL: TestB (0.00s)\n"}
{"Action":"fail","Package":"p1","Test":"TestB"}
{"Action":"output","Package":"p1","Output":"FAIL\n"}
{"Action":"output","Package":"p1","Output":"FAIL\tp1\t0.01s\n"}
{"Action":"fail","Package":"p1"}
{"Action":"output","Package":"p2","Output":"?   \tp2\t[no test files]\n"}
{"Action":"skip","Package":"p2"}
not json: a vet message
`

func TestSummarize(t *testing.T) {
	var out bytes.Buffer
	s, err := summarize(strings.NewReader(events), &out, "unit")
	if err != nil {
		t.Fatal(err)
	}
	want := Summary{Label: "unit", Packages: 2, NoTests: 1, FailedPackages: 1, Passed: 1, Failed: 1, Skipped: 3,
		SkipReasons: map[string]int{"real bind mounts need root (CAP_SYS_ADMIN)": 2, "no /dev/loop-control": 1}}
	if s.Label != want.Label || s.Packages != want.Packages || s.NoTests != want.NoTests || s.FailedPackages != want.FailedPackages ||
		s.Passed != want.Passed || s.Failed != want.Failed || s.Skipped != want.Skipped || len(s.SkipReasons) != 2 ||
		s.SkipReasons["real bind mounts need root (CAP_SYS_ADMIN)"] != 2 || s.SkipReasons["no /dev/loop-control"] != 1 {
		t.Fatalf("summary %+v, want %+v", s, want)
	}
	// Printed: the failed test's output and the package lines, not a passing test's noise.
	got := out.String()
	for _, w := range []string{"got 2, want 3", "--- FAIL: TestB", "FAIL\tp1\t0.01s", "[no test files]", "not json: a vet message"} {
		if !strings.Contains(got, w) {
			t.Errorf("output lacks %q:\n%s", w, got)
		}
	}
	for _, bad := range []string{"noise of a passing test", "--- SKIP"} {
		if strings.Contains(got, bad) {
			t.Errorf("output has %q:\n%s", bad, got)
		}
	}
	line := s.line()
	for _, w := range []string{"unit: FAILED", "2 packages (1 without tests)", "1 test passed, 1 failed, 3 skipped",
		"(2× real bind mounts need root (CAP_SYS_ADMIN); 1× no /dev/loop-control)"} {
		if !strings.Contains(line, w) {
			t.Errorf("line %q lacks %q", line, w)
		}
	}
}

// TestRecordAndTotal: run fails when a test failed, records the run, and -total adds the
// recorded runs up into one line.
func TestRecordAndTotal(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "runs.jsonl")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-label=a", "-record=" + rec}, strings.NewReader(events), &out); err == nil {
		t.Fatal("run passed a run with a failed test")
	}
	pass := `{"Action":"run","Package":"p3","Test":"TestC"}
{"Action":"pass","Package":"p3","Test":"TestC"}
{"Action":"pass","Package":"p3"}
`
	if err := run(context.Background(), []string{"-label=b", "-record=" + rec}, strings.NewReader(pass), &out); err != nil {
		t.Fatalf("run of a passing run: %v", err)
	}
	if !strings.Contains(out.String(), "== b: ok: 1 package (0 without tests), 1 test passed, 0 failed, 0 skipped\n") {
		t.Fatalf("output %q lacks b's line", out.String())
	}
	out.Reset()
	if err := run(context.Background(), []string{"-total=" + rec, "-also=csi-sanity"}, strings.NewReader(""), &out); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "== all go tests (a; b): FAILED: 3 packages (1 without tests), 2 tests passed, 1 failed, 3 skipped"; !strings.HasPrefix(got, want) ||
		!strings.HasSuffix(got, "; also passed: csi-sanity\n") {
		t.Fatalf("total %q, want prefix %q", got, want)
	}
	if _, err := os.Stat(rec); err != nil {
		t.Fatal(err)
	}
}

// TestStillRunning: a quiet period gets one line saying how far go test got; a period with
// output gets none.
func TestStillRunning(t *testing.T) {
	var out syncBuffer
	ticks := make(chan time.Time)
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	now := start
	at := func(d time.Duration) { mu.Lock(); now = start.Add(d); mu.Unlock() }
	w, stop := stillRunning(&out, ticks, start, func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	at(2 * time.Second)
	if _, err := io.WriteString(w, "ok  \tp1\t1.0s\n"); err != nil {
		t.Fatal(err)
	}
	// Ticks come every checkEvery; a line only once quietPeriod has passed since the last line.
	for _, d := range []time.Duration{5, 10, 15, 20, 25} {
		at(d * time.Second)
		ticks <- now // under 25 s since the write at 2 s: no line
	}
	at(27 * time.Second)
	ticks <- now // 25 s quiet: one line
	at(30 * time.Second)
	ticks <- now // 3 s after that line: none
	at(52 * time.Second)
	ticks <- now // 25 s after it: one more
	stop()
	want := "ok  \tp1\t1.0s\n  ... go test still compiling or testing (27s elapsed, 1 package done)\n" +
		"  ... go test still compiling or testing (52s elapsed, 1 package done)\n"
	if got := out.String(); got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
