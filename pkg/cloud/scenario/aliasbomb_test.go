package scenario_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud/scenario"
)

// aliasBomb is a scenario file of about strBytes+8*aliases bytes whose one string, strBytes
// long, is aliased aliases times: strBytes*aliases bytes once expanded.
func aliasBomb(strBytes, aliases int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: bomb\nx: &s %q\nsteps:\n", strings.Repeat("a", strBytes))
	for range aliases {
		b.WriteString("  - *s\n")
	}
	return b.String()
}

// TestParseRefusesAliasBombBeforeExpanding: one 100 KB string aliased 2,000 times (200 MB
// once expanded) is refused as ErrExpandedTooLarge, having allocated a bounded amount: the
// aliases are measured, never expanded (issue 24, item 8; at 200 KB × 8,000 the fake cloud
// was OOM-killed at 2 GiB). The classic billion laughs is refused the same way, and a file
// that uses aliases within the bound still parses.
func TestParseRefusesAliasBombBeforeExpanding(t *testing.T) {
	const allocBound = 32 << 20 // bytes; the file is 116 KB, its expansion 200 MB
	bomb := []byte(aliasBomb(100_000, 2_000))
	if len(bomb) > scenario.MaxFileBytes {
		t.Fatalf("bomb of %d bytes: over MaxFileBytes, refused for its size alone", len(bomb))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := scenario.Parse(bomb)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, scenario.ErrExpandedTooLarge) {
		t.Fatalf("Parse(alias bomb): %v, want ErrExpandedTooLarge", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > allocBound {
		t.Fatalf("Parse(alias bomb) allocated %d MiB, want at most %d MiB: the aliases were expanded", got>>20, allocBound>>20)
	}

	laughs := "name: lol\na: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		laughs += fmt.Sprintf("%s: &%s [*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s]\n", n, n, prev, prev, prev, prev, prev, prev, prev, prev, prev)
		prev = n
	}
	laughs += "steps: *i\n"
	if _, err := scenario.Parse([]byte(laughs)); !errors.Is(err, scenario.ErrExpandedTooLarge) {
		t.Errorf("Parse(billion laughs): %v, want ErrExpandedTooLarge", err)
	}

	// An alias to a node containing it: no expansion is finite.
	if _, err := scenario.Parse([]byte("name: x\nsteps: &s\n  - at: 1s\n    reset: true\n  - *s\n")); err == nil {
		t.Error("Parse(recursive alias): no error")
	}

	ok := "name: ok\nsteps:\n  - at: 1s\n    note: &n \"the same note\"\n    reset: true\n  - at: 2s\n    note: *n\n    clearFaults: true\n"
	sc, err := scenario.Parse([]byte(ok))
	if err != nil {
		t.Fatalf("Parse(aliases within the bound): %v", err)
	}
	if len(sc.Steps) != 2 || sc.Steps[1].Note != "the same note" {
		t.Fatalf("Parse(aliases within the bound): %s", sc)
	}
}

// TestParseSyntaxErrorIsNoAliasBomb: a file that does not parse is refused for its syntax, with
// its line, not as ErrExpandedTooLarge (413 at the fake cloud) because it holds a '*', which
// most scenarios do (operation: "*").
func TestParseSyntaxErrorIsNoAliasBomb(t *testing.T) {
	_, err := scenario.Parse([]byte("name: x\nsteps:\n  - at: 1s\n    fault: {operation: \"*\", error: Unavailable}\n\treset: true\n"))
	if err == nil || errors.Is(err, scenario.ErrExpandedTooLarge) || !strings.Contains(err.Error(), "line 5: YAML does not allow tabs for indentation") {
		t.Fatalf("Parse: %v, want the tab on line 5, not ErrExpandedTooLarge", err)
	}
}
