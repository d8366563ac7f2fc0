package plural_test

import (
	"testing"

	"github.com/fakecloud/fakecloud-csi/internal/plural"
)

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0 steps"}, {1, "1 step"}, {2, "2 steps"}, {-1, "-1 steps"}} {
		if got := plural.Of(tc.n, "step", "steps"); got != tc.want {
			t.Errorf("Of(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	if got := plural.Of(uint32(1), "slot", "slots"); got != "1 slot" {
		t.Errorf("Of(uint32(1)) = %q, want \"1 slot\"", got)
	}
}
