package faults_test

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/faults"
)

// fakeClock is a settable clock.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

var attach = faults.Call{Operation: cloud.OperationAttachVolume, InstanceID: "node-a", VolumeID: "vol-1"}

// pattern runs n calls and returns which fired as a string of 1s and 0s.
func pattern(e *faults.Engine, c faults.Call, n int) string {
	var b strings.Builder
	for range n {
		if out := e.Evaluate(c); out.Err != nil {
			b.WriteByte('1')
		} else {
			b.WriteByte('0')
		}
	}
	return b.String()
}

func newEngine(t *testing.T, clock *fakeClock, rules ...cloud.FaultRule) *faults.Engine {
	t.Helper()
	e := faults.New(clock.now)
	for _, r := range rules {
		if _, err := e.Add(r); err != nil {
			t.Fatalf("Add(%+v): %v", r, err)
		}
	}
	return e
}

func TestProbabilityIsDeterministicPerSeed(t *testing.T) {
	clock := &fakeClock{t: time.Unix(0, 0)}
	rule := cloud.FaultRule{Operation: cloud.OperationAttachVolume, Error: cloud.CodeThrottled, Probability: new(0.5), Seed: 7}
	a := pattern(newEngine(t, clock, rule), attach, 200)
	b := pattern(newEngine(t, clock, rule), attach, 200)
	if a != b {
		t.Fatalf("same seed, different patterns:\n%s\n%s", a, b)
	}
	fired := strings.Count(a, "1")
	if fired < 60 || fired > 140 {
		t.Fatalf("probability 0.5 fired %d of 200", fired)
	}
	rule.Seed = 8
	if c := pattern(newEngine(t, clock, rule), attach, 200); c == a {
		t.Fatalf("seeds 7 and 8 gave the same pattern")
	}
}

func TestAfterCountCountAndTTL(t *testing.T) {
	tests := []struct {
		name string
		rule cloud.FaultRule
		want string
	}{
		{"always", cloud.FaultRule{Operation: cloud.OperationAttachVolume, Error: cloud.CodeUnavailable}, "111111"},
		{"afterCount", cloud.FaultRule{Operation: cloud.OperationAttachVolume, Error: cloud.CodeUnavailable, AfterCount: 2}, "001111"},
		{"count", cloud.FaultRule{Operation: cloud.OperationAttachVolume, Error: cloud.CodeUnavailable, Count: 2}, "110000"},
		{"afterCount and count", cloud.FaultRule{Operation: cloud.OperationAttachVolume, Error: cloud.CodeUnavailable, AfterCount: 1, Count: 3}, "011100"},
		{"any operation", cloud.FaultRule{Operation: cloud.OperationAny, Error: cloud.CodeUnavailable}, "111111"},
		{"other operation", cloud.FaultRule{Operation: cloud.OperationDetachVolume, Error: cloud.CodeUnavailable}, "000000"},
		{"this instance", cloud.FaultRule{Operation: cloud.OperationAny, InstanceID: "node-a", Error: cloud.CodeUnavailable}, "111111"},
		{"other instance", cloud.FaultRule{Operation: cloud.OperationAny, InstanceID: "node-b", Error: cloud.CodeUnavailable}, "000000"},
		{"other volume", cloud.FaultRule{Operation: cloud.OperationAny, VolumeID: "vol-2", Error: cloud.CodeUnavailable}, "000000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Unix(0, 0)}
			if got := pattern(newEngine(t, clock, tt.rule), attach, 6); got != tt.want {
				t.Fatalf("fired %s, want %s", got, tt.want)
			}
		})
	}

	t.Run("ttl", func(t *testing.T) {
		clock := &fakeClock{t: time.Unix(1000, 0)}
		e := newEngine(t, clock, cloud.FaultRule{Operation: cloud.OperationAny, Error: cloud.CodeUnavailable, TTLSeconds: 30})
		if rules := e.List(); len(rules) != 1 || rules[0].ExpiresAt == nil || !rules[0].ExpiresAt.Equal(time.Unix(1030, 0)) {
			t.Fatalf("rules %+v", rules)
		}
		if got := pattern(e, attach, 1); got != "1" {
			t.Fatalf("before expiry: %s", got)
		}
		clock.t = clock.t.Add(29 * time.Second)
		if got := pattern(e, attach, 1); got != "1" {
			t.Fatalf("1s before expiry: %s", got)
		}
		clock.t = clock.t.Add(time.Second)
		if got := pattern(e, attach, 1); got != "0" {
			t.Fatalf("at expiry: %s", got)
		}
		if rules := e.List(); len(rules) != 0 {
			t.Fatalf("expired rule still listed: %+v", rules)
		}
	})
}

func TestLatencyAndFirstErrorWins(t *testing.T) {
	clock := &fakeClock{t: time.Unix(0, 0)}
	e := newEngine(t, clock,
		cloud.FaultRule{Operation: cloud.OperationAny, LatencyMS: 20},
		cloud.FaultRule{Operation: cloud.OperationAttachVolume, Error: cloud.CodeThrottled, LatencyMS: 5},
		cloud.FaultRule{Operation: cloud.OperationAttachVolume, Error: cloud.CodeAccessDenied},
	)
	out := e.Evaluate(attach)
	if out.Delay != 25*time.Millisecond || out.Err == nil || out.Err.Code != cloud.CodeThrottled || len(out.Fired) != 2 {
		t.Fatalf("outcome %+v", out)
	}
	out = e.Evaluate(faults.Call{Operation: cloud.OperationGetCapacity})
	if out.Delay != 20*time.Millisecond || out.Err != nil {
		t.Fatalf("latency-only outcome %+v", out)
	}
	rules := e.List()
	if rules[0].Fired != 2 || rules[1].Fired != 1 || rules[2].Fired != 0 {
		t.Fatalf("fired counts %d %d %d", rules[0].Fired, rules[1].Fired, rules[2].Fired)
	}
}

func TestResetRestoresSeededRules(t *testing.T) {
	clock := &fakeClock{t: time.Unix(0, 0)}
	seeded := []cloud.FaultRule{{ID: "outage", Operation: cloud.OperationAny, Error: cloud.CodeUnavailable, Count: 1}}
	e := faults.New(clock.now)
	if err := e.Reset(seeded); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Add(cloud.FaultRule{Operation: cloud.OperationAny, LatencyMS: 1}); err != nil {
		t.Fatal(err)
	}
	pattern(e, attach, 3)
	if err := e.Reset(seeded); err != nil {
		t.Fatal(err)
	}
	rules := e.List()
	if len(rules) != 1 || rules[0].ID != "outage" || rules[0].Fired != 0 {
		t.Fatalf("after reset %+v", rules)
	}
	if err := e.Delete("outage"); err != nil {
		t.Fatal(err)
	}
	if err := e.Delete("outage"); cloud.CodeOf(err) != cloud.CodeFaultNotFound {
		t.Fatalf("second delete: %v", err)
	}
	if err := e.Reset([]cloud.FaultRule{{Operation: "Nope", Error: cloud.CodeUnavailable}}); cloud.CodeOf(err) != cloud.CodeInvalidArgument {
		t.Fatalf("bad seeded rule: %v", err)
	}
}

func TestProbabilityRange(t *testing.T) {
	for _, tc := range []struct {
		name        string
		probability *float64
		wantErr     bool
		want        float64 // the probability the added rule reports
	}{
		{"omitted means always", nil, false, 1},
		{"one", new(1.0), false, 1},
		{"a half", new(0.5), false, 0.5},
		{"zero is refused, not read as always", new(0.0), true, 0},
		{"negative", new(-0.1), true, 0},
		{"above one", new(1.5), true, 0},
		{"NaN", new(math.NaN()), true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := faults.New(time.Now)
			got, err := e.Add(cloud.FaultRule{Operation: cloud.OperationAttachVolume, Error: cloud.CodeThrottled, Probability: tc.probability})
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "probability") {
					t.Fatalf("Add: err = %v, want a probability error", err)
				}
				if n := len(e.List()); n != 0 {
					t.Fatalf("a refused rule was kept: %d rules", n)
				}
				return
			}
			if err != nil {
				t.Fatalf("Add: %v", err)
			}
			if got.Probability == nil || *got.Probability != tc.want {
				t.Fatalf("probability = %v, want %v", got.Probability, tc.want)
			}
			*got.Probability = 0 // the caller's copy; the engine's rule must not change
			if p := *e.List()[0].Probability; p != tc.want {
				t.Fatalf("engine's probability changed through a returned rule: %v", p)
			}
		})
	}
}

func TestValidateRefusesWithAClearMessage(t *testing.T) {
	tests := []struct {
		name string
		rule cloud.FaultRule
		want string // a substring of the error; "" means valid
	}{
		{"no operation", cloud.FaultRule{Error: cloud.CodeUnavailable}, "operation is required"},
		{"unknown operation", cloud.FaultRule{Operation: "Explode", Error: cloud.CodeUnavailable}, `unknown operation "Explode"`},
		{"latency that wraps a Duration", cloud.FaultRule{Operation: cloud.OperationAny, LatencyMS: math.MaxInt64}, "latencyMs must be in [0, 60000]"},
		{"latency a millisecond over the maximum", cloud.FaultRule{Operation: cloud.OperationAny, LatencyMS: 60001}, "latencyMs"},
		{"latency at the maximum", cloud.FaultRule{Operation: cloud.OperationAny, LatencyMS: 60000}, ""},
		{"TTL that wraps a Duration", cloud.FaultRule{Operation: cloud.OperationAny, Error: cloud.CodeUnavailable, TTLSeconds: math.MaxInt64}, "ttlSeconds must be in [0, 31536000]"},
		{"TTL a second over a year", cloud.FaultRule{Operation: cloud.OperationAny, Error: cloud.CodeUnavailable, TTLSeconds: 31536001}, "ttlSeconds"},
		{"TTL of a year", cloud.FaultRule{Operation: cloud.OperationAny, Error: cloud.CodeUnavailable, TTLSeconds: 31536000}, ""},
		{"count and TTL 0 mean unlimited", cloud.FaultRule{Operation: cloud.OperationAny, Error: cloud.CodeUnavailable}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := faults.Validate(tt.rule)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate: %v, want valid", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestFiredCountsFollowTheRules: counts are per rule and call operation, and a rule's counts
// go with the rule, also when its TTL passes.
func TestFiredCountsFollowTheRules(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	e := newEngine(t, clock,
		cloud.FaultRule{Operation: cloud.OperationAny, LatencyMS: 1, TTLSeconds: 10},
		cloud.FaultRule{Operation: cloud.OperationGetCapacity, LatencyMS: 1},
	)
	for _, op := range []cloud.Operation{cloud.OperationAttachVolume, cloud.OperationGetCapacity, cloud.OperationAttachVolume} {
		e.Evaluate(faults.Call{Operation: op})
	}
	steps := []struct {
		advance time.Duration
		want    []faults.FiredCount
	}{
		{0, []faults.FiredCount{
			{RuleID: "fault-1", Operation: cloud.OperationAttachVolume, Count: 2},
			{RuleID: "fault-1", Operation: cloud.OperationGetCapacity, Count: 1},
			{RuleID: "fault-2", Operation: cloud.OperationGetCapacity, Count: 1},
		}},
		{9 * time.Second, []faults.FiredCount{
			{RuleID: "fault-1", Operation: cloud.OperationAttachVolume, Count: 2},
			{RuleID: "fault-1", Operation: cloud.OperationGetCapacity, Count: 1},
			{RuleID: "fault-2", Operation: cloud.OperationGetCapacity, Count: 1},
		}},
		{time.Second, []faults.FiredCount{{RuleID: "fault-2", Operation: cloud.OperationGetCapacity, Count: 1}}},
	}
	for i, st := range steps {
		clock.t = clock.t.Add(st.advance)
		if got := e.FiredCounts(); !slices.Equal(got, st.want) {
			t.Fatalf("step %d: FiredCounts = %+v, want %+v", i, got, st.want)
		}
	}
	if err := e.Delete("fault-2"); err != nil {
		t.Fatal(err)
	}
	if got := e.FiredCounts(); len(got) != 0 {
		t.Fatalf("after deleting the last rule: %+v", got)
	}
}

func TestGeneratedIDsSkipSeededOnes(t *testing.T) {
	e := faults.New(time.Now)
	// A seed rule without an ID comes before one that calls itself fault-1, and one calls
	// itself fault-3: generated IDs must step around both.
	seeded := []cloud.FaultRule{
		{Operation: cloud.OperationAttachVolume, Error: cloud.CodeThrottled},
		{ID: "fault-1", Operation: cloud.OperationDetachVolume, Error: cloud.CodeThrottled},
		{ID: "fault-3", Operation: cloud.OperationGetCapacity, Error: cloud.CodeThrottled},
	}
	if err := e.Reset(seeded); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := e.Add(cloud.FaultRule{Operation: cloud.OperationAny, LatencyMS: 1}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for _, r := range e.List() {
		if seen[r.ID] {
			t.Fatalf("two rules have ID %s: %+v", r.ID, e.List())
		}
		seen[r.ID] = true
	}
	if len(seen) != 6 {
		t.Fatalf("%d rules, want 6: %+v", len(seen), e.List())
	}
	// A reset gives the seeded rule without an ID the same ID as before.
	first := e.List()[0].ID
	if err := e.Reset(seeded); err != nil {
		t.Fatal(err)
	}
	if got := e.List()[0].ID; got != first {
		t.Fatalf("after reset the unnamed seeded rule is %s, was %s", got, first)
	}
}

// TestGetReturnsOneLiveRule: Get answers the rule as List does (fired count included), and
// FaultNotFound once it is deleted or its TTL has passed.
func TestGetReturnsOneLiveRule(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	e := newEngine(t, clock,
		cloud.FaultRule{Operation: cloud.OperationAttachVolume, Error: cloud.CodeThrottled},
		cloud.FaultRule{Operation: cloud.OperationAny, Error: cloud.CodeUnavailable, TTLSeconds: 30, InstanceID: "node-b"})
	if got := pattern(e, attach, 2); got != "11" {
		t.Fatalf("fired %s, want 11", got)
	}
	list := e.List()
	for _, want := range list {
		got, err := e.Get(want.ID)
		if err != nil {
			t.Fatalf("Get(%s): %v", want.ID, err)
		}
		if got.ID != want.ID || got.Fired != want.Fired || got.Error != want.Error || !equalTime(got.ExpiresAt, want.ExpiresAt) {
			t.Errorf("Get(%s) = %+v, want %+v", want.ID, got, want)
		}
	}
	if got, _ := e.Get(list[0].ID); got.Fired != 2 {
		t.Errorf("Get(%s).Fired = %d, want 2", list[0].ID, got.Fired)
	}
	if err := e.Delete(list[0].ID); err != nil {
		t.Fatal(err)
	}
	clock.t = clock.t.Add(30 * time.Second) // the second rule's TTL ends
	for _, id := range []string{list[0].ID, list[1].ID, "fault-99"} {
		if _, err := e.Get(id); cloud.CodeOf(err) != cloud.CodeFaultNotFound {
			t.Errorf("Get(%s) after delete/expiry: %v, want FaultNotFound", id, err)
		}
	}
}

func equalTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// TestUnknownErrorCodeListsTheValidOnes: the refusal of an unknown code names every code a
// rule may use, so the caller can pick one without reading the source.
func TestUnknownErrorCodeListsTheValidOnes(t *testing.T) {
	err := faults.Validate(cloud.FaultRule{Operation: cloud.OperationAny, Error: "Nope"})
	if err == nil {
		t.Fatal("Validate accepted error code Nope")
	}
	if !strings.Contains(err.Error(), `unknown error code "Nope"`) {
		t.Errorf("Validate: %v, want it to name the code", err)
	}
	for _, c := range cloud.Codes() {
		if !strings.Contains(err.Error(), string(c)) {
			t.Errorf("Validate: %v, does not list valid code %s", err, c)
		}
	}
}
