package yamlline_test

import (
	"testing"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/fakecloud/fakecloud-csi/internal/yamlline"
)

// TestSuggestField: the field of a type at a JSON path (list indexes as written) that a name
// was likely meant to be, as the fake cloud's JSON decoding asks for it.
func TestSuggestField(t *testing.T) {
	type inner struct {
		OutOfBandSlots int `json:"outOfBandSlots"`
	}
	type embedded struct {
		AttachLimit int `json:"attachLimit"`
	}
	type outer struct {
		embedded
		Name  string  `json:"name"`
		Items []inner `json:"items"`
	}
	tests := []struct {
		name, path, field, want string
		into                    any
	}{
		{"a typo at the top", "", "nme", "name", &outer{}},
		{"another case", "", "Name", "name", &outer{}},
		{"a field of an embedded struct", "", "atachLimit", "attachLimit", &outer{}},
		{"in a list item", "items[3]", "outOfBandSlot", "outOfBandSlots", &outer{}},
		{"a top-level list", "[0]", "outOfBandSlot", "outOfBandSlots", &[]inner{}},
		{"nothing close", "", "color", "", &outer{}},
		{"a path that is no struct", "name", "x", "", &outer{}},
		{"no type", "", "name", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := yamlline.SuggestField(tt.into, tt.path, tt.field); got != tt.want {
				t.Errorf("SuggestField(%q, %q) = %q, want %q", tt.path, tt.field, got, tt.want)
			}
		})
	}
}

// TestKeyLineAndDrop: KeyLine names the key's line (not the value's, when that starts below);
// Drop removes a mapping's entry and nulls a list's item, so later paths still hold.
func TestKeyLineAndDrop(t *testing.T) {
	data := []byte("name: x\nsteps:\n  - at: 1s\n    quotas:\n      attachments: many\n  - at: 2s\n    reset: true\n")
	for path, want := range map[string]int{"name": 1, "steps": 2, "steps[0]": 3, "steps[0].quotas": 4,
		"steps[0].quotas.attachments": 5, "steps[1].reset": 7, "steps[2]": 0, "nope": 0} {
		if got := yamlline.KeyLine(data, path); got != want {
			t.Errorf("KeyLine(%q) = %d, want %d", path, got, want)
		}
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if !yamlline.Drop(&doc, "steps[0].quotas") || !yamlline.Drop(&doc, "name") || yamlline.Drop(&doc, "nope") {
		t.Fatal("Drop: want true, true, false")
	}
	if !yamlline.Drop(&doc, "steps[0]") {
		t.Fatal("Drop(steps[0]): false")
	}
	out, err := yamlv3.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	if want := "steps:\n    - null\n    - at: 2s\n      reset: true\n"; string(out) != want {
		t.Errorf("after Drop:\n%s\nwant:\n%s", out, want)
	}
}
