package yamlline_test

import (
	"errors"
	"testing"

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
