package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSeedInstances: `fakecloud seed instances FILE` reads a seed as --seed does, whatever
// its YAML style (hack/run.sh found instances with awk, which saw none in a flow-style seed),
// and refuses the seeds the server refuses.
func TestSeedInstances(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name    string
		args    []string
		want    string // the whole output
		wantErr string
	}{
		{"the example seed", []string{"seed", "instances", "../../examples/seed.yaml"}, "node-a1\nnode-a2\nnode-b1\n", ""},
		{"flow style", []string{"seed", "instances", write("flow.yaml",
			`{instances: [{id: node-a1, zone: zone-a, instanceType: small}, {id: "node-x", zone: zone-b, instanceType: large, outOfBandSlots: 1}]}`)},
			"node-a1\nnode-x\n", ""},
		{"flow list under a block key, a comment on the key line", []string{"seed", "instances", write("mixed.yaml",
			"instances: # two\n  [{id: a, zone: zone-a, instanceType: small},\n   {id: b, zone: zone-a, instanceType: small}]\nquotas: {attachments: 3, volumes: 3, capacityBytes: 1073741824}\n")},
			"a\nb\n", ""},
		{"anchors and aliases", []string{"seed", "instances", write("anchors.yaml",
			"instances:\n  - {id: n1, zone: &z zone-a, instanceType: &t small}\n  - {id: n2, zone: *z, instanceType: *t}\n")}, "n1\nn2\n", ""},
		{"no instances", []string{"seed", "instances", write("none.yaml", "faults: []\n")}, "", ""},
		{"an unknown type is refused as the server refuses it", []string{"seed", "instances", write("badtype.yaml",
			"instances: [{id: a, zone: zone-a, instanceType: huge}]\n")}, "", `line 1, instances[0]: unknown instanceType "huge"`},
		{"a typo is refused", []string{"seed", "instances", write("typo.yaml", "instances: [{idd: a}]\n")}, "", `unknown field "idd"`},
		{"a bad fault rule is refused", []string{"seed", "instances", write("badfault.yaml", "faults: [{operation: Explode, error: Unavailable}]\n")},
			"", "faults[0]: unknown operation"},
		{"no file", []string{"seed", "instances"}, "", "want exactly one FILE"},
		{"missing file", []string{"seed", "instances", filepath.Join(dir, "gone.yaml")}, "", "no such file"},
		{"no subcommand", []string{"seed"}, "", "want a subcommand"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), tt.args, &out, &errOut)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("run %v: %v, want error %q", tt.args, err, tt.wantErr)
			}
			if tt.wantErr == "" && out.String() != tt.want {
				t.Fatalf("run %v printed %q, want %q", tt.args, out.String(), tt.want)
			}
		})
	}
}
