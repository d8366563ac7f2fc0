// Command testsummary adds up the go test runs of `make test` and `make test-all` into the one
// line they end with: packages, tests passed, failed, skipped, and why they were skipped (each
// t.Skip message with its count, most frequent first). gotestsum runs the tests and prints
// each package's ok/FAIL line, the whole output of every failed test and a DONE line per run;
// it writes each run's `go test -json` events to a file (--jsonfile), and this reads them. It
// is what gotestsum has no equivalent of: one line over several runs, and skip reasons grouped
// (gotestsum lists every skipped test with its output; CI prints the grouped line).
//
//	testsummary -also 'csi-sanity' _output/gotest/main.json _output/gotest/kind.json
//
// Each file's name (without .json) labels its run. It exits 1 when a test or package failed.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/fakecloud/fakecloud-csi/internal/plural"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(1)
	}
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string `json:"Action"`
	Package string `json:"Package"`
	Test    string `json:"Test"`
	Output  string `json:"Output"`
}

// Summary is what the go test runs did.
type Summary struct {
	// Packages counts the packages go test reported; NoTests those without test files.
	Packages int
	NoTests  int
	// FailedPackages counts packages that failed (a failed test, a build error, a panic).
	FailedPackages int
	// Passed, Failed and Skipped count tests and subtests.
	Passed  int
	Failed  int
	Skipped int
	// SkipReasons counts skipped tests by their t.Skip message.
	SkipReasons map[string]int
}

// Bounds: a test's output kept to find its skip reason, and the skip reasons a line names.
const (
	maxTestOutput = 64 << 10
	maxReasons    = 6
	maxReasonLen  = 100
)

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("testsummary", flag.ContinueOnError)
	also := fs.String("also", "", "the other checks that passed, named at the end of the line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("usage: testsummary [-also TEXT] FILE.json... (gotestsum --jsonfile files)")
	}
	s := Summary{SkipReasons: map[string]int{}}
	var labels []string
	for _, path := range fs.Args() {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		err = s.add(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		labels = append(labels, strings.TrimSuffix(filepath.Base(path), ".json"))
	}
	line := s.line("all go tests (" + strings.Join(labels, "; ") + ")")
	if *also != "" {
		line += "; also passed: " + *also
	}
	if _, err := fmt.Fprintln(stdout, line); err != nil {
		return err
	}
	if s.Failed > 0 || s.FailedPackages > 0 {
		return fmt.Errorf("%s and %s failed", plural.Of(s.Failed, "test", "tests"), plural.Of(s.FailedPackages, "package", "packages"))
	}
	return nil
}

// skipLine is the line t.Skip writes: "    file_test.go:12: reason".
var skipLine = regexp.MustCompile(`^\s+[\w.-]+\.go:\d+: (.*)$`)

// add counts the events of one go test run read from in. Lines that are not events (gotestsum
// writes only events; go vet's or the linker's messages would not be) are ignored.
func (s *Summary) add(in io.Reader) error {
	outputs := map[string]*strings.Builder{} // package + test → its output so far
	key := func(e event) string { return e.Package + "\x00" + e.Test }
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			continue
		}
		switch {
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
			delete(outputs, key(e))
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read go test -json: %w", err)
	}
	return nil
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

// line is the runs' one summary line.
func (s Summary) line(label string) string {
	verdict := "ok"
	if s.Failed > 0 || s.FailedPackages > 0 {
		verdict = "FAILED"
	}
	return fmt.Sprintf("== %s: %s: %s (%d without tests), %s passed, %d failed, %d skipped%s",
		label, verdict, plural.Of(s.Packages, "package", "packages"), s.NoTests, plural.Of(s.Passed, "test", "tests"), s.Failed, s.Skipped, reasons(s.SkipReasons))
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
