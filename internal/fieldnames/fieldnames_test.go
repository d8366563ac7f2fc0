package fieldnames_test

import (
	"strings"
	"testing"

	"github.com/fakecloud/fakecloud-csi/internal/fieldnames"
)

// TestSuggest: the field of a type at a JSON path (list indexes as written) that a name
// was likely meant to be, as the fake cloud's JSON decoding asks for it.
func TestSuggest(t *testing.T) {
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
			if got := fieldnames.Suggest(tt.into, tt.path, tt.field); got != tt.want {
				t.Errorf("Suggest(%q, %q) = %q, want %q", tt.path, tt.field, got, tt.want)
			}
		})
	}
}

// TestClosest: a name that differs in case, else the nearest within two edits (one for a
// short name); none past MaxNameBytes (no edit distance over a huge key).
func TestClosest(t *testing.T) {
	long := strings.Repeat("a", 71)
	names := []string{"token", "role", "maxAttachments", long + "b"}
	for name, want := range map[string]string{"ROLE": "role", "tokn": "token", "tkn": "", "rol": "role", "maxAttachment": "maxAttachments",
		"maxAtachment": "maxAttachments", "mxAtachment": "", long: "", "role": ""} {
		if got := fieldnames.Closest(name, names); got != want {
			t.Errorf("Closest(%q) = %q, want %q", name, got, want)
		}
	}
}
