package csi

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/capacity"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/internal/cloudfake"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

var _ Cloud = (*cloudfake.Fake)(nil)

func TestDynamicCapacityFlagChoosesTheReporter(t *testing.T) {
	tests := []struct {
		name        string
		args        []string
		wantStatic  bool
		wantDynamic float64
	}{
		{name: "default is the policy", args: nil, wantDynamic: 1},
		{name: "static count", args: []string{"--dynamic-capacity=false"}, wantStatic: true, wantDynamic: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var o Options
			fs := pflag.NewFlagSet("driver", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(append([]string{"--mode=node", "--node-id=i-1", "--state-dir=" + t.TempDir()}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			f := cloudfake.New()
			f.AddInstance("i-1", "zone-a", 8, 1)
			reg := prometheus.NewRegistry()
			d, err := NewForCloud(o, f, mount.NewFake(), reg)
			if err != nil {
				t.Fatal(err)
			}
			_, static := d.deps.Capacity.(*capacity.Static)
			if static != tc.wantStatic {
				t.Fatalf("capacity reporter %T, want static: %v", d.deps.Capacity, tc.wantStatic)
			}
			got, err := d.deps.Capacity.MaxVolumesPerNode(context.Background())
			if err != nil || got != 7 {
				t.Errorf("MaxVolumesPerNode = %d, %v; want 7 (8 slots - 1 out of band)", got, err)
			}
			// The static count ignores later changes of the limit.
			f.SetInstanceLimits("i-1", 4, 1)
			if static {
				if got, _ := d.deps.Capacity.MaxVolumesPerNode(context.Background()); got != 7 {
					t.Errorf("static count after a limit change = %d, want 7", got)
				}
			}
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var dyn float64 = -1
			for _, mf := range mfs {
				if mf.GetName() == "fakecloud_csi_capacity_dynamic" {
					dyn = mf.GetMetric()[0].GetGauge().GetValue()
				}
			}
			if dyn != tc.wantDynamic {
				t.Errorf("fakecloud_csi_capacity_dynamic = %v, want %v", dyn, tc.wantDynamic)
			}
		})
	}
}
