package server

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/fakecloud/fakecloud-csi/internal/yamlcheck"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/faults"
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

// LoadSeed reads a seed YAML file strictly and checks it (Validate): unknown fields are an
// error, so a typo does not silently seed the wrong cloud. Errors name the file's line and
// field as written, and what the field wants (`line 14, instances[2].attachLimit: want a
// whole number, got "10Gi"`); every value that does not fit its field is reported at once,
// one a line, in file order.
func LoadSeed(path string) (Seed, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Seed{}, fmt.Errorf("read seed: %w", err)
	}
	var s Seed
	doc, err := decodeFile(data, &s, seedNameHint)
	if err != nil {
		return Seed{}, fmt.Errorf("parse seed %s: %w", path, err)
	}
	if err := s.Validate(); err != nil {
		return Seed{}, fmt.Errorf("seed %s:\n%w", path, yamlcheck.AtLines(doc, err))
	}
	return s.withDefaults(), nil
}

// Validate reports every problem of the seed at once, as the server does when it starts:
// instance types, instances and quotas (store.State.Validate), then each fault rule
// (faults.Validate), named faults[N].
func (s Seed) Validate() error {
	var errs []error
	if err := s.withDefaults().state().Validate(); err != nil {
		errs = append(errs, err)
	}
	for i, r := range s.Faults {
		if err := faults.Validate(r); err != nil {
			errs = append(errs, fmt.Errorf("faults[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// maxFileProblems bounds the problems decodeFile reports of a seed or tokens file.
const maxFileProblems = 20

// decodeFile decodes data, a YAML file of the operator's, strictly into v (a pointer): its
// error names every value that does not fit v's type (up to maxFileProblems), one a line, each
// with its line and field as written (yamlcheck). hint, when set, is asked about each unknown
// field nothing is close to (yamlcheck.Problem.Meant empty) for the name the file calls it by
// (seedNameHint). It returns the file parsed, for the checks' errors to name their lines
// (yamlcheck.AtLines).
func decodeFile(data []byte, v any, hint func(p *yamlcheck.Problem) (meant, why string)) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, yamlcheck.Syntax(data, err)
	}
	ps := yamlcheck.Check(&doc, v, maxFileProblems)
	for i := range ps {
		p := &ps[i]
		if hint == nil || p.Field == "" || p.Meant != "" {
			continue
		}
		if meant, why := hint(p); meant != "" {
			p.Meant = meant
			p.Msg += " (did you mean " + strconv.Quote(meant) + "? " + why + ")"
		}
	}
	if err := yamlcheck.Problems(ps); err != nil {
		return nil, err
	}
	return &doc, yamlcheck.Decode(data, v)
}

// seedNameHint is what a seed calls a field that an unknown one p names as the API does (or
// as another part of the seed does), and why: an instance type's limit is maxAttachments, as
// in GET /v1/instance-types, while an instance's is attachLimit, as in GET /v1/instances,
// whose attachLimitOverride the seed writes attachLimit. The fields keep their names (files
// and scripts use them); the hint bridges them. "" when p is none of these.
func seedNameHint(p *yamlcheck.Problem) (meant, why string) {
	parent, _, _ := strings.Cut(p.Path, "[")
	switch {
	case parent == "instanceTypes" && p.Field == "attachLimit":
		return "maxAttachments", "attachLimit is called maxAttachments in a seed's instanceTypes"
	case parent == "instances" && p.Field == "maxAttachments":
		return "attachLimit", "an instance's own limit is attachLimit in a seed; maxAttachments is an instance type's"
	case parent == "instances" && p.Field == "attachLimitOverride":
		return "attachLimit", "attachLimitOverride is called attachLimit in a seed's instances"
	}
	return "", ""
}
