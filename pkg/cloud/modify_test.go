package cloud_test

import (
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

func TestModifyVolumeRequestApply(t *testing.T) {
	str := func(s string) *string { return &s }
	num := func(n int) *int { return &n }
	tests := []struct {
		name        string
		req         cloud.ModifyVolumeRequest
		typ         string
		iops        int
		wantType    string
		wantIOPS    int
		wantChanged bool
		wantErr     bool
	}{
		{"nothing asked", cloud.ModifyVolumeRequest{}, "ssd", 3000, "ssd", 3000, false, false},
		{"no type reads as standard", cloud.ModifyVolumeRequest{Type: str("standard")}, "", 0, "standard", 0, false, false},
		{"no type, nothing asked", cloud.ModifyVolumeRequest{}, "", 0, "standard", 0, false, false},
		{"the same values", cloud.ModifyVolumeRequest{Type: str("ssd"), IOPS: num(3000)}, "ssd", 3000, "ssd", 3000, false, false},
		{"type and iops", cloud.ModifyVolumeRequest{Type: str("ssd"), IOPS: num(3000)}, "", 0, "ssd", 3000, true, false},
		{"iops alone", cloud.ModifyVolumeRequest{IOPS: num(0)}, "nvme", 500, "nvme", 0, true, false},
		{"iops on standard", cloud.ModifyVolumeRequest{IOPS: num(3000)}, "standard", 0, "", 0, false, true},
		{"unknown type", cloud.ModifyVolumeRequest{Type: str("tape")}, "ssd", 0, "", 0, false, true},
		{"iops out of range", cloud.ModifyVolumeRequest{IOPS: num(cloud.MaxIOPS + 1)}, "ssd", 0, "", 0, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			typ, iops, changed, err := tc.req.Apply(tc.typ, tc.iops)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Apply(%q, %d): expected error %v, got %v", tc.typ, tc.iops, tc.wantErr, err)
			}
			if typ != tc.wantType || iops != tc.wantIOPS || changed != tc.wantChanged {
				t.Errorf("Apply(%q, %d): expected %q %d changed=%v, got %q %d changed=%v", tc.typ, tc.iops,
					tc.wantType, tc.wantIOPS, tc.wantChanged, typ, iops, changed)
			}
		})
	}
}
