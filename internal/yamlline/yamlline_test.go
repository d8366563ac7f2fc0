package yamlline_test

import (
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/fakecloud/fakecloud-csi/internal/yamlline"
)

func TestOf(t *testing.T) {
	data := []byte("name: x\nsteps:\n  - at: 1s\n    bogus: 1\n  - instance: {id: n, outOfBand: 1}\n\"quoted\": 2\n")
	tests := []struct {
		err  error
		want string
	}{
		{errors.New(`json: unknown field "bogus"`), " (line 4)"},
		{errors.New(`error unmarshaling JSON: while decoding JSON: json: unknown field "outOfBand"`), " (line 5)"},
		{errors.New(`json: unknown field "quoted"`), " (line 6)"},
		{errors.New(`json: unknown field "absent"`), ""},
		{errors.New("mapping values are not allowed"), ""},
		{nil, ""},
	}
	for _, tt := range tests {
		if got := yamlline.Of(data, tt.err); got != tt.want {
			t.Errorf("Of(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestMessage(t *testing.T) {
	for in, want := range map[string]string{
		`error unmarshaling JSON: while decoding JSON: json: unknown field "bogus"`:                   `unknown field "bogus"`,
		`error converting YAML to JSON: yaml: line 3: mapping values are not allowed in this context`: `yaml: line 3: mapping values are not allowed in this context`,
		`json: cannot unmarshal string into Go struct field Step.steps.at of type int`:                `cannot unmarshal string into Go struct field Step.steps.at of type int`,
		`plain`: `plain`,
	} {
		orig := errors.New(in)
		if got := yamlline.Message(orig); got != want {
			t.Errorf("Message(%q) = %q, want %q", in, got, want)
		}
		if c := yamlline.Clean(orig); c.Error() != want || !errors.Is(c, orig) {
			t.Errorf("Clean(%q) = %q (wraps it: %v), want %q wrapping it", in, c, errors.Is(c, orig), want)
		}
	}
}

// explainSeed is the shape of a small seed file, for TestExplain.
type explainSeed struct {
	Instances []struct {
		ID             string `json:"id"`
		AttachLimit    *int   `json:"attachLimit,omitempty"`
		OutOfBandSlots int    `json:"outOfBandSlots"`
	} `json:"instances"`
	Quotas *struct {
		Attachments   int64 `json:"attachments"`
		CapacityBytes int64 `json:"capacityBytes"`
	} `json:"quotas,omitempty"`
	Volumes []struct {
		SizeBytes int64 `json:"sizeBytes"`
	} `json:"volumes,omitempty"`
	Tokens []struct {
		Token string `json:"token"`
		Admin bool   `json:"admin"`
	} `json:"tokens,omitempty"`
	Steps []struct {
		Fault *struct {
			Ref string `json:"ref"`
			ExplainRule
		} `json:"fault"`
	} `json:"steps,omitempty"`
	Probability float64 `json:"probability,omitempty"`
	TTLSeconds  uint    `json:"ttlSeconds,omitempty"`
}

// ExplainRule is embedded, as scenario.FaultStep embeds cloud.FaultRule: encoding/json puts
// its Go name in the field path, which the file never says.
type ExplainRule struct {
	Probability *float64 `json:"probability"`
}

// TestExplain: decoding errors name the field as written (with its list index), its line,
// and what the field wants, in block and flow style, never Go's struct or type names.
func TestExplain(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"a size with a unit", "volumes:\n  - sizeBytes: 1\n  - sizeBytes: 2\n  - sizeBytes: 10Gi\n",
			`line 4, volumes[2].sizeBytes: want a whole number of bytes like 10737418240 (10 GiB; no units such as 10Gi), got "10Gi"`},
		{"flow style", "instances: [{id: a, outOfBandSlots: 1}, {id: b, outOfBandSlots: one}]\n",
			`line 1, instances[1].outOfBandSlots: want a whole number, got "one"`},
		{"a fraction for a whole number", "instances:\n  - id: a\n    attachLimit: 4.5\n",
			`line 3, instances[0].attachLimit: want a whole number, got 4.5`},
		{"a mapping for a number", "quotas:\n  attachments: {max: 3}\n", `line 2, quotas.attachments: want a whole number, got a mapping`},
		{"a list for a mapping", "quotas: [1, 2]\n", `line 1, quotas: want a mapping of fields, got a list`},
		{"a mapping for a list", "instances: {id: a}\n", `line 1, instances: want a list, got a mapping`},
		{"a string for a bool", "tokens:\n  - token: t\n    admin: maybe\n", `line 3, tokens[0].admin: want true or false, got "maybe"`},
		{"a string for a number", "probability: half\n", `line 1, probability: want a number, got "half"`},
		{"a negative count", "ttlSeconds: -5\n", `line 1, ttlSeconds: want a whole number of seconds like 60, 0 or more, got -5`},
		{"a list for the file", "- a\n- b\n", `line 1: want a mapping of fields, got a list`},
		{"a field of an embedded struct", "steps:\n  - fault: {ref: a, probability: 0.5}\n  - fault: {ref: b, probability: 5%}\n",
			`line 3, steps[1].fault.probability: want a number, got "5%"`},
		{"a long value is cut", "volumes:\n  - sizeBytes: " + strings.Repeat("x", 200) + "\n",
			`line 2, volumes[0].sizeBytes: want a whole number of bytes like 10737418240 (10 GiB; no units such as 10Gi), got "` + strings.Repeat("x", yamlline.MaxQuotedBytes) + `..."`},
		{"an unknown field names where it is", "instances:\n  - id: a\n  - idd: b\n", `line 3, instances[1]: unknown field "idd" (did you mean "id"?)`},
		// No field of quotas is close: no guess.
		{"an unknown field in flow style", "quotas: {attachments: 1, volume: 2}\n", `line 1, quotas: unknown field "volume"`},
		{"a field without its s", "instances:\n  - id: a\n    outOfBandSlot: 1\n",
			`line 3, instances[0]: unknown field "outOfBandSlot" (did you mean "outOfBandSlots"?)`},
		{"a top-level field mistyped", "instance:\n  - id: a\n", `line 1: unknown field "instance" (did you mean "instances"?)`},
		{"a field of an embedded struct mistyped", "steps:\n  - fault: {ref: a, probabilty: 0.5}\n",
			`line 2, steps[0].fault: unknown field "probabilty" (did you mean "probability"?)`},
		{"a case and an edit apart", "quotas:\n  attachments: 1\n  capacitybyte: 2\n",
			`line 3, quotas: unknown field "capacitybyte" (did you mean "capacityBytes"?)`},
		{"a short field: one edit at most", "tokens:\n  - tokn: t\n  - tkn: u\n", `line 2, tokens[0]: unknown field "tokn" (did you mean "token"?)`},
		{"a short field two edits away: no guess", "tokens:\n  - tkn: t\n", `line 2, tokens[0]: unknown field "tkn"`},
		{"a syntax error keeps the parser's line", "instances:\n  - id: a\n   bad: [\n", `yaml: line 2: did not find expected '-' indicator`},
		// A tab: where it is and that YAML forbids it, then the parser's own words.
		{"a tab in a list item's indentation", "instances:\n  - id: a\n\toutOfBandSlots: 1\n",
			"line 3: YAML does not allow tabs for indentation, indent with spaces (yaml: line 3: found a tab character that violates indentation)"},
		{"a tab for a mapping's indentation", "quotas:\n\tattachments: 3\n",
			"line 2: YAML does not allow tabs for indentation, indent with spaces (yaml: line 2: found character that cannot start any token)"},
		{"spaces then a tab", "quotas:\n  attachments: 3\n  \tcapacityBytes: 4\n",
			"line 3: YAML does not allow tabs for indentation, indent with spaces (yaml: line 3: found a tab character that violates indentation)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v explainSeed
			err := yaml.UnmarshalStrict([]byte(tt.yaml), &v)
			if err == nil {
				t.Fatal("decoded without error")
			}
			got := yamlline.Explain([]byte(tt.yaml), err, &v)
			if got.Error() != tt.want {
				t.Fatalf("Explain:\n got %s\nwant %s\n(from %v)", got, tt.want, err)
			}
			for _, bad := range []string{"Go struct", "Go value", "int64", "explainSeed", "ExplainRule", "JSON", "json:"} {
				if strings.Contains(got.Error(), bad) {
					t.Errorf("Explain: %s names %q", got, bad)
				}
			}
			if !errors.Is(got, err) {
				t.Errorf("Explain does not wrap the decoder's error")
			}
		})
	}
	if yamlline.Explain(nil, nil, nil) != nil {
		t.Error("Explain(nil) is not nil")
	}
}

// TestAtLines: problems that begin with a path get its line; others stay as they are.
func TestAtLines(t *testing.T) {
	data := []byte("instances:\n  - id: a\n  - id: b\n    zone: x\nsteps:\n  - at: 1s\n")
	err := errors.Join(errors.New("instances[1]: unknown instance type"), errors.New("instances[1].zone: bad zone"),
		errors.New("steps[0] (at 1s): no action"), errors.New("no steps"), errors.New("instances[7]: absent"))
	got := yamlline.AtLines(data, err)
	want := "line 3, instances[1]: unknown instance type\nline 4, instances[1].zone: bad zone\nline 6, steps[0] (at 1s): no action\nno steps\ninstances[7]: absent"
	if got.Error() != want || !errors.Is(got, err) {
		t.Fatalf("AtLines:\n%s\nwant\n%s", got, want)
	}
	if yamlline.AtLines(data, nil) != nil {
		t.Error("AtLines(nil) is not nil")
	}
}

// longField has a field name past MaxQuotedBytes, for TestSuggest's bound.
type longField struct {
	Long int `json:"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"`
	Max  int `json:"maxAttachments"`
}

// TestSuggest: the guess for a caller that words the error itself, and its bound: a field
// written longer than MaxQuotedBytes gets no guess (no edit distance over a huge key).
func TestSuggest(t *testing.T) {
	long := strings.Repeat("a", 71) + "b" // one edit from longField.Long
	tests := []struct {
		name, yaml string
		into       any
		want       string
	}{
		{"one s short", "maxAttachment: 1\n", &longField{}, "maxAttachments"},
		{"past the bound", long + ": 1\n", &longField{}, ""},
		{"no target given", "maxAttachment: 1\n", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := yaml.UnmarshalStrict([]byte(tt.yaml), &longField{})
			if err == nil {
				t.Fatal("decoded without error")
			}
			if got := yamlline.Suggest([]byte(tt.yaml), err, tt.into); got != tt.want {
				t.Errorf("Suggest = %q, want %q", got, tt.want)
			}
		})
	}
	if got := yamlline.Suggest(nil, nil, &longField{}); got != "" {
		t.Errorf("Suggest(nil) = %q", got)
	}
}
