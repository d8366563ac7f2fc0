// Package scenario runs timelines of fake-cloud changes written as YAML
// (examples/scenarios/*.yaml): at t=30s set node-a1's out-of-band slots to 3, at t=60s an
// outage of 45 s, ±1 noise on the attachment quota for 2 minutes, and so on. A scenario drives
// a fake cloud through its public admin API only (PATCH /v1/instances/{id}, PATCH /v1/quotas,
// POST and DELETE /v1/faults, POST /v1/reset), so every step shows in GET /v1/events and the
// same file runs against any fake cloud: `make run`'s, a local cluster's or kind's.
//
//	name: outage-and-recovery
//	expect: the plugins hold their last good value for the outage, then follow the cloud again
//	steps:
//	  - at: 30s
//	    instance: {id: node-a1, outOfBandSlots: 3}
//	  - at: 60s
//	    fault: {ref: outage, operation: "*", error: Unavailable}
//	  - at: 105s
//	    deleteFault: outage
//	  - at: 120s
//	    quotaNoise: {quota: attachments, base: 40, amplitude: 1, every: 5s, for: 2m, seed: 1}
package scenario

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/fakecloud/fakecloud-csi/internal/fieldnames"
	"github.com/fakecloud/fakecloud-csi/internal/yamlcheck"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/faults"
)

// Bounds of a scenario file.
const (
	// MaxFileBytes bounds a scenario file.
	MaxFileBytes = 1 << 20
	// MaxSteps bounds the steps after quota noise is expanded.
	MaxSteps = 10000
	// MaxOffset bounds a step's at: a day is longer than any experiment.
	MaxOffset = 24 * time.Hour
	// MaxTextBytes bounds description, expect and each note, texts of UTF-8 with no
	// control character (cloud.CheckFreeText).
	MaxTextBytes = 1024
	// MinNoiseInterval bounds quotaNoise.every from below.
	MinNoiseInterval = 100 * time.Millisecond
	// MaxExpandedBytes bounds a scenario's size once its YAML aliases are expanded (each
	// alias counted as a copy of what its anchor names), in bytes: scalars' text plus
	// expandedNodeBytes per node. Twice MaxFileBytes, so a file within MaxFileBytes that
	// uses no alias always fits; a file whose aliases expand past it is refused before
	// anything expands them (ErrExpandedTooLarge).
	MaxExpandedBytes = 2 * MaxFileBytes
)

// expandedNodeBytes is what each node counts towards MaxExpandedBytes beyond its text: the
// punctuation the JSON it becomes adds (quotes, a comma, a colon), so that a long list of
// empty scalars counts too.
const expandedNodeBytes = 2

// ErrExpandedTooLarge is the error (wrapped) of Parse for a file whose aliases expand past
// MaxExpandedBytes, or that holds an alias to a node containing it; the fake cloud answers it
// with 413 PayloadTooLarge.
var ErrExpandedTooLarge = errors.New("YAML aliases expand too far")

// Duration is a time.Duration written as Go writes one ("30s", "2m", "1m30s").
type Duration time.Duration

// UnmarshalJSON reads a Go duration string; its error is a *durationError, which Parse
// locates in the file.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		// YAML made a number of it: 30 means nothing without a unit.
		return &durationError{text: string(b)}
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return &durationError{text: s, err: err}
	}
	*d = Duration(v)
	return nil
}

// durationError is a value that is no duration: text as written (bounded by MaxFileBytes,
// quoted at most MaxQuotedBytes), and the parser's error.
type durationError struct {
	text string
	err  error
}

func (e *durationError) msg() string {
	t := e.text
	if len(t) > yamlcheck.MaxQuotedBytes {
		t = t[:yamlcheck.MaxQuotedBytes] + "..."
	}
	return fmt.Sprintf("want a duration with its unit like 30s, 2m or 1m30s, got %q", t)
}

func (e *durationError) Error() string { return e.msg() }
func (e *durationError) Unwrap() error { return e.err }

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// String is the duration as Go writes one ("1s", "1m30s"), so that %v prints it as the
// scenario file does, not as a count of nanoseconds.
func (d Duration) String() string { return time.Duration(d).String() }

// Scenario is one timeline.
type Scenario struct {
	// Name names the scenario in logs.
	Name string `json:"name"`
	// Description says what it does; Expect what a driver should do meanwhile (printed at
	// the start, for the reader to check against the console or the capacity plot).
	Description string `json:"description,omitempty"`
	Expect      string `json:"expect,omitempty"`
	// Steps run in order of At; steps with the same At run in file order.
	Steps []Step `json:"steps"`
	// Warnings are what Parse noticed that does not stop a run: each step the file lists
	// after a step with a later at: (it runs before it, whatever the file's order says), with
	// its line, at most maxWarnings of them. Not part of the file.
	Warnings []string `json:"-"`
}

// Step is one change at an offset from the scenario's start. Exactly one of the action
// fields is set.
type Step struct {
	// At is the offset from the start, 0 to MaxOffset.
	At Duration `json:"at"`
	// Note is printed when the step runs.
	Note string `json:"note,omitempty"`

	// Instance patches one instance (PATCH /v1/instances/{id}).
	Instance *InstanceStep `json:"instance,omitempty"`
	// Quotas patches the account quotas (PATCH /v1/quotas).
	Quotas *cloud.QuotasPatch `json:"quotas,omitempty"`
	// Fault adds a fault rule (POST /v1/faults); its Ref names it for DeleteFault.
	Fault *FaultStep `json:"fault,omitempty"`
	// DeleteFault deletes the rule an earlier Fault step named (DELETE /v1/faults/{id}).
	DeleteFault string `json:"deleteFault,omitempty"`
	// ClearFaults deletes every fault rule (DELETE /v1/faults).
	ClearFaults bool `json:"clearFaults,omitempty"`
	// Reset returns the cloud to its seed (POST /v1/reset).
	Reset bool `json:"reset,omitempty"`
	// QuotaNoise moves a quota limit at random around a base value for a while; Load
	// expands it into Quotas steps.
	QuotaNoise *Noise `json:"quotaNoise,omitempty"`
}

// InstanceStep is the instance to patch and the patch.
type InstanceStep struct {
	ID string `json:"id"`
	cloud.InstancePatch
}

// FaultStep is a fault rule to add and the name later steps use for it.
type FaultStep struct {
	Ref string `json:"ref,omitempty"`
	cloud.FaultRule
}

// Noise sets a quota's limit to Base plus a uniform random integer in [−Amplitude,
// Amplitude] every Every for For, then back to Base. Seed makes the sequence repeat.
type Noise struct {
	// Quota is "attachments" or "volumes".
	Quota     string   `json:"quota"`
	Base      int64    `json:"base"`
	Amplitude int64    `json:"amplitude"`
	Every     Duration `json:"every"`
	For       Duration `json:"for"`
	Seed      uint64   `json:"seed,omitempty"`
}

// action names the step's action, or "" when none or several are set.
func (s Step) action() (string, int) {
	var names []string
	for name, set := range map[string]bool{"instance": s.Instance != nil, "quotas": s.Quotas != nil, "fault": s.Fault != nil,
		"deleteFault": s.DeleteFault != "", "clearFaults": s.ClearFaults, "reset": s.Reset, "quotaNoise": s.QuotaNoise != nil} {
		if set {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if len(names) == 1 {
		return names[0], 1
	}
	return strings.Join(names, ", "), len(names)
}

// Describe is a one-line account of the step for logs, e.g. "PATCH /v1/quotas {"attachments":3}".
func (s Step) Describe() string {
	body := func(v any) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	switch name, _ := s.action(); name {
	case "instance":
		return "PATCH /v1/instances/" + s.Instance.ID + " " + body(s.Instance.InstancePatch)
	case "quotas":
		return "PATCH /v1/quotas " + body(s.Quotas)
	case "fault":
		return "POST /v1/faults " + body(installedRule{FaultRule: s.Fault.FaultRule}) + refNote(s.Fault.Ref)
	case "deleteFault":
		return "DELETE /v1/faults/{" + s.DeleteFault + "}"
	case "clearFaults":
		return "DELETE /v1/faults"
	case "reset":
		return "POST /v1/reset"
	default:
		return name
	}
}

// installedRule is a fault rule as a step installs it: without the count of firings, which
// a rule being installed does not have yet ("fired":0 read as if the fault did nothing).
type installedRule struct {
	cloud.FaultRule
	// Fired shadows the rule's own (encoding/json picks the shallower field) and is never
	// set, so that it is left out.
	Fired *int `json:"fired,omitempty"`
}

func refNote(ref string) string {
	if ref == "" {
		return ""
	}
	return " as " + ref
}

// Parse reads a scenario from YAML, checks it and expands quota noise into timed Quotas
// steps, sorted by At. Every problem of the file is reported at once, one a line, in file
// order, each with its line and step where known: the values that do not fit their fields
// (an unknown field, with the field likely meant; a value of the wrong type; a duration
// without its unit; up to maxDecodeProblems of them), then the checks of the steps left.
func Parse(data []byte) (*Scenario, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("scenario: %d bytes, at most %d", len(data), MaxFileBytes)
	}
	// The strict decoder below expands every alias into JSON: one large string aliased
	// thousands of times became gigabytes. Measure first, without expanding.
	doc, err := checkExpansion(data)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	sc, problems := decode(data, doc)
	if sc == nil {
		return nil, fmt.Errorf("scenario: %w", inFileOrder(doc, problems, nil))
	}
	if err := inFileOrder(doc, problems, sc.validate(problems)); err != nil {
		if len(problems) > 0 {
			return nil, fmt.Errorf("scenario: %w", err)
		}
		return nil, fmt.Errorf("scenario %s: %w", cloud.Quote(sc.Name), err)
	}
	sc.Warnings = outOfOrder(doc, sc.Steps)
	steps, err := expand(sc.Steps)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", cloud.Quote(sc.Name), err)
	}
	sc.Steps = steps
	return sc, nil
}

// maxWarnings bounds Scenario.Warnings; past it one more line says how many were left out.
const maxWarnings = 10

// outOfOrder names each step of the file (steps, before noise is expanded) listed after a
// step with a later at:, and that step, with its line: steps run in order of at:, so a file
// read top to bottom would mislead, and Parse says so rather than reorder it silently. A
// file out of order is still valid (grouping steps by instance is a fair way to write one).
func outOfOrder(doc *yamlv3.Node, steps []Step) []string {
	var out []string
	latest, n := -1, 0
	for i, s := range steps {
		if latest >= 0 && s.At < steps[latest].At {
			n++
			if len(out) < maxWarnings {
				w := fmt.Errorf("steps[%d] (at %v): listed after steps[%d] (at %v) but runs before it (steps run in order of at:, not of the file)",
					i, time.Duration(s.At), latest, time.Duration(steps[latest].At))
				out = append(out, yamlcheck.AtLines(doc, w).Error())
			}
		}
		if latest < 0 || s.At > steps[latest].At {
			latest = i
		}
	}
	if n > maxWarnings {
		out = append(out, fmt.Sprintf("and %d more steps listed out of time order", n-maxWarnings))
	}
	return out
}

// maxDecodeProblems bounds the values that do not fit reported: past it, a file is more
// likely another kind of file than a scenario with typos.
const maxDecodeProblems = 20

// decodeProblem is a value that does not fit its field, in the file's terms.
type decodeProblem struct {
	// line is the problem's line in the file, 0 when not known.
	line int
	// path is what was dropped to go on ("steps[2].quotas", "name"); "" when decoding
	// stopped there.
	path string
	// meant is the field an unknown field was likely meant to be ("steps" for "stepz"),
	// which the checks then leave alone too: "no steps" for "stepz: [...]" is no news.
	meant string
	err   error
}

// errMoreNotLooked is the last problem of a file with more than maxDecodeProblems.
var errMoreNotLooked = errors.New("more problems may follow: fix these and parse again")

// decode checks doc (data, the file, parsed) against Scenario (yamlcheck.Check), then decodes
// data, or what is left once the values that do not fit are dropped from doc: sc is nil when
// that does not decode, or there were more than maxDecodeProblems (then the last problem is
// errMoreNotLooked). checkExpansion measured the aliases of both.
func decode(data []byte, doc *yamlv3.Node) (*Scenario, []decodeProblem) {
	var problems []decodeProblem
	found := yamlcheck.Check(doc, &Scenario{}, maxDecodeProblems+1)
	for _, p := range found[:min(len(found), maxDecodeProblems)] {
		if p.Field == "" {
			problems = append(problems, decodeProblem{line: p.Line, path: p.Path, err: &p})
			continue
		}
		// An unknown field is named with its step, as the checks name steps.
		where := fmt.Sprintf("line %d", p.Line)
		if step := stepAt(doc, p.Line); step != "" {
			where += ", " + step
		}
		dp := decodeProblem{line: p.Line, path: join(p.Path, p.Field), err: fmt.Errorf("%s: %s", where, p.Msg)}
		if p.Meant != "" {
			dp.meant = join(p.Path, p.Meant)
		}
		problems = append(problems, dp)
	}
	if len(found) > maxDecodeProblems {
		return nil, append(problems, decodeProblem{line: math.MaxInt, err: errMoreNotLooked})
	}
	rest := data
	if len(problems) > 0 {
		for _, p := range problems {
			yamlcheck.Drop(doc, p.path)
		}
		var err error
		if rest, err = yamlv3.Marshal(doc); err != nil {
			return nil, problems
		}
	}
	var sc Scenario
	if err := yamlcheck.Decode(rest, &sc); err != nil {
		if len(problems) > 0 {
			// What a drop broke (an alias whose anchor went with a dropped value, say): the
			// problems found are the file's.
			return nil, problems
		}
		return nil, []decodeProblem{{err: err}}
	}
	return &sc, problems
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// inFileOrder joins the decoding problems and the checks' errors (each one problem; nil
// for none) in file order: by line, those with none first (the file's as a whole), then in
// the order found. nil when there is none.
func inFileOrder(doc *yamlv3.Node, problems []decodeProblem, checks []error) error {
	type located struct {
		line int
		err  error
	}
	all := make([]located, 0, len(problems)+len(checks))
	for _, p := range problems {
		all = append(all, located{p.line, p.err})
	}
	for _, c := range checks {
		c = yamlcheck.AtLines(doc, c)
		line := 0
		_, _ = fmt.Sscanf(c.Error(), "line %d,", &line)
		all = append(all, located{line, c})
	}
	slices.SortStableFunc(all, func(a, b located) int { return cmp.Compare(a.line, b.line) })
	errs := make([]error, len(all))
	for i, l := range all {
		errs[i] = l.err
	}
	return errors.Join(errs...)
}

// validate checks what decoded, and returns one error a problem, in file order. A field or
// step the decoder refused a value of (problems) is not checked again: what is left of it
// would only add problems of the refusal's making (a step without its action, say).
func (sc *Scenario) validate(problems []decodeProblem) []error {
	refused := map[string]bool{} // "name", "steps", "steps[3]"
	for _, p := range problems {
		for _, path := range []string{p.path, p.meant} {
			top, _, _ := strings.Cut(path, ".")
			refused[top] = true
		}
	}
	var errs []error
	if !refused["name"] {
		if strings.TrimSpace(sc.Name) == "" {
			errs = append(errs, errors.New("name is required"))
		}
		if err := cloud.CheckOptionalID("name", sc.Name); err != nil {
			errs = append(errs, err)
		}
	}
	for _, f := range []struct{ name, v string }{{"description", sc.Description}, {"expect", sc.Expect}} {
		if err := cloud.CheckFreeText(f.name, f.v, MaxTextBytes); err != nil && !refused[f.name] {
			errs = append(errs, err)
		}
	}
	if len(sc.Steps) == 0 && !refused["steps"] {
		errs = append(errs, errors.New("no steps"))
	}
	refs := map[string]int{}
	anyRefused := len(problems) > 0
	for i, s := range sc.Steps {
		if refused[fmt.Sprintf("steps[%d]", i)] {
			continue
		}
		where := fmt.Sprintf("steps[%d] (at %v)", i, time.Duration(s.At))
		if s.At < 0 || time.Duration(s.At) > MaxOffset {
			errs = append(errs, fmt.Errorf("%s: at must be within 0 and %v", where, MaxOffset))
		}
		if err := cloud.CheckFreeText("note", s.Note, MaxTextBytes); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
		name, n := s.action()
		switch {
		case n == 0:
			errs = append(errs, fmt.Errorf("%s: no action (want one of instance, quotas, fault, deleteFault, clearFaults, reset, quotaNoise)", where))
		case n > 1:
			errs = append(errs, fmt.Errorf("%s: one action per step, got %s", where, name))
		}
		// The values are checked by the rules the fake cloud's API applies to the request the
		// step makes, so that a file fails here, all of it, not at the step.
		at := func(field string) string { return fmt.Sprintf("steps[%d].%s (at %v)", i, field, time.Duration(s.At)) }
		switch {
		case s.Instance != nil:
			if err := cloud.CheckID("instance id", s.Instance.ID); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
			}
			errs = append(errs, each(at("instance"), s.Instance.Check())...)
		case s.Quotas != nil:
			errs = append(errs, each(at("quotas"), s.Quotas.Check())...)
		case s.Fault != nil:
			errs = append(errs, each(at("fault"), faults.CheckNew(s.Fault.FaultRule))...)
			if s.Fault.Ref != "" {
				if _, dup := refs[s.Fault.Ref]; dup {
					errs = append(errs, fmt.Errorf("%s: fault ref %s used twice", where, cloud.Quote(s.Fault.Ref)))
				}
				refs[s.Fault.Ref] = i
			}
		case s.DeleteFault != "":
			switch j, ok := refs[s.DeleteFault]; {
			case !ok && anyRefused: // its fault step may be one refused
			case !ok:
				errs = append(errs, fmt.Errorf("%s: deleteFault %s: no earlier fault step has this ref", where, cloud.Quote(s.DeleteFault)))
			case sc.Steps[j].At > s.At:
				errs = append(errs, fmt.Errorf("%s: deleteFault %s runs before its fault step", where, cloud.Quote(s.DeleteFault)))
			}
		case s.QuotaNoise != nil:
			errs = append(errs, each(at("quotaNoise"), s.QuotaNoise.validate())...)
		}
	}
	return errs
}

// each is err's problems (one a line, as errors.Join writes them), each its own error with
// where before it, so that each is placed in file order and named with its step.
func each(where string, err error) []error {
	if err == nil {
		return nil
	}
	var out []error
	for line := range strings.SplitSeq(err.Error(), "\n") {
		out = append(out, fmt.Errorf("%s: %s", where, line))
	}
	return out
}

func (n *Noise) validate() error {
	var errs []error
	if n.Quota != "attachments" && n.Quota != "volumes" {
		msg := fmt.Sprintf("quota %s: want attachments or volumes", cloud.Quote(n.Quota))
		if m := fieldnames.Closest(n.Quota, []string{"attachments", "volumes"}); m != "" {
			msg += "; did you mean " + strconv.Quote(m) + "?"
		}
		errs = append(errs, errors.New(msg))
	}
	if n.Amplitude < 1 || n.Amplitude > n.Base {
		errs = append(errs, fmt.Errorf("amplitude %d: want 1 to base (%d), so the limit stays ≥ 0", n.Amplitude, n.Base))
	}
	// The highest limit the noise sets is a quota PATCH /v1/quotas takes (cloud.CheckQuota).
	if err := cloud.CheckQuota("base", &n.Base, cloud.MaxQuotaCount); err != nil {
		errs = append(errs, err)
	} else if hi := n.Base + n.Amplitude; n.Amplitude >= 1 && n.Amplitude <= n.Base {
		if err := cloud.CheckQuota("base + amplitude", &hi, cloud.MaxQuotaCount); err != nil {
			errs = append(errs, err)
		}
	}
	if time.Duration(n.Every) < MinNoiseInterval {
		errs = append(errs, fmt.Errorf("every %v: at least %v", time.Duration(n.Every), MinNoiseInterval))
	}
	if n.For <= 0 || time.Duration(n.For) > MaxOffset {
		errs = append(errs, fmt.Errorf("for %v: want more than 0 and at most %v", time.Duration(n.For), MaxOffset))
	}
	return errors.Join(errs...)
}

// expand replaces each QuotaNoise step by its Quotas steps and sorts every step by At
// (stable: file order among equal offsets).
func expand(in []Step) ([]Step, error) {
	var out []Step
	for _, s := range in {
		if s.QuotaNoise == nil {
			out = append(out, s)
			continue
		}
		n := s.QuotaNoise
		rng := rand.New(rand.NewPCG(n.Seed, n.Seed^0x9e3779b97f4a7c15))
		set := func(at time.Duration, v int64, note string) {
			p := cloud.QuotasPatch{}
			if n.Quota == "attachments" {
				p.Attachments = &v
			} else {
				p.Volumes = &v
			}
			out = append(out, Step{At: Duration(at), Note: note, Quotas: &p})
		}
		start, end := time.Duration(s.At), time.Duration(s.At)+time.Duration(n.For)
		for at := start; at < end; at += time.Duration(n.Every) {
			set(at, n.Base+rng.Int64N(2*n.Amplitude+1)-n.Amplitude, fmt.Sprintf("%s noise ±%d around %d", n.Quota, n.Amplitude, n.Base))
			if len(out) > MaxSteps {
				return nil, fmt.Errorf("more than %d steps once quota noise is expanded", MaxSteps)
			}
		}
		set(end, n.Base, fmt.Sprintf("%s noise over: back to %d", n.Quota, n.Base))
	}
	if len(out) > MaxSteps {
		return nil, fmt.Errorf("more than %d steps once quota noise is expanded", MaxSteps)
	}
	slices.SortStableFunc(out, func(a, b Step) int { return cmp.Compare(a.At, b.At) })
	return out, nil
}

// Duration returns the offset of the last step.
func (sc *Scenario) Duration() time.Duration {
	if len(sc.Steps) == 0 {
		return 0
	}
	return time.Duration(sc.Steps[len(sc.Steps)-1].At)
}

// String is a compact JSON rendering, for logs and tests.
func (sc *Scenario) String() string {
	var b bytes.Buffer
	_ = json.NewEncoder(&b).Encode(sc)
	return strings.TrimSpace(b.String())
}

// MapInstances renames instances in every step (instance patches and fault rules) by m, from
// the names a file was written for to a cluster's, e.g. make run's node-a2 to a local
// cluster's node-1. Names not in m stay.
func (sc *Scenario) MapInstances(m map[string]string) {
	for i := range sc.Steps {
		s := &sc.Steps[i]
		if s.Instance != nil {
			if to, ok := m[s.Instance.ID]; ok {
				s.Instance.ID = to
			}
		}
		if s.Fault != nil && s.Fault.InstanceID != "" {
			if to, ok := m[s.Fault.InstanceID]; ok {
				s.Fault.InstanceID = to
			}
		}
	}
}

// ParseInstanceMap parses FROM=TO pairs (flag values) into a map for MapInstances.
func ParseInstanceMap(pairs []string) (map[string]string, error) {
	m := map[string]string{}
	var errs []error
	for _, p := range pairs {
		from, to, ok := strings.Cut(p, "=")
		if !ok || cloud.CheckID("instance", from) != nil || cloud.CheckID("instance", to) != nil {
			errs = append(errs, fmt.Errorf("instance map %s: want FROM=TO, two instance IDs", cloud.Quote(p)))
			continue
		}
		m[from] = to
	}
	return m, errors.Join(errs...)
}

// stepAt names the step of doc's steps list (doc: the file, parsed) that holds line
// (1-based) as validate names steps, "steps[N] (at T)"; "" when line is in no step (or doc is
// no YAML mapping).
func stepAt(doc *yamlv3.Node, line int) string {
	if len(doc.Content) == 0 || doc.Content[0].Kind != yamlv3.MappingNode {
		return ""
	}
	root := doc.Content[0].Content
	for i := 0; i+1 < len(root); i += 2 {
		if root[i].Value != "steps" || root[i+1].Kind != yamlv3.SequenceNode {
			continue
		}
		items := root[i+1].Content
		n := -1
		for j, item := range items {
			if item.Line <= line {
				n = j
			}
		}
		if n < 0 {
			return ""
		}
		where := fmt.Sprintf("steps[%d]", n)
		if kv := items[n].Content; items[n].Kind == yamlv3.MappingNode {
			for k := 0; k+1 < len(kv); k += 2 {
				if kv[k].Value == "at" {
					where += " (at " + kv[k+1].Value + ")"
				}
			}
		}
		return where
	}
	return ""
}

// checkExpansion parses data with go.yaml.in/yaml/v3 (its error, with its line, for YAML that
// does not parse) and refuses YAML whose aliases expand past MaxExpandedBytes
// (ErrExpandedTooLarge), measured on the node tree, which keeps an alias as a pointer to its
// anchor's node: each node's expanded size is computed once, so the walk costs the file's
// size however far the aliases would expand. Only this tree is decoded after (decode), so
// nothing expands what was not measured.
func checkExpansion(data []byte) (*yamlv3.Node, error) {
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		return nil, yamlcheck.Syntax(data, err)
	}
	m := expansion{sizes: map[*yamlv3.Node]int64{}, open: map[*yamlv3.Node]bool{}}
	size, err := m.size(&doc)
	if err != nil {
		return nil, err
	}
	if size > MaxExpandedBytes {
		return nil, fmt.Errorf("%w: over %d bytes once its aliases are expanded (at most %d; the file is %d bytes)",
			ErrExpandedTooLarge, MaxExpandedBytes, MaxExpandedBytes, len(data))
	}
	return &doc, nil
}

// expansion measures nodes' expanded sizes, each node once.
type expansion struct {
	// sizes are the measured nodes' sizes, saturated at MaxExpandedBytes+1.
	sizes map[*yamlv3.Node]int64
	// open are the nodes being measured: an alias to one of them is a cycle.
	open map[*yamlv3.Node]bool
}

func (m *expansion) size(n *yamlv3.Node) (int64, error) {
	if n == nil {
		return 0, nil
	}
	if v, ok := m.sizes[n]; ok {
		return v, nil
	}
	if m.open[n] {
		return 0, fmt.Errorf("%w: line %d: an alias to a node that contains it", ErrExpandedTooLarge, n.Line)
	}
	m.open[n] = true
	defer delete(m.open, n)
	total := int64(expandedNodeBytes)
	switch n.Kind {
	case yamlv3.AliasNode:
		v, err := m.size(n.Alias)
		if err != nil {
			return 0, err
		}
		total += v
	case yamlv3.ScalarNode:
		total += int64(len(n.Value))
	default:
		for _, c := range n.Content {
			v, err := m.size(c)
			if err != nil {
				return 0, err
			}
			// Saturate: past the bound the exact figure does not matter, and nested
			// aliases could overflow it.
			if total += v; total > MaxExpandedBytes {
				total = MaxExpandedBytes + 1
				break
			}
		}
	}
	total = min(total, MaxExpandedBytes+1)
	m.sizes[n] = total
	return total, nil
}
