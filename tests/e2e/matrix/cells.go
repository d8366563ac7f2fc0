// Package matrix is the KEP-4876 compatibility matrix (docs/compatibility.md): cells of
// component versions and settings (cells.json), one short set of checks per cell run on the
// local cluster with those versions (RunCell), the results file every run appends one row per
// cell to (results.json), and the docs table written from it (WriteDoc). A cell is marked by
// what was measured in it, never by what it should do: a cell without a row is "planned".
package matrix

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
)

// PinnedAttacher is the external-attacher version of the local cluster's pinned tools module
// (tests/e2e/localcluster/tools/go.mod); a cell at this version runs the pinned binary.
const PinnedAttacher = "v4.13.0"

// maxCells bounds cells.json.
const maxCells = 64

// Cell is one combination of versions and settings.
type Cell struct {
	// Name identifies the cell in results.json and MATRIX_CELLS: [a-z0-9.-], ≤ 80 bytes.
	Name string `json:"name"`
	// ControlPlane, Kubelet are Kubernetes versions (v1.x.y); Attacher an external-attacher
	// version (v4.x.y).
	ControlPlane string `json:"controlPlane"`
	Kubelet      string `json:"kubelet"`
	Attacher     string `json:"attacher"`
	// KubeletGates, APIServerGates, AttacherGates are --feature-gates values ("": defaults).
	KubeletGates   string `json:"kubeletGates,omitempty"`
	APIServerGates string `json:"apiServerGates,omitempty"`
	AttacherGates  string `json:"attacherGates,omitempty"`
	// NodeLabels are extra labels of every Node (e.g. the driver's mode label).
	NodeLabels string `json:"nodeLabels,omitempty"`
	// PeriodSeconds is the CSIDriver's nodeAllocatableUpdatePeriodSeconds at start, before
	// any node plugin reads it (deploy/kind sets 10): 0 is unset, otherwise 10..86400.
	PeriodSeconds int64 `json:"periodSeconds"`
	// PeriodChanges set the period again while the cluster runs, one after the other after the
	// first count check, each followed by the count check again (at most maxPeriodChanges).
	PeriodChanges []PeriodChange `json:"periodChanges,omitempty"`
	// Expect is what is right in this cell (docs/compatibility.md's rule); the outcome
	// compares what was measured with it.
	Expect Expect `json:"expect"`
	// Note says what the cell is for, for the docs table.
	Note string `json:"note,omitempty"`
}

// PeriodChange is one change of the CSIDriver's period while the cell runs.
type PeriodChange struct {
	// PeriodSeconds is the new period: 0 removes it, otherwise 10..86400.
	PeriodSeconds int64 `json:"periodSeconds"`
	// ExpectCountFollows: the count follows a cloud change within the follow window after it.
	ExpectCountFollows bool `json:"expectCountFollows"`
}

// maxPeriodChanges bounds Cell.PeriodChanges (each costs a follow window).
const maxPeriodChanges = 4

// validPeriod: 0 (unset) or what the API server accepts (≥ 10 s), at most a day.
func validPeriod(p int64) bool { return p == 0 || (p >= 10 && p <= 86400) }

// Expect is a cell's right behaviour.
type Expect struct {
	// Decision is the driver's right decision: "dynamic" or "static".
	Decision string `json:"decision"`
	// CountFollows: CSINode's count follows a cloud change within the follow window.
	CountFollows bool `json:"countFollows"`
	// PodReplaced: a pod whose attach failed with errorCode 8 is failed by the kubelet and
	// its StatefulSet's replacement runs elsewhere.
	PodReplaced bool `json:"podReplaced"`
	// DecisionAfterRestart is the right decision of node-1's plugin after its restart with
	// re-registration (the re-registration check), when it differs from Decision because a
	// PeriodChanges entry changed what the plugin reads at start; "": Decision.
	DecisionAfterRestart string `json:"decisionAfterRestart,omitempty"`
}

// afterRestart is the right decision after node-1's plugin restarted.
func (e Expect) afterRestart() string {
	if e.DecisionAfterRestart != "" {
		return e.DecisionAfterRestart
	}
	return e.Decision
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{0,79}$`)

// Validate reports every problem of c.
func (c Cell) Validate() error {
	var errs []error
	if !nameRE.MatchString(c.Name) {
		errs = append(errs, fmt.Errorf("cell name %q: want [a-z0-9.-], at most 80 bytes", c.Name))
	}
	for _, v := range []struct{ what, v, re string }{
		{"controlPlane", c.ControlPlane, `^v1\.[0-9]{2}\.[0-9]{1,3}$`},
		{"kubelet", c.Kubelet, `^v1\.[0-9]{2}\.[0-9]{1,3}$`},
		{"attacher", c.Attacher, `^v4\.[0-9]{1,3}\.[0-9]{1,3}$`},
	} {
		if !regexp.MustCompile(v.re).MatchString(v.v) {
			errs = append(errs, fmt.Errorf("cell %s: %s %q is not a release version", c.Name, v.what, v.v))
		}
	}
	if !validPeriod(c.PeriodSeconds) {
		errs = append(errs, fmt.Errorf("cell %s: periodSeconds %d: want 0 (unset) or 10..86400", c.Name, c.PeriodSeconds))
	}
	if len(c.PeriodChanges) > maxPeriodChanges {
		errs = append(errs, fmt.Errorf("cell %s: %d periodChanges, at most %d", c.Name, len(c.PeriodChanges), maxPeriodChanges))
	}
	for i, ch := range c.PeriodChanges {
		if !validPeriod(ch.PeriodSeconds) {
			errs = append(errs, fmt.Errorf("cell %s: periodChanges[%d].periodSeconds %d: want 0 (unset) or 10..86400", c.Name, i, ch.PeriodSeconds))
		}
	}
	if c.Expect.Decision != "dynamic" && c.Expect.Decision != "static" {
		errs = append(errs, fmt.Errorf("cell %s: expect.decision %q: want dynamic or static", c.Name, c.Expect.Decision))
	}
	if d := c.Expect.DecisionAfterRestart; d != "" && d != "dynamic" && d != "static" {
		errs = append(errs, fmt.Errorf("cell %s: expect.decisionAfterRestart %q: want dynamic, static or empty", c.Name, d))
	}
	for _, s := range []string{c.KubeletGates, c.APIServerGates, c.AttacherGates, c.NodeLabels, c.Note} {
		if len(s) > 1024 {
			errs = append(errs, fmt.Errorf("cell %s: a setting over 1024 bytes", c.Name))
		}
	}
	return errors.Join(errs...)
}

// ReadCells reads and validates a cells file (a JSON array, at most maxCells, names unique).
func ReadCells(path string) ([]Cell, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read cells: %w", err)
	}
	var cells []Cell
	if err := json.Unmarshal(data, &cells); err != nil {
		return nil, fmt.Errorf("cells %s: %w", path, err)
	}
	if len(cells) == 0 || len(cells) > maxCells {
		return nil, fmt.Errorf("cells %s: %d cells, want 1..%d", path, len(cells), maxCells)
	}
	seen := map[string]bool{}
	var errs []error
	for _, c := range cells {
		if err := c.Validate(); err != nil {
			errs = append(errs, err)
		}
		if seen[c.Name] {
			errs = append(errs, fmt.Errorf("cell %s listed twice", c.Name))
		}
		seen[c.Name] = true
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("cells %s: %w", path, err)
	}
	return cells, nil
}

// Select returns the cells named in names (all when names is empty), in the file's order.
// Errors: a name no cell has.
func Select(cells []Cell, names []string) ([]Cell, error) {
	if len(names) == 0 {
		return cells, nil
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []Cell
	for _, c := range cells {
		if want[c.Name] {
			out = append(out, c)
			delete(want, c.Name)
		}
	}
	for n := range want {
		return nil, fmt.Errorf("no cell named %q", n)
	}
	return out, nil
}

// periodText is "10 s", or "unset" for 0.
func periodText(p int64) string {
	if p == 0 {
		return "unset"
	}
	return fmt.Sprintf("%d s", p)
}
