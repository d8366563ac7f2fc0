package scenario

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestParseWarnsOfStepsOutOfTimeOrder: a file whose steps are not in time order runs sorted
// (documented), but Parse used to sort it silently, so that a reader of the file expected
// another sequence (issue 26's newcomer trial). It now names each step listed after a later
// one, with its line; equal offsets and expanded quota noise are in order.
func TestParseWarnsOfStepsOutOfTimeOrder(t *testing.T) {
	many := "name: many\nsteps:\n  - at: 1h\n    reset: true\n"
	for range maxWarnings + 2 {
		many += "  - at: 1s\n    reset: true\n"
	}
	tests := []struct {
		name, file string
		want       []string
	}{
		{"in order", "name: a\nsteps:\n  - at: 0s\n    reset: true\n  - at: 0s\n    clearFaults: true\n  - at: 5s\n    reset: true\n", nil},
		{"quota noise expanded around a later step", "name: n\nsteps:\n  - at: 0s\n    quotaNoise: {quota: attachments, base: 5, amplitude: 1, every: 5s, for: 20s}\n" +
			"  - at: 10s\n    reset: true\n", nil},
		{"one step back", "name: b\nsteps:\n  - at: 1m\n    reset: true\n  - at: 10s\n    clearFaults: true\n  - at: 2m\n    reset: true\n",
			[]string{"line 5, steps[1] (at 10s): listed after steps[0] (at 1m0s) but runs before it (steps run in order of at:, not of the file)"}},
		{"each named against the latest step above it", "name: c\nsteps:\n  - at: 1m\n    reset: true\n  - at: 2m\n    reset: true\n" +
			"  - at: 90s\n    reset: true\n  - at: 30s\n    reset: true\n",
			[]string{"line 7, steps[2] (at 1m30s): listed after steps[1] (at 2m0s) but runs before it (steps run in order of at:, not of the file)",
				"line 9, steps[3] (at 30s): listed after steps[1] (at 2m0s) but runs before it (steps run in order of at:, not of the file)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc, err := Parse([]byte(tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(sc.Warnings, tt.want) {
				t.Errorf("warnings\n%s\nwant\n%s", strings.Join(sc.Warnings, "\n"), strings.Join(tt.want, "\n"))
			}
			if !slices.IsSortedFunc(sc.Steps, func(a, b Step) int { return int(a.At - b.At) }) {
				t.Errorf("steps not sorted: %v", sc)
			}
		})
	}
	t.Run("bounded", func(t *testing.T) {
		sc, err := Parse([]byte(many))
		if err != nil {
			t.Fatal(err)
		}
		if len(sc.Warnings) != maxWarnings+1 || sc.Warnings[maxWarnings] != fmt.Sprintf("and %d more steps listed out of time order", 2) {
			t.Errorf("%d warnings, last %q; want %d and a count of the rest", len(sc.Warnings), sc.Warnings[len(sc.Warnings)-1], maxWarnings+1)
		}
	})
}
