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
