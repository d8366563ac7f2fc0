package matrix

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// Row is one cell's run: the cell as it ran, what was measured, and whether it matched the
// cell's Expect. Durations are seconds; a figure whose event did not happen within its window
// is absent (nil).
type Row struct {
	Cell Cell `json:"cell"`
	// Date is when the run started (UTC); Commit the clone's `git describe --always --dirty`.
	Date   time.Time `json:"date"`
	Commit string    `json:"commit"`
	// Cluster is where the checks ran: "" the cell's own local cluster (hollow kubelets,
	// RunCell), else the name the kubeconfig mode was given (RunCheck, e.g. "kind": real
	// kubelets); Node is then the node they acted on (node-1 on the local cluster).
	Cluster string `json:"cluster,omitempty"`
	Node    string `json:"node,omitempty"`
	// Decision, Reason are node-1's decision from /debug/capacity; DecisionRight compares it
	// with Cell.Expect.Decision. KubeletVersion is what the Node reported.
	Decision       string `json:"decision"`
	Reason         string `json:"reason"`
	DecisionRight  bool   `json:"decisionRight"`
	KubeletVersion string `json:"kubeletVersion"`
	// CountFollowed: node-1's CSINode count reached the cloud's new truth after an
	// out-of-band change; CountFollowSeconds how long it took; FollowWindowSeconds the wait.
	CountFollowed       bool     `json:"countFollowed"`
	CountFollowSeconds  *float64 `json:"countFollowSeconds,omitempty"`
	FollowWindowSeconds float64  `json:"followWindowSeconds"`
	// ErrorCode8Seconds: from the StatefulSet's creation until its VolumeAttachment on the full
	// node carried errorCode 8 (absent: never within the window, with ErrorCodeSeen the code
	// seen if another).
	ErrorCode8Seconds *float64 `json:"errorCode8Seconds,omitempty"`
	ErrorCodeSeen     *int32   `json:"errorCodeSeen,omitempty"`
	// PodFailedSeconds: from errorCode 8 until the kubelet failed the pod
	// (VolumeAttachmentLimitExceeded); ReplacedSeconds: from errorCode 8 until its replacement
	// ran on another node. Absent when it did not happen within RejectWindowSeconds (and
	// 2 minutes more for the replacement).
	PodFailedSeconds    *float64 `json:"podFailedSeconds,omitempty"`
	ReplacedSeconds     *float64 `json:"replacedSeconds,omitempty"`
	RejectWindowSeconds float64  `json:"rejectWindowSeconds"`
	// StuckContainerCreating: at the end of the window the pod was still on the full node,
	// neither running nor failed.
	StuckContainerCreating bool `json:"stuckContainerCreating"`
	// ReregistrationGapSeconds: after a node plugin restart with re-registration, how long
	// node-1's CSINode did not list the driver; DriverVanished whether it went at all;
	// ReregisteredSeconds until it was back with a count.
	ReregistrationGapSeconds *float64 `json:"reregistrationGapSeconds,omitempty"`
	DriverVanished           bool     `json:"driverVanished"`
	ReregisteredSeconds      *float64 `json:"reregisteredSeconds,omitempty"`
	// KubeletRestart is the kubelet restart check (issue 27): node-1's kubelet restarted in
	// place after the cloud changed its count; absent in rows from before the check.
	KubeletRestart *KubeletRestart `json:"kubeletRestart,omitempty"`
	// PeriodChanges are the count checks after each of Cell.PeriodChanges, in order.
	PeriodChanges []PeriodChangeResult `json:"periodChanges,omitempty"`
	// Recheck is node-1's plugin's first cluster re-check (clustercheck.Watch, every
	// 5 minutes) after the last period change; absent without changes or when none came
	// within 6 minutes.
	Recheck *Recheck `json:"recheck,omitempty"`
	// DecisionAfterRestart, ReasonAfterRestart are node-1's decision after the
	// re-registration check restarted its plugin (it decides again at start).
	DecisionAfterRestart string `json:"decisionAfterRestart,omitempty"`
	ReasonAfterRestart   string `json:"reasonAfterRestart,omitempty"`
	// Outcome is "as expected" or "unexpected: ..." (what differed from Cell.Expect), or
	// "error: ..." when a check could not run.
	Outcome string `json:"outcome"`
	// Errors are the checks that could not run.
	Errors []string `json:"errors,omitempty"`
	// TotalSeconds is the cell's wall time, cluster start to stop.
	TotalSeconds float64 `json:"totalSeconds"`
}

// PeriodChangeResult is the count check after one period change.
type PeriodChangeResult struct {
	// PeriodSeconds is the period set (0: removed).
	PeriodSeconds int64 `json:"periodSeconds"`
	// CountFollowed, CountFollowSeconds: as Row's, measured after the change.
	CountFollowed      bool     `json:"countFollowed"`
	CountFollowSeconds *float64 `json:"countFollowSeconds,omitempty"`
}

// KubeletRestart is what node-1's CSINode listed after one more of its slots went out of band
// and its kubelet restarted in place (the node plugin's registration socket still served), so
// that the new kubelet registered the driver with a count other than its CSINode entry's,
// which was not removed first. Counts are CSINode allocatable counts; durations seconds from
// the start of the restart, absent when the event did not happen within WindowSeconds.
type KubeletRestart struct {
	// NotMeasured says why the check did not run ("" when it ran): never a pass.
	NotMeasured string `json:"notMeasured,omitempty"`
	// CountBefore is the count before the cloud change, CountNew the driver's answer after it,
	// CountAtRestart the count listed when the restart began (0: not listed).
	CountBefore    int32 `json:"countBefore,omitempty"`
	CountNew       int32 `json:"countNew,omitempty"`
	CountAtRestart int32 `json:"countAtRestart,omitempty"`
	// Vanished: CSINode stopped listing the driver; VanishedAfterSeconds when; GapSeconds how
	// long until it was listed again, with CountBack (absent: not back within the window).
	Vanished             bool     `json:"vanished"`
	VanishedAfterSeconds *float64 `json:"vanishedAfterSeconds,omitempty"`
	GapSeconds           *float64 `json:"gapSeconds,omitempty"`
	CountBack            *int32   `json:"countBack,omitempty"`
	// NewCountSeconds is when CSINode first listed CountNew; CountEnd the count listed at the
	// end of the wait (absent: the driver not listed then).
	NewCountSeconds *float64 `json:"newCountSeconds,omitempty"`
	CountEnd        *int32   `json:"countEnd,omitempty"`
	// WindowSeconds is the wait for CountNew (kubeletRestartWindow).
	WindowSeconds float64 `json:"windowSeconds,omitempty"`
	// PutBackByPluginRestart: with the cloud put back, the driver was not listed at
	// CountBefore (nor followed within 35 s), so the node plugin was restarted with
	// re-registration to put it back; PutBackSeconds from that restart until it was.
	PutBackByPluginRestart bool     `json:"putBackByPluginRestart,omitempty"`
	PutBackSeconds         *float64 `json:"putBackSeconds,omitempty"`
}

// Recheck is what the node plugin's cluster re-check answered (its /debug/cluster).
type Recheck struct {
	// Supported is the re-check's verdict; SupportedAtStart the one the mode was decided on.
	Supported        bool `json:"supported"`
	SupportedAtStart bool `json:"supportedAtStart"`
	// SecondsAfterChange is from the last period change to the re-check.
	SecondsAfterChange float64 `json:"secondsAfterChange"`
}

// judge sets r.Outcome from the measurements and r.Cell.Expect.
func (r *Row) judge() {
	r.DecisionRight = r.Decision == r.Cell.Expect.Decision
	if len(r.Errors) > 0 {
		r.Outcome = "error: " + strings.Join(r.Errors, "; ")
		return
	}
	if r.Cell.Expect.Decision == "" {
		// The kubeconfig mode on a cluster no cell of the matrix describes.
		r.Outcome = "measured, not judged: no cell of the matrix has these versions and settings"
		return
	}
	var diffs []string
	if !r.DecisionRight {
		diffs = append(diffs, fmt.Sprintf("decision %s (%s), right is %s", r.Decision, r.Reason, r.Cell.Expect.Decision))
	}
	if r.CountFollowed != r.Cell.Expect.CountFollows {
		diffs = append(diffs, fmt.Sprintf("count follows: %v, expected %v", r.CountFollowed, r.Cell.Expect.CountFollows))
	}
	for i, ch := range r.Cell.PeriodChanges {
		switch {
		case i >= len(r.PeriodChanges):
			diffs = append(diffs, fmt.Sprintf("period → %s: not measured", periodText(ch.PeriodSeconds)))
		case r.PeriodChanges[i].CountFollowed != ch.ExpectCountFollows:
			diffs = append(diffs, fmt.Sprintf("period → %s: count follows: %v, expected %v", periodText(ch.PeriodSeconds), r.PeriodChanges[i].CountFollowed, ch.ExpectCountFollows))
		}
	}
	if r.DecisionAfterRestart != "" && r.DecisionAfterRestart != r.Cell.Expect.afterRestart() {
		diffs = append(diffs, fmt.Sprintf("decision after the restart %s (%s), right is %s", r.DecisionAfterRestart, r.ReasonAfterRestart, r.Cell.Expect.afterRestart()))
	}
	replaced := r.ReplacedSeconds != nil
	if replaced != r.Cell.Expect.PodReplaced {
		diffs = append(diffs, fmt.Sprintf("pod failed and replaced: %v, expected %v", replaced, r.Cell.Expect.PodReplaced))
	}
	if len(diffs) == 0 {
		r.Outcome = "as expected"
		return
	}
	r.Outcome = "unexpected: " + strings.Join(diffs, "; ")
}

// maxResultsBytes bounds results.json.
const maxResultsBytes = 4 << 20

// ReadResults reads a results file (a JSON array of rows); a missing file is no rows.
func ReadResults(path string) ([]Row, error) { return readArray[Row](path, "results") }

// AppendResult adds row to the results file at path (written whole, indented, through a
// temporary file so that an interrupted write leaves the old file).
func AppendResult(path string, row Row) error { return appendArray(path, "results", row) }

// readArray reads the JSON array of T at path, at most maxResultsBytes; a missing file is
// an empty array. what names the file in errors ("results", "upgrade results").
func readArray[T any](path, what string) ([]T, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxResultsBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", what, path, err)
	}
	if len(data) > maxResultsBytes {
		return nil, fmt.Errorf("%s %s: over %d bytes", what, path, maxResultsBytes)
	}
	var out []T
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	return out, nil
}

// appendArray adds v to the JSON array of T at path, written whole, indented, through a
// temporary file so that an interrupted write leaves the old file.
func appendArray[T any](path, what string, v T) error {
	all, err := readArray[T](path, what)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(append(all, v), "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", what, err)
	}
	return os.Rename(tmp, path)
}

// The markers around the generated table in docs/compatibility.md.
const (
	beginMarker = "<!-- BEGIN MATRIX (generated by tests/e2e/cmd/matrix doc from tests/e2e/matrix/results.json; do not edit) -->"
	endMarker   = "<!-- END MATRIX -->"
)

// secs formats an optional duration in seconds.
func secs(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%.1f s", *v)
}

// yesNo is "yes"/"no" with an optional figure.
func yesNo(b bool, v *float64) string {
	if !b {
		return "no"
	}
	if v == nil {
		return "yes"
	}
	return "yes, " + secs(v)
}

// Table renders the matrix: one row per cell of cells, with its latest row in rows, or
// "planned (not run)" when it has none. Rows of cells no longer listed come after.
func Table(cells []Cell, rows []Row) string {
	// The latest row of each cell on each cluster: a cell's own local cluster ("") and the
	// clusters the kubeconfig mode ran on (elsewhere, by cell name).
	latest := map[string]Row{}
	elsewhere := map[string][]string{}
	for _, r := range rows {
		k := r.Cell.Name + "\x00" + r.Cluster
		old, ok := latest[k]
		if !ok && r.Cluster != "" {
			elsewhere[r.Cell.Name] = append(elsewhere[r.Cell.Name], k)
		}
		if !ok || r.Date.After(old.Date) {
			latest[k] = r
		}
	}
	var b bytes.Buffer
	b.WriteString("| cell | control plane | kubelet (gates) | attacher | period | decision (reason), right? | count follows a cloud change | errorCode 8 on the VA | pod failed, replaced | stuck in ContainerCreating | re-registration gap | kubelet restart after a cloud change | outcome | run |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	listed := map[string]bool{}
	for _, c := range cells {
		listed[c.Name] = true
		if r, ok := latest[c.Name+"\x00"]; ok {
			tableRow(&b, r.Cell, &r)
		} else {
			tableRow(&b, c, nil)
		}
		others := elsewhere[c.Name]
		sort.Strings(others)
		for _, k := range others {
			r := latest[k]
			tableRow(&b, r.Cell, &r)
		}
	}
	var gone []string
	for k, r := range latest {
		if !listed[r.Cell.Name] {
			gone = append(gone, k)
		}
	}
	sort.Strings(gone)
	for _, k := range gone {
		r := latest[k]
		tableRow(&b, r.Cell, &r)
	}
	return b.String()
}

// tableRow writes the Table row of cell c with its result r (nil: planned, not run).
func tableRow(b *bytes.Buffer, c Cell, r *Row) {
	if r != nil && r.Cluster != "" {
		c.Name += fmt.Sprintf(" (on %s, node %s)", r.Cluster, r.Node)
	}
	lead := cellColumns(c)
	if r == nil {
		fmt.Fprintf(b, "%splanned (right: %s) | planned | planned | planned | planned | planned | planned | planned (not run) | — |\n", lead, c.Expect.Decision)
		return
	}
	ec := "no"
	switch {
	case r.ErrorCode8Seconds != nil:
		ec = "yes, " + secs(r.ErrorCode8Seconds)
	case r.ErrorCodeSeen != nil:
		ec = fmt.Sprintf("code %d", *r.ErrorCodeSeen)
	}
	failed := "no"
	if r.PodFailedSeconds != nil {
		failed = "failed " + secs(r.PodFailedSeconds) + ", replaced " + secs(r.ReplacedSeconds)
	}
	gap := "no gap"
	if r.DriverVanished {
		gap = "gone " + secs(r.ReregistrationGapSeconds)
	}
	if r.ReregisteredSeconds != nil {
		gap += ", back with a count " + secs(r.ReregisteredSeconds)
	}
	stuck := "no"
	if r.StuckContainerCreating {
		stuck = fmt.Sprintf("yes (after %.0f s)", r.RejectWindowSeconds)
	}
	fmt.Fprintf(b, "%s%s | %s | %s | %s | %s | %s | %s | %s | %s, %s |\n", lead, decisionColumn(c, r),
		followsColumn(r), ec, failed, stuck, gap, kubeletRestartText(r.KubeletRestart), r.Outcome,
		r.Date.UTC().Format("2006-01-02 15:04 UTC"), r.Commit)
}

// cellColumns is the start of a Table row, what cell c sets up: its name, control plane,
// kubelet and gates, attacher and period (with its changes), each followed by " | ".
func cellColumns(c Cell) string {
	gates := c.KubeletGates
	if gates == "" {
		gates = "defaults"
	}
	if c.NodeLabels != "" {
		gates += "; node " + c.NodeLabels
	}
	period := periodText(c.PeriodSeconds)
	for _, ch := range c.PeriodChanges {
		period += " → " + periodText(ch.PeriodSeconds)
	}
	cp, attacher := c.ControlPlane, c.Attacher
	if c.APIServerGates != "" {
		cp += " (API server " + c.APIServerGates + ")"
	}
	if c.AttacherGates != "" {
		attacher += " (" + c.AttacherGates + ")"
	}
	return fmt.Sprintf("| %s | %s | %s (%s) | %s | %s | ", c.Name, cp, c.Kubelet, gates, attacher, period)
}

// decisionColumn is the plugin's decision and reason in r, right or not for cell c, with the
// re-check and the decision after a restart when r has them.
func decisionColumn(c Cell, r *Row) string {
	right := "right"
	switch {
	case c.Expect.Decision == "":
		right = "not judged"
	case !r.DecisionRight:
		right = "WRONG (right: " + c.Expect.Decision + ")"
	}
	decision := fmt.Sprintf("%s (%s), %s", r.Decision, r.Reason, right)
	if r.Recheck != nil {
		decision += fmt.Sprintf("; re-check %.0f s after the last change: supported %v (at start %v)", r.Recheck.SecondsAfterChange, r.Recheck.Supported, r.Recheck.SupportedAtStart)
	}
	if r.DecisionAfterRestart != "" && (r.DecisionAfterRestart != r.Decision || r.ReasonAfterRestart != r.Reason) {
		after := "right"
		if r.DecisionAfterRestart != c.Expect.afterRestart() {
			after = "WRONG (right: " + c.Expect.afterRestart() + ")"
		}
		decision += fmt.Sprintf("; after the restart: %s (%s), %s", r.DecisionAfterRestart, r.ReasonAfterRestart, after)
	}
	return decision
}

// followsColumn says whether the count followed a cloud change, and after each period change.
func followsColumn(r *Row) string {
	follows := fmt.Sprintf("%s (window %.0f s)", yesNo(r.CountFollowed, r.CountFollowSeconds), r.FollowWindowSeconds)
	for _, ch := range r.PeriodChanges {
		follows += fmt.Sprintf("; after → %s: %s", periodText(ch.PeriodSeconds), yesNo(ch.CountFollowed, ch.CountFollowSeconds))
	}
	return follows
}

// kubeletRestartText is the kubelet restart column: the count change, whether and for how long
// the driver was gone and the count it came back with, the count it ended at, and whether the
// node had to be put back by a plugin re-registration; "—" for rows from before the check.
func kubeletRestartText(k *KubeletRestart) string {
	switch {
	case k == nil:
		return "—"
	case k.NotMeasured != "":
		return "not measured: " + k.NotMeasured
	}
	s := fmt.Sprintf("count %d → %d", k.CountBefore, k.CountNew)
	if k.CountAtRestart != k.CountBefore {
		s += fmt.Sprintf(" (%d at the restart)", k.CountAtRestart)
	}
	switch {
	case !k.Vanished:
		s += ": never gone"
	case k.CountBack == nil:
		s += fmt.Sprintf(": gone %s after the restart, not back within %.0f s", secs(k.VanishedAfterSeconds), k.WindowSeconds)
	default:
		s += fmt.Sprintf(": gone %s after the restart for %s, back with %d", secs(k.VanishedAfterSeconds), secs(k.GapSeconds), *k.CountBack)
	}
	switch {
	case k.CountEnd == nil:
		s += ", not listed at the end"
	case *k.CountEnd == k.CountNew && k.NewCountSeconds != nil:
		s += ", new count " + secs(k.NewCountSeconds) + " after the restart"
	default:
		s += fmt.Sprintf(", ended at %d (not the new count) after %.0f s", *k.CountEnd, k.WindowSeconds)
	}
	if k.PutBackByPluginRestart {
		s += "; put back by a plugin re-registration (" + secs(k.PutBackSeconds) + ")"
	}
	return s
}

// WriteDoc replaces the text between the markers of the doc at path with Table(cells, rows).
// Errors: the doc lacks the markers (nothing is written).
func WriteDoc(path string, cells []Cell, rows []Row) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(data)
	i, j := strings.Index(s, beginMarker), strings.Index(s, endMarker)
	if i < 0 || j < i {
		return fmt.Errorf("%s: no %q ... %q markers", path, beginMarker, endMarker)
	}
	out := s[:i+len(beginMarker)] + "\n" + Table(cells, rows) + s[j:]
	return os.WriteFile(path, []byte(out), 0o644)
}
