package cloud_test

import (
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

func TestCapacitySlots(t *testing.T) {
	tests := []struct {
		name                       string
		limit, outOfBand, attached int
		wantSlots, wantFree        int
	}{
		{"empty instance", 8, 0, 0, 8, 8},
		{"out-of-band slots taken first", 8, 1, 0, 7, 7},
		{"attached volumes hold slots", 8, 1, 3, 7, 4},
		{"full", 4, 1, 3, 3, 0},
		{"out-of-band slots fill the limit", 4, 4, 0, 0, 0},
		{"over-full after the limit was lowered", 2, 1, 3, 1, -2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := cloud.Capacity{AttachLimit: tc.limit, OutOfBandSlots: tc.outOfBand, Attached: tc.attached}
			if got := c.Slots(); got != tc.wantSlots {
				t.Errorf("Slots() of %+v: expected %d, got %d", c, tc.wantSlots, got)
			}
			if got := c.FreeSlots(); got != tc.wantFree {
				t.Errorf("FreeSlots() of %+v: expected %d, got %d", c, tc.wantFree, got)
			}
		})
	}
}
