package cloudfake_test

import (
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud/cloudtest"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/internal/cloudfake"
)

// TestContract runs the cloud contract against the fake; pkg/cloud/server runs the same
// cases against the real fake cloud, so a difference fails one of the two.
func TestContract(t *testing.T) {
	cloudtest.Run(t, func(t *testing.T, w cloudtest.World) cloudtest.Cloud {
		f := cloudfake.New()
		for _, in := range w.Instances {
			f.AddInstance(in.ID, in.Zone, in.AttachLimit, in.OutOfBandSlots)
		}
		f.SetQuotaLimits(w.AttachmentQuota, w.VolumeQuota, w.CapacityQuota)
		return f
	})
}
