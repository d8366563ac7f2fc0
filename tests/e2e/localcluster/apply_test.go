package localcluster

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestApplyDeployPeriod: the CSIDriver the local cluster creates carries deploy/base's period,
// or the one Versions.CSIDriverPeriodSeconds asks for (0: none), before any node plugin reads it.
func TestApplyDeployPeriod(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		name   string
		period *int64
		want   *int64
	}{
		{"deploy/base's", nil, i64(10)},
		{"removed", i64(0), nil},
		{"600 s", i64(600), i64(600)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			if err := applyDeploy(context.Background(), cs, filepath.Join("..", "..", "..", "deploy", "base"), tc.period); err != nil {
				t.Fatal(err)
			}
			d, err := cs.StorageV1().CSIDrivers().Get(context.Background(), DriverName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := d.Spec.NodeAllocatableUpdatePeriodSeconds
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Errorf("period %v, want %v", got, tc.want)
			}
		})
	}
}

// TestValidatePeriod: a period the API server would refuse (below 10 s) or beyond a day is
// refused before anything starts.
func TestValidatePeriod(t *testing.T) {
	for _, tc := range []struct {
		period int64
		bad    bool
	}{{0, false}, {10, false}, {600, false}, {9, true}, {-1, true}, {86401, true}} {
		o := DefaultOptions("/repo", t.TempDir(), "/tmp/x")
		o.Versions.CSIDriverPeriodSeconds = &tc.period
		err := o.Validate()
		// The binaries are missing: Validate always errs; only the period part is checked.
		if got := err != nil && strings.Contains(err.Error(), "CSIDriver period"); got != tc.bad {
			t.Errorf("period %d: Validate = %v; want a period error: %v", tc.period, err, tc.bad)
		}
	}
}
