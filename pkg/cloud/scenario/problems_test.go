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
		{"a refused fault step: its deleteFault is not judged", `name: x
steps:
  - at: 10s
    reset: true
  - at: 1s
    fault: {ref: f, operation: "*", error: Unavailable, bogus: 1}
  - at: 5s
    deleteFault: f
`, []string{
			`scenario: line 6, steps[1] (at 1s): unknown field "bogus"`,
		}},
		// The decoder said `yaml: unmarshal errors:` and `key "reset" already set in map`,
		// on two lines, and stopped there.
		{"a field set twice, then an unknown one", `name: x
steps:
  - at: 1s
    reset: true
    reset: false
  - at: 2s
    rset: true
`, []string{
			`scenario: line 5, steps[0].reset: set twice (first on line 4)`,
			`line 7, steps[1] (at 2s): unknown field "rset" (did you mean "reset"?)`,
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

// TestParseBoundsItsProblems: a file of many values that do not fit gets the first 20 and a
// line saying that more may follow, however large the file (one check of the parsed file
// finds them all; there is no decoding again per problem).
func TestParseBoundsItsProblems(t *testing.T) {
	tests := []struct {
		name      string
		fileBytes int
		min, max  int // problems reported before the line saying more may follow
	}{
		{"a small file: 20", 0, 20, 20},
		{"a file of MaxFileBytes: 20", scenario.MaxFileBytes - 100, 20, 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			b.WriteString("name: x\nsteps:\n")
			for i := 0; i < 50 || b.Len() < tt.fileBytes; i++ {
				fmt.Fprintf(&b, "  - at: 1s\n    reset: true\n    bogus%d: 1\n", i)
			}
			_, err := scenario.Parse([]byte(b.String()))
			if err == nil {
				t.Fatal("accepted")
			}
			lines := strings.Split(err.Error(), "\n")
			n := len(lines) - 1
			if n < tt.min || n > tt.max || lines[n] != "more problems may follow: fix these and parse again" {
				t.Fatalf("%d lines, last %q; want %d to %d problems and a line saying more may follow", len(lines), lines[n], tt.min, tt.max)
			}
		})
	}
}

// TestParseProblemsThroughAliases: a refused value that holds an anchor is dropped with it;
// the alias left behind is no problem of the file's, and the problem found is still named.
func TestParseProblemsThroughAliases(t *testing.T) {
	_, err := scenario.Parse([]byte("name: x\nsteps:\n  - at: 1s\n    note: &n [a]\n    reset: true\n  - at: 2s\n    note: *n\n    reset: true\n"))
	if err == nil {
		t.Fatal("accepted")
	}
	want := `scenario: line 4, steps[0].note: want a string (quote a value that YAML would read as a number or true/false), got a list`
	if got := strings.Split(err.Error(), "\n")[0]; got != want {
		t.Errorf("error:\n%s\nwant its first line:\n%s", err, want)
	}
	if strings.Contains(err.Error(), "anchor") {
		t.Errorf("error %q speaks of an anchor the decoder dropped", err)
	}
}

// TestParseReadsTheFirstDocument: what follows a "---" is not read, as before the node tree
// was checked: the first document is the scenario.
func TestParseReadsTheFirstDocument(t *testing.T) {
	sc, err := scenario.Parse([]byte("name: x\nsteps:\n  - at: 1s\n    reset: true\n---\nname: [y]\nbogus: 1\n"))
	if err != nil || sc.Name != "x" || len(sc.Steps) != 1 {
		t.Fatalf("Parse: %v, %v; want the first document", sc, err)
	}
}
