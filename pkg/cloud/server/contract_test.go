package server_test

import (
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/cloudtest"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
)

// TestContract runs the cloud contract against the real fake cloud on loopback, through the
// driver's client, with zero attach and detach durations (the synchronous cloud);
// pkg/csi/internal/cloudfake runs the same cases against the unit tests' fake.
func TestContract(t *testing.T) {
	cloudtest.Run(t, func(t *testing.T, w cloudtest.World) cloudtest.Cloud {
		seed := server.Seed{
			// Every instance sets its own limit; the type's only has to be valid.
			InstanceTypes: []cloud.InstanceType{{Name: "contract", MaxAttachments: 1}},
			Quotas:        &store.Limits{Attachments: w.AttachmentQuota, Volumes: w.VolumeQuota, CapacityBytes: w.CapacityQuota},
		}
		for _, in := range w.Instances {
			limit := in.AttachLimit
			seed.Instances = append(seed.Instances, store.SeedInstance{
				CreateInstanceRequest: cloud.CreateInstanceRequest{ID: in.ID, Zone: in.Zone, InstanceType: "contract", OutOfBandSlots: in.OutOfBandSlots},
				AttachLimit:           &limit,
			})
		}
		return startCloud(t, server.Config{Seed: seed, DefaultZone: cloudtest.DefaultZone}).driver
	})
}
