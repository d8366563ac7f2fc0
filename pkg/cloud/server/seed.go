package server

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/fakecloud/fakecloud-csi/internal/yamlline"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
)

// Seed is the fake cloud's starting state, read from YAML (see examples/seed.yaml): instance
// types, instances, quota limits and fault rules. A new data directory starts from it and
// POST /v1/reset returns to it. Missing instanceTypes or quotas take the defaults of
// DefaultSeed, so a seed file may list only instances or only faults.
type Seed struct {
	InstanceTypes []cloud.InstanceType `json:"instanceTypes,omitempty"`
	Instances     []store.SeedInstance `json:"instances,omitempty"`
	Quotas        *store.Limits        `json:"quotas,omitempty"`
	Faults        []cloud.FaultRule    `json:"faults,omitempty"`
}

// DefaultSeed is the state without a seed file: instance types small (4 slots), medium (8) and
// large (16), no instances (kind nodes register themselves with --auto-register), quotas of
// 40 attachments, 100 volumes and 1 TiB, and no fault rules.
func DefaultSeed() Seed {
	return Seed{}.withDefaults()
}

func (s Seed) withDefaults() Seed {
	if len(s.InstanceTypes) == 0 {
		s.InstanceTypes = []cloud.InstanceType{
			{Name: "small", MaxAttachments: 4},
			{Name: "medium", MaxAttachments: 8},
			{Name: "large", MaxAttachments: 16},
		}
	}
	if s.Quotas == nil {
		s.Quotas = &store.Limits{Attachments: 40, Volumes: 100, CapacityBytes: 1 << 40}
	}
	return s
}

func (s Seed) state() store.State {
	s = s.withDefaults()
	return store.State{InstanceTypes: s.InstanceTypes, Instances: s.Instances, Quotas: *s.Quotas}
}

// LoadSeed reads a seed YAML file strictly: unknown fields are an error, so a typo does not
// silently seed the wrong cloud. The content is validated when the server starts.
func LoadSeed(path string) (Seed, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Seed{}, fmt.Errorf("read seed: %w", err)
	}
	var s Seed
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return Seed{}, fmt.Errorf("parse seed %s: %w%s", path, yamlline.Clean(err), yamlline.Of(data, err))
	}
	return s.withDefaults(), nil
}
