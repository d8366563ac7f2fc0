package server_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

// TestBadFilesNameTheLine: a bad seed or tokens file is reported in the file's terms: the
// field as written (list indexes included), its line, and what the field wants; never Go's
// struct or type names.
func TestBadFilesNameTheLine(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name   string
		tokens bool // a tokens file, else a seed
		yaml   string
		want   string
	}{
		{"unknown seed field", false, "instances:\n  - id: n1\n    zone: zone-a\n    instanceTyp: small\n",
			`line 4, instances[0]: unknown field "instanceTyp" (did you mean "instanceType"?)`},
		{"unknown tokens field", true, "tokens:\n  - token: t\n    role: admin\n    rol: reader\n", `line 4, tokens[0]: unknown field "rol" (did you mean "role"?)`},
		{"a type's limit without its s", false, "instanceTypes:\n  - name: small\n    maxAttachment: 4\n",
			`line 3, instanceTypes[0]: unknown field "maxAttachment" (did you mean "maxAttachments"?)`},
		// The API's names for what a seed calls otherwise: a hint, though no edit gets there.
		{"the API's attachLimit on a type", false, "instanceTypes:\n  - name: small\n    attachLimit: 4\n",
			`line 3, instanceTypes[0]: unknown field "attachLimit" (did you mean "maxAttachments"? attachLimit is called maxAttachments in a seed's instanceTypes)`},
		{"a type's maxAttachments on an instance", false, "instances:\n  - id: a\n    zone: zone-a\n    instanceType: small\n    maxAttachments: 4\n",
			`line 5, instances[0]: unknown field "maxAttachments" (did you mean "attachLimit"? an instance's own limit is attachLimit in a seed; maxAttachments is an instance type's)`},
		{"the API's attachLimitOverride on an instance", false, "instances:\n  - id: a\n    zone: zone-a\n    instanceType: small\n    attachLimitOverride: 4\n",
			`line 5, instances[0]: unknown field "attachLimitOverride" (did you mean "attachLimit"? attachLimitOverride is called attachLimit in a seed's instances)`},
		{"an unknown field with nothing close", false, "quotas:\n  attachments: 4\n  bananas: 2\n", `line 3, quotas: unknown field "bananas"` + "\n"},
		{"a tab for indentation", false, "instances:\n  - id: a\n\tzone: zone-a\n",
			"line 3: YAML does not allow tabs for indentation, indent with spaces (found a tab character that violates indentation)"},
		{"a bad indent keeps the parser's line", false, "instanceTypes:\n  - name: t1\n     maxAttachments: 3\n",
			"yaml: line 3: mapping values are not allowed in this context"},
		{"a quota with a unit", false, "quotas:\n  attachments: 40\n  volumes: 100\n  capacityBytes: 1Ti\n",
			`line 4, quotas.capacityBytes: want a whole number of bytes like 10737418240 (10 GiB; no units such as 10Gi), got "1Ti"`},
		{"the third instance's slots as a word, flow style", false,
			"instances: [{id: a, zone: zone-a, instanceType: small}, {id: b, zone: zone-a, instanceType: small},\n  {id: c, zone: zone-a, instanceType: small, outOfBandSlots: two}]\n",
			`line 2, instances[2].outOfBandSlots: want a whole number, got "two"`},
		{"a type's duration in seconds", false, "instanceTypes:\n  - name: slow\n    maxAttachments: 4\n    attachDurationMs: 2s\n",
			`line 4, instanceTypes[0].attachDurationMs: want a whole number of milliseconds like 2000, got "2s"`},
		{"a fault probability as a percentage", false, "faults:\n  - operation: GetCapacity\n    error: Unavailable\n    probability: 10%\n",
			`line 4, faults[0].probability: want a number, got "10%"`},
		{"an unknown instance type names the instance's line", false,
			"instances:\n  - id: a\n    zone: zone-a\n    instanceType: small\n  - id: b\n    zone: zone-a\n    instanceType: huge\n",
			`line 5, instances[1]: `},
		{"a bad fault rule names its line", false, "faults:\n  - operation: GetCapacity\n  - operation: Explode\n    error: Unavailable\n",
			`line 3, faults[1]: unknown operation "Explode"`},
		{"a list for a token", true, "tokens:\n  - token: [a, b]\n    role: admin\n",
			`line 2, tokens[0].token: want a string (quote a value that YAML would read as a number or true/false), got a list`},
		{"an unknown role names its line", true, "tokens:\n  - token: t\n    role: root\n", `line 3, tokens[0].role: unknown role "root" (want admin, driver or reader)`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "f"+string(rune('a'+i))+".yaml")
			if err := os.WriteFile(path, []byte(tt.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			var err error
			if tt.tokens {
				_, err = server.LoadTokens(path)
			} else {
				_, err = server.LoadSeed(path)
			}
			if err == nil || !strings.Contains(err.Error()+"\n", tt.want) {
				t.Fatalf("load: %v\nwant %s", err, tt.want)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("load: %v: does not name the file %s", err, path)
			}
			for _, bad := range []string{"Go struct", "Go value", "int64", "SeedInstance", "Limits", "JSON"} {
				if strings.Contains(err.Error(), bad) {
					t.Errorf("the error names %q: %v", bad, err)
				}
			}
		})
	}
}

// TestBadFilesReportEveryProblem: every value of a seed or tokens file that does not fit its
// field is reported at once, one a line, in file order, not only the first the decoder met.
func TestBadFilesReportEveryProblem(t *testing.T) {
	dir := t.TempDir()
	seed := filepath.Join(dir, "seed.yaml")
	data := "instances:\n  - id: a\n    zone: zone-a\n    instanceTyp: small\n  - id: b\n    zon: zone-a\nquotas:\n  attachments: many\n"
	if err := os.WriteFile(seed, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := server.LoadSeed(seed)
	want := "parse seed " + seed + `: line 4, instances[0]: unknown field "instanceTyp" (did you mean "instanceType"?)` + "\n" +
		`line 6, instances[1]: unknown field "zon" (did you mean "zone"?)` + "\n" + `line 8, quotas.attachments: want a whole number, got "many"`
	if err == nil || err.Error() != want {
		t.Fatalf("LoadSeed:\n%v\nwant:\n%s", err, want)
	}
	tokens := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(tokens, []byte("tokens:\n  - token: t\n    rol: admin\n  - tokn: u\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = server.LoadTokens(tokens)
	want = "parse tokens " + tokens + `: line 3, tokens[0]: unknown field "rol" (did you mean "role"?)` + "\n" +
		`line 4, tokens[1]: unknown field "tokn" (did you mean "token"?)`
	if err == nil || err.Error() != want {
		t.Fatalf("LoadTokens:\n%v\nwant:\n%s", err, want)
	}
}
