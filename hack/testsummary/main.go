// Command testsummary reads `go test -json` on stdin and prints what `go test` without -v
// would: each package's ok/FAIL line, build errors, and the whole output of every failed
// test; then one summary line: packages, tests passed, failed, skipped, and why they were
// skipped (each t.Skip message with its count). `make test` and `make test-all` pipe their
// go test runs through it.
//
//	go test -json ./... | testsummary -label 'main module' -record _output/test-summary.jsonl
//	testsummary -total _output/test-summary.jsonl -also 'csi-sanity'   # one line for all recorded runs
//
// It exits 1 when a test or package failed, so a pipeline with pipefail fails as go test
// would.
package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fakecloud/fakecloud-csi/internal/plural"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(1)
	}
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string `json:"Action"`
	Package    string `json:"Package"`
	ImportPath string `json:"ImportPath"`
	Test       string `json:"Test"`
	Output     string `json:"Output"`
}

// Summary is what one go test run did; -record appends it as a JSON line.
type Summary struct {
	Label string `json:"label"`
	// Packages counts the packages go test reported; NoTests those without test files.
	Packages int `json:"packages"`
	NoTests  int `json:"noTests"`
	// FailedPackages counts packages that failed (a failed test, a build error, a panic).
	FailedPackages int `json:"failedPackages"`
	// Passed, Failed and Skipped count tests and subtests.
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
	// SkipReasons counts skipped tests by their t.Skip message.
	SkipReasons map[string]int `json:"skipReasons"`
}

// Bounds: a test's kept output (printed when it fails) and the skip reasons a line names.
const (
	maxTestOutput = 1 << 20
	maxReasons    = 6
	maxReasonLen  = 100
)

func run(_ context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("testsummary", flag.ContinueOnError)
	label := fs.String("label", "go test", "what this run tests, for the summary line")
	record := fs.String("record", "", "append this run's summary as a JSON line to FILE")
	total := fs.String("total", "", "print one line for the runs recorded in FILE, then exit")
	also := fs.String("also", "", "with -total: the other checks that passed, named at the end of the line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *total != "" {
		return printTotal(*total, *also, stdout)
	}
	ticker := time.NewTicker(checkEvery)
	defer ticker.Stop()
	out, stop := stillRunning(stdout, ticker.C, time.Now(), time.Now)
	s, err := summarize(stdin, out, *label)
	stop()
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(stdout, s.line()); err != nil {
		return err
	}
	if *record != "" {
		if err := appendRecord(*record, s); err != nil {
			return err
		}
	}
	if s.Failed > 0 || s.FailedPackages > 0 {
		return fmt.Errorf("%s: %s and %s failed", s.Label, plural.Of(s.Failed, "test", "tests"), plural.Of(s.FailedPackages, "package", "packages"))
	}
	return nil
}

// skipLine is the line t.Skip writes: "    file_test.go:12: reason".
var skipLine = regexp.MustCompile(`^\s+[\w.-]+\.go:\d+: (.*)$`)

// quietPeriod is how long go test may print nothing before run says it is still going, and
// checkEvery how often run looks: a cold compile of client-go prints nothing for minutes, and
// README promises no step is silent for more than 30 s (quietPeriod + checkEvery).
const (
	quietPeriod = 25 * time.Second
	checkEvery  = 5 * time.Second
)

// stillRunning writes a line to out at the first tick of ticks (each the time it was sent)
// that comes quietPeriod or more after the last line (its own included) written through the
// returned writer, or after start if none was; stop ends it. The time of a write is now().
func stillRunning(out io.Writer, ticks <-chan time.Time, start time.Time, now func() time.Time) (w io.Writer, stop func()) {
	a := &activity{out: out, now: now, last: start}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case t := <-ticks:
				a.mu.Lock()
				if t.Sub(a.last) >= quietPeriod {
					fmt.Fprintf(a.out, "  ... go test still compiling or testing (%s elapsed, %s done)\n", t.Sub(start).Round(time.Second), plural.Of(a.packages, "package", "packages"))
					a.last = t
				}
				a.mu.Unlock()
			}
		}
	}()
	return a, func() { close(done); <-finished }
}

// activity is out, noting when it was last written to and counting the package lines ("ok",
// "FAIL", "?").
type activity struct {
	mu       sync.Mutex
	out      io.Writer
	now      func() time.Time
	last     time.Time
	packages int
}

func (a *activity) Write(b []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.last = a.now()
	for l := range strings.Lines(string(b)) {
		if strings.HasPrefix(l, "ok  ") || strings.HasPrefix(l, "FAIL\t") || strings.HasPrefix(l, "?   ") {
			a.packages++
		}
	}
	return a.out.Write(b)
}

// summarize copies what go test without -v would print to out and counts the run.
func summarize(in io.Reader, out io.Writer, label string) (Summary, error) {
	s := Summary{Label: label, SkipReasons: map[string]int{}}
	outputs := map[string]*strings.Builder{} // package + test → its output so far
	key := func(e event) string { return e.Package + "\x00" + e.Test }
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			// Not an event (go vet's or the linker's own messages): pass it on.
			if _, err := fmt.Fprintln(out, sc.Text()); err != nil {
				return s, err
			}
			continue
		}
		switch {
		case e.Action == "build-output":
			if _, err := io.WriteString(out, e.Output); err != nil {
				return s, err
			}
		case e.Test == "" && e.Action == "output":
			// The package's own lines: "ok  pkg 1.2s", "FAIL pkg", "? pkg [no test files]",
			// a panic outside a test. "PASS" alone is -v's; go test without it prints none.
			if strings.TrimSpace(e.Output) == "PASS" {
				continue
			}
			if _, err := io.WriteString(out, e.Output); err != nil {
				return s, err
			}
		case e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
			s.Packages++
			switch e.Action {
			case "fail":
				s.FailedPackages++
			case "skip":
				s.NoTests++
			}
		case e.Test != "" && e.Action == "output":
			b := outputs[key(e)]
			if b == nil {
				b = &strings.Builder{}
				outputs[key(e)] = b
			}
			if b.Len() < maxTestOutput {
				b.WriteString(e.Output)
			}
		case e.Test != "" && e.Action == "pass":
			s.Passed++
			delete(outputs, key(e))
		case e.Test != "" && e.Action == "skip":
			s.Skipped++
			s.SkipReasons[skipReason(outputs[key(e)])]++
			delete(outputs, key(e))
		case e.Test != "" && e.Action == "fail":
			s.Failed++
			if b := outputs[key(e)]; b != nil {
				if _, err := io.WriteString(out, b.String()); err != nil {
					return s, err
				}
			}
			delete(outputs, key(e))
		}
	}
	if err := sc.Err(); err != nil {
		return s, fmt.Errorf("read go test -json: %w", err)
	}
	return s, nil
}

// skipReason is the last t.Skip-shaped line of a skipped test's output, shortened.
func skipReason(b *strings.Builder) string {
	if b == nil {
		return "no reason given"
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	for _, l := range slices.Backward(lines) {
		if m := skipLine.FindStringSubmatch(l); m != nil {
			r := strings.TrimSpace(m[1])
			if len(r) > maxReasonLen {
				r = r[:maxReasonLen] + "…"
			}
			return r
		}
	}
	return "no reason given"
}

// line is the run's one summary line.
func (s Summary) line() string {
	verdict := "ok"
	if s.Failed > 0 || s.FailedPackages > 0 {
		verdict = "FAILED"
	}
	return fmt.Sprintf("== %s: %s: %s (%d without tests), %s passed, %d failed, %d skipped%s",
		s.Label, verdict, plural.Of(s.Packages, "package", "packages"), s.NoTests, plural.Of(s.Passed, "test", "tests"), s.Failed, s.Skipped, reasons(s.SkipReasons))
}

// reasons lists skip reasons, most frequent first, at most maxReasons of them.
func reasons(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	type kv struct {
		reason string
		n      int
	}
	var all []kv
	for r, n := range m {
		all = append(all, kv{r, n})
	}
	slices.SortFunc(all, func(a, b kv) int { return cmp.Or(cmp.Compare(b.n, a.n), cmp.Compare(a.reason, b.reason)) })
	var parts []string
	for i, e := range all {
		if i == maxReasons {
			parts = append(parts, fmt.Sprintf("%d more reasons", len(all)-maxReasons))
			break
		}
		parts = append(parts, fmt.Sprintf("%d× %s", e.n, e.reason))
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

func appendRecord(path string, s Summary) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return errors.Join(fmt.Errorf("record: %w", err), f.Close())
	}
	_, err = f.Write(append(b, '\n'))
	return errors.Join(err, f.Close())
}

// printTotal prints one line adding up the runs recorded in path, naming also (the checks
// that are not go tests) at its end.
func printTotal(path, also string, out io.Writer) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("total: %w", err)
	}
	t := Summary{SkipReasons: map[string]int{}}
	var labels []string
	for l := range strings.Lines(string(data)) {
		var s Summary
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			return fmt.Errorf("total: %s: %w", path, err)
		}
		labels = append(labels, s.Label)
		t.Packages += s.Packages
		t.NoTests += s.NoTests
		t.FailedPackages += s.FailedPackages
		t.Passed += s.Passed
		t.Failed += s.Failed
		t.Skipped += s.Skipped
		for r, n := range s.SkipReasons {
			t.SkipReasons[r] += n
		}
	}
	t.Label = fmt.Sprintf("all go tests (%s)", strings.Join(labels, "; "))
	line := t.line()
	if also != "" {
		line += "; also passed: " + also
	}
	_, err = fmt.Fprintln(out, line)
	return err
}
