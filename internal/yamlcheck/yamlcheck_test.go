package yamlcheck_test

import (
	"errors"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/fakecloud/fakecloud-csi/internal/yamlcheck"
)

// checkSeed is the shape of a small seed file, for TestCheck.
type checkSeed struct {
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
			CheckRule
		} `json:"fault"`
	} `json:"steps,omitempty"`
	Probability float64 `json:"probability,omitempty"`
	TTLSeconds  uint    `json:"ttlSeconds,omitempty"`
}

// CheckRule is embedded, as scenario.FaultStep embeds cloud.FaultRule: encoding/json puts
// its Go name in the field path, which the file never says.
type CheckRule struct {
	Probability *float64 `json:"probability"`
}

// parse is data's node tree, failing the test when it does not parse.
func parse(t *testing.T, data string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(data), &doc); err != nil {
		t.Fatal(err)
	}
	return &doc
}

// TestCheck: each value that does not fit names the field as written (with its list index),
// its line, and what the field wants, in block and flow style, never Go's struct or type
// names; an unknown field names where it is and the field likely meant. Every problem is
// reported, in file order.
func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string // the problems, one a line
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
			`line 2, volumes[0].sizeBytes: want a whole number of bytes like 10737418240 (10 GiB; no units such as 10Gi), got "` + strings.Repeat("x", yamlcheck.MaxQuotedBytes) + `..."`},
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
		{"a short field: one edit at most", "tokens:\n  - tokn: t\n  - tkn: u\n",
			`line 2, tokens[0]: unknown field "tokn" (did you mean "token"?)` + "\n" + `line 3, tokens[1]: unknown field "tkn"`},
		{"a short field two edits away: no guess", "tokens:\n  - tkn: t\n", `line 2, tokens[0]: unknown field "tkn"`},
		{"a value in quotes for a bool", "tokens:\n  - admin: \"true\"\n", `line 2, tokens[0].admin: want true or false, got "true"`},
		{"a whole number too large", "quotas:\n  attachments: 99999999999999999999\n",
			`line 2, quotas.attachments: want a whole number, got 99999999999999999999`},
		{"a field set twice", "quotas:\n  attachments: 1\n  attachments: 2\n", `line 3, quotas.attachments: set twice (first on line 2)`},
		{"a key whose value starts below names the key's line", "quotas:\n  attachments:\n    - 1\n",
			`line 2, quotas.attachments: want a whole number, got a list`},
		{"every problem, in file order", "zzz: 1\ninstances:\n  - id: [a]\n    idd: b\nquotas: {attachments: x}\naaa: 2\n",
			`line 1: unknown field "zzz"` + "\n" + `line 3, instances[0].id: want a string (quote a value that YAML would read as a number or true/false), got a list` + "\n" +
				`line 4, instances[0]: unknown field "idd" (did you mean "id"?)` + "\n" + `line 5, quotas.attachments: want a whole number, got "x"` + "\n" +
				`line 6: unknown field "aaa"`},
		{"through a merge key", "quotas:\n  <<: {attachments: x}\n", `line 2, quotas.attachments: want a whole number, got "x"`},
		// The strict decoder refuses a key that overrides a merged one.
		{"a merged field set again", "quotas:\n  <<: {attachments: 1}\n  attachments: 2\n", `line 3, quotas.attachments: set twice (first on line 2)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := yamlcheck.Problems(yamlcheck.Check(parse(t, tt.yaml), &checkSeed{}, 20))
			if got == nil || got.Error() != tt.want {
				t.Fatalf("Check:\n got %v\nwant %s", got, tt.want)
			}
			for _, bad := range []string{"Go struct", "Go value", "int64", "checkSeed", "CheckRule", "JSON", "json:"} {
				if strings.Contains(got.Error(), bad) {
					t.Errorf("Check: %s names %q", got, bad)
				}
			}
		})
	}
}

// TestCheckAccepts: what sigs.k8s.io/yaml decodes fits: nulls, a number or true/false for a
// string, YAML 1.1's yes and on for a bool, a hexadecimal whole number, an alias, a merge key.
func TestCheckAccepts(t *testing.T) {
	data := "instances:\n  - &a {id: 12, attachLimit: ~, outOfBandSlots: 0x10}\n  - *a\n  - {<<: *a}\n" +
		"tokens:\n  - {token: true, admin: yes}\n  - {token: u, admin: On}\nquotas: ~\nprobability: 1\n"
	if ps := yamlcheck.Check(parse(t, data), &checkSeed{}, 20); len(ps) > 0 {
		t.Fatalf("Check: %v, want no problem", yamlcheck.Problems(ps))
	}
	var v checkSeed
	if err := yamlcheck.Decode([]byte(data), &v); err != nil || len(v.Instances) != 3 || v.Instances[1].OutOfBandSlots != 16 || v.Instances[2].ID != "12" || v.Tokens[0].Token != "true" || !v.Tokens[1].Admin {
		t.Fatalf("Decode: %+v, %v", v, err)
	}
}

// TestCheckBounds: at most limit problems, and an anchored value is checked once however
// often it is aliased, so a check costs the file's size, not its expansion.
func TestCheckBounds(t *testing.T) {
	var b strings.Builder
	b.WriteString("a: &a [{sizeBytes: x}, {sizeBytes: y}]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n")
	prev := "b"
	for _, n := range []string{"c", "d", "e", "f", "g", "h", "i", "j", "k"} {
		b.WriteString(n + ": &" + n + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n")
		prev = n
	}
	type bomb struct {
		Volumes [][][][][][][][][][][]struct {
			SizeBytes int64 `json:"sizeBytes"`
		} `json:"volumes"`
	}
	doc := parse(t, b.String()+"volumes: *k\n")
	// 11 unknown fields (a to k) and the two sizes of a, each once: not the 2*10^10 values
	// of volumes once expanded.
	if ps := yamlcheck.Check(doc, &bomb{}, 1000); len(ps) != 13 {
		t.Fatalf("%d problems, want 13:\n%v", len(ps), yamlcheck.Problems(ps))
	}
	if ps := yamlcheck.Check(parse(t, "zzz: 1\nyyy: 2\nxxx: 3\n"), &checkSeed{}, 2); len(ps) != 2 {
		t.Fatalf("%d problems, want the limit, 2", len(ps))
	}
}

// TestSyntax: a tab in the indentation says where it is and that YAML forbids it, then the
// parser's own words without its line (the line before, for a tab in a list item's
// indentation); another syntax error is the parser's, with its line.
func TestSyntax(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"a syntax error keeps the parser's line", "instances:\n  - id: a\n   bad: [\n", "yaml: line "},
		{"a tab in a list item's indentation", "instances:\n  - id: a\n\toutOfBandSlots: 1\n",
			"line 3: YAML does not allow tabs for indentation, indent with spaces (found a tab character that violates indentation)"},
		{"a tab for a mapping's indentation", "quotas:\n\tattachments: 3\n",
			"line 2: YAML does not allow tabs for indentation, indent with spaces (found character that cannot start any token)"},
		{"spaces then a tab", "quotas:\n  attachments: 3\n  \tcapacityBytes: 4\n",
			"line 3: YAML does not allow tabs for indentation, indent with spaces (found a tab character that violates indentation)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var doc yaml.Node
			err := yaml.Unmarshal([]byte(tt.yaml), &doc)
			if err == nil {
				t.Fatal("parsed")
			}
			got := yamlcheck.Syntax([]byte(tt.yaml), err)
			if !strings.HasPrefix(got.Error(), tt.want) || !errors.Is(got, err) {
				t.Fatalf("Syntax:\n got %v\nwant %s... wrapping the parser's error", got, tt.want)
			}
		})
	}
	if yamlcheck.Syntax(nil, nil) != nil {
		t.Error("Syntax(nil) is not nil")
	}
}

// TestAtLines: problems that begin with a path get its line; others stay as they are.
func TestAtLines(t *testing.T) {
	doc := parse(t, "instances:\n  - id: a\n  - id: b\n    zone: x\nsteps:\n  - at: 1s\n")
	err := errors.Join(errors.New("instances[1]: unknown instance type"), errors.New("instances[1].zone: bad zone"),
		errors.New("steps[0] (at 1s): no action"), errors.New("no steps"), errors.New("instances[7]: absent"))
	got := yamlcheck.AtLines(doc, err)
	want := "line 3, instances[1]: unknown instance type\nline 4, instances[1].zone: bad zone\nline 6, steps[0] (at 1s): no action\nno steps\ninstances[7]: absent"
	if got.Error() != want || !errors.Is(got, err) {
		t.Fatalf("AtLines:\n%s\nwant\n%s", got, want)
	}
	if yamlcheck.AtLines(doc, nil) != nil {
		t.Error("AtLines(nil) is not nil")
	}
}

// TestNodeAndDrop: Node names the key's line (not the value's, when that starts below); Drop
// removes a mapping's entry and nulls a list's item, so later paths still hold.
func TestNodeAndDrop(t *testing.T) {
	data := "name: x\nsteps:\n  - at: 1s\n    quotas:\n      attachments: many\n  - at: 2s\n    reset: true\n"
	doc := parse(t, data)
	for path, want := range map[string]int{"name": 1, "steps": 2, "steps[0]": 3, "steps[0].quotas": 4,
		"steps[0].quotas.attachments": 5, "steps[1].reset": 7, "steps[2]": 0, "nope": 0, "name[0]": 0, "steps.x": 0} {
		if _, got := yamlcheck.Node(doc, path); got != want {
			t.Errorf("Node(%q) line %d, want %d", path, got, want)
		}
	}
	if !yamlcheck.Drop(doc, "steps[0].quotas") || !yamlcheck.Drop(doc, "name") || yamlcheck.Drop(doc, "nope") {
		t.Fatal("Drop: want true, true, false")
	}
	if !yamlcheck.Drop(doc, "steps[0]") {
		t.Fatal("Drop(steps[0]): false")
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if want := "steps:\n    - null\n    - at: 2s\n      reset: true\n"; string(out) != want {
		t.Errorf("after Drop:\n%s\nwant:\n%s", out, want)
	}
}

// TestDecode: what Check does not look at is the decoder's error, without its words about
// JSON; an empty file decodes to nothing.
func TestDecode(t *testing.T) {
	var v checkSeed
	if err := yamlcheck.Decode(nil, &v); err != nil {
		t.Fatalf("Decode(empty): %v", err)
	}
	err := yamlcheck.Decode([]byte("quotas: {attachments: x}\n"), &v)
	if err == nil || strings.Contains(err.Error(), "JSON") || strings.Contains(err.Error(), "json:") {
		t.Fatalf("Decode: %v, want the decoder's error without its words about JSON", err)
	}
}
