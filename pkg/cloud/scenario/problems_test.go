package scenario_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud/scenario"
)

// TestParseReportsEveryProblemInFileOrder: a file with several mistakes gets them all, one a
// line, in the order of the file, decoding problems and checks alike (issue 26, "the first
// hour"). Before, Parse stopped at the decoder's first refusal, which is not the file's first
// (the decoder reads fields in alphabetical order), and a refusal hid the checks.
func TestParseReportsEveryProblemInFileOrder(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string // the error's lines, whole, in order
	}{
		{"each kind of problem, in file order", `name: x
steps:
  - at: 1s
    reset: true
    bogus: 1
  - at: 2s
    quotas: {attachments: many}
  - at: 3s
  - at: soon
    reset: true
  - at: 4s
    instance: {id: n, outOfBandSlot: 1}
`, []string{
			`scenario: line 5, steps[0] (at 1s): unknown field "bogus"`,
			`line 7, steps[1].quotas.attachments: want a whole number, got "many"`,
			`line 8, steps[2] (at 3s): no action (want one of instance, quotas, fault, deleteFault, clearFaults, reset, quotaNoise)`,
			`line 9, steps[3].at: want a duration with its unit like 30s, 2m or 1m30s, got "soon"`,
			`line 12, steps[4] (at 4s): unknown field "outOfBandSlot" (did you mean "outOfBandSlots"?)`,
		}},
		{"a later problem the decoder meets first", `name: x
steps:
  - at: 1s
    zzz: 1
    reset: true
  - at: 2s
    aaa: 1
    reset: true
`, []string{
			`scenario: line 4, steps[0] (at 1s): unknown field "zzz"`,
			`line 7, steps[1] (at 2s): unknown field "aaa"`,
		}},
		{"the same unknown field in two steps: each its own line", `name: x
steps:
  - at: 1s
    reset: true
    bogus: 1
  - at: 2s
    reset: true
    bogus: 2
`, []string{
			`scenario: line 5, steps[0] (at 1s): unknown field "bogus"`,
			`line 8, steps[1] (at 2s): unknown field "bogus"`,
		}},
		{"a wrong type at the top, a check of a step", `name: [x]
steps:
  - at: 1s
  - at: 2s
    reset: true
`, []string{
			`scenario: line 1, name: want a string (quote a value that YAML would read as a number or true/false), got a list`,
			`line 3, steps[0] (at 1s): no action (want one of instance, quotas, fault, deleteFault, clearFaults, reset, quotaNoise)`,
		}},
		{"two problems in one step", `name: x
steps:
  - at: 1s
    reset: true
    zzz: 1
    note: [a]
`, []string{
			`scenario: line 5, steps[0] (at 1s): unknown field "zzz"`,
			`line 6, steps[0].note: want a string (quote a value that YAML would read as a number or true/false), got a list`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := scenario.Parse([]byte(tt.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			if got := strings.Split(err.Error(), "\n"); strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("error:\n%s\nwant:\n%s", err, strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestParseBoundsItsProblems: a file of many refused values costs a bounded number of
// decodings and says that it stopped looking.
func TestParseBoundsItsProblems(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: x\nsteps:\n")
	for i := range 50 {
		fmt.Fprintf(&b, "  - at: 1s\n    reset: true\n    bogus%d: 1\n", i)
	}
	_, err := scenario.Parse([]byte(b.String()))
	if err == nil {
		t.Fatal("accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 21 || !strings.Contains(lines[20], "no more problems looked for after 20") {
		t.Fatalf("%d lines, last %q; want 20 problems and a line saying the search stopped", len(lines), lines[len(lines)-1])
	}
}
