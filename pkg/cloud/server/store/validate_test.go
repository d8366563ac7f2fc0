package store_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
)

func openSeeded(t *testing.T, st store.State, opts store.Options) *store.Store {
	t.Helper()
	s, err := store.Open("", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.SeedIfEmpty(st); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCapacityQuotaHasNoOverflow: the bytes quota compares without overflow, so a size near
// MaxInt64 is refused however much is used, and a refusal leaves the use as it was.
func TestCapacityQuotaHasNoOverflow(t *testing.T) {
	const maxI, maxQ = math.MaxInt64, cloud.MaxQuotaBytes
	tests := []struct {
		name     string
		limit    int64
		existing []int64 // volumes created first, under no limit
		create   int64   // a new volume's size, or 0 to resize instead
		resizeTo int64   // the first existing volume's new size
		wantCode cloud.Code
		wantUsed int64 // bytes used afterwards
	}{
		{name: "fills the quota exactly", limit: 100, existing: []int64{60}, create: 40, wantUsed: 100},
		{name: "one byte over", limit: 100, existing: []int64{60}, create: 41, wantCode: cloud.CodeCapacityQuotaExceeded, wantUsed: 60},
		{name: "MaxInt64 with bytes used", limit: 100, existing: []int64{10}, create: maxI, wantCode: cloud.CodeCapacityQuotaExceeded, wantUsed: 10},
		{name: "largest limit, MaxInt64 volume with bytes used", limit: maxQ, existing: []int64{1}, create: maxI, wantCode: cloud.CodeCapacityQuotaExceeded, wantUsed: 1},
		{name: "largest limit, one more byte when full", limit: maxQ, existing: []int64{maxQ}, create: 1, wantCode: cloud.CodeCapacityQuotaExceeded, wantUsed: maxQ},
		{name: "largest limit, a volume of all of it alone", limit: maxQ, create: maxQ, wantUsed: maxQ},
		{name: "largest limit, MaxInt64 volume alone", limit: maxQ, create: maxI, wantCode: cloud.CodeCapacityQuotaExceeded},
		{name: "limit below use", limit: 50, existing: []int64{100}, create: 1, wantCode: cloud.CodeCapacityQuotaExceeded, wantUsed: 100},
		{name: "grow to fill exactly", limit: 100, existing: []int64{10, 20}, resizeTo: 80, wantUsed: 100},
		{name: "grow one byte over", limit: 100, existing: []int64{10, 20}, resizeTo: 81, wantCode: cloud.CodeCapacityQuotaExceeded, wantUsed: 30},
		{name: "grow to MaxInt64 with other bytes used", limit: 100, existing: []int64{10, 20}, resizeTo: maxI, wantCode: cloud.CodeCapacityQuotaExceeded, wantUsed: 30},
		{name: "grow to MaxInt64 under the largest limit with other bytes used", limit: maxQ, existing: []int64{10, 20}, resizeTo: maxI, wantCode: cloud.CodeCapacityQuotaExceeded, wantUsed: 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := testState()
			st.Quotas.CapacityBytes = maxQ
			s := openSeeded(t, st, store.Options{})
			var first string
			for i, size := range tt.existing {
				v, err := s.CreateVolume(cloud.CreateVolumeRequest{Name: fmt.Sprint("existing-", i), SizeBytes: size, Zone: "z"})
				if err != nil {
					t.Fatal(err)
				}
				if first == "" {
					first = v.ID
				}
			}
			limit := tt.limit
			if _, err := s.PatchQuotas(cloud.QuotasPatch{CapacityBytes: &limit}, nil); err != nil {
				t.Fatal(err)
			}
			var err error
			if tt.create > 0 {
				_, err = s.CreateVolume(cloud.CreateVolumeRequest{Name: "new", SizeBytes: tt.create, Zone: "z"})
			} else {
				_, err = s.Resize(first, tt.resizeTo)
			}
			if cloud.CodeOf(err) != tt.wantCode {
				t.Fatalf("err = %v, want code %q", err, tt.wantCode)
			}
			q, err := s.Quotas()
			if err != nil {
				t.Fatal(err)
			}
			if q.CapacityBytes.Used != tt.wantUsed {
				t.Fatalf("capacity used %d, want %d", q.CapacityBytes.Used, tt.wantUsed)
			}
		})
	}
}

// TestVolumeZoneMustBeKnown: a volume's zone is an instance's zone or one of Options.Zones;
// a retried create of an existing volume is answered whatever the zones are now.
func TestVolumeZoneMustBeKnown(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(dir, store.Options{Zones: []string{"default"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SeedIfEmpty(testState()); err != nil { // instance n in zone z
		t.Fatal(err)
	}
	steps := []struct {
		name     string
		do       func() error
		wantCode cloud.Code
	}{
		{"zone of an instance", func() error {
			_, err := s.CreateVolume(cloud.CreateVolumeRequest{Name: "in-z", SizeBytes: 1, Zone: "z"})
			return err
		}, ""},
		{"zone of Options.Zones", func() error {
			_, err := s.CreateVolume(cloud.CreateVolumeRequest{Name: "in-default", SizeBytes: 1, Zone: "default"})
			return err
		}, ""},
		{"unknown zone", func() error {
			_, err := s.CreateVolume(cloud.CreateVolumeRequest{Name: "in-q", SizeBytes: 1, Zone: "q"})
			return err
		}, cloud.CodeInvalidArgument},
		{"instance created in the zone", func() error {
			_, err := s.CreateInstance(cloud.CreateInstanceRequest{ID: "m", Zone: "q", InstanceType: "small"})
			return err
		}, ""},
		{"zone known now", func() error {
			_, err := s.CreateVolume(cloud.CreateVolumeRequest{Name: "in-q", SizeBytes: 1, Zone: "q"})
			return err
		}, ""},
		{"reopened without the default zone", func() error {
			if err := s.Close(); err != nil {
				return err
			}
			s, err = store.Open(dir, store.Options{})
			return err
		}, ""},
		{"retried create in a zone no longer known", func() error {
			_, err := s.CreateVolume(cloud.CreateVolumeRequest{Name: "in-default", SizeBytes: 1, Zone: "default"})
			return err
		}, ""},
		{"new volume there", func() error {
			_, err := s.CreateVolume(cloud.CreateVolumeRequest{Name: "another", SizeBytes: 1, Zone: "default"})
			return err
		}, cloud.CodeInvalidArgument},
	}
	for _, st := range steps {
		if err := st.do(); cloud.CodeOf(err) != st.wantCode || (st.wantCode == "" && err != nil) {
			t.Fatalf("%s: err = %v, want code %q", st.name, err, st.wantCode)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestStateValidationNamesEachProblem: each bad seed is refused with a message naming the
// problem; the limits that stay allowed (out-of-band slots equal to the limit, a limit of 1)
// are accepted.
func TestStateValidationNamesEachProblem(t *testing.T) {
	zero, one, two, most, over := 0, 1, 2, cloud.MaxAttachSlots, cloud.MaxAttachSlots+1
	maxI := int64(math.MaxInt64)
	inst := func(id, zone string, oob int, limit *int) store.SeedInstance {
		return store.SeedInstance{CreateInstanceRequest: cloud.CreateInstanceRequest{ID: id, Zone: zone, InstanceType: "small", OutOfBandSlots: oob}, AttachLimit: limit}
	}
	tests := []struct {
		name   string
		types  []cloud.InstanceType
		inst   store.SeedInstance
		quotas *store.Limits
		want   string // "" means valid
	}{
		{name: "out-of-band slots equal to the type's limit", inst: inst("n", "z", 4, nil)},
		{name: "out-of-band slots equal to the override", inst: inst("n", "z", 2, &two)},
		{name: "override of 1", inst: inst("n", "z", 0, &one)},
		{name: "instance type of 0 slots", types: []cloud.InstanceType{{Name: "small"}}, inst: inst("n", "z", 0, nil), want: "maxAttachments must be in [1, 4096], got 0"},
		{name: "instance type of the most slots", types: []cloud.InstanceType{{Name: "small", MaxAttachments: most}}, inst: inst("n", "z", most, nil)},
		{name: "instance type of MaxInt slots", types: []cloud.InstanceType{{Name: "small", MaxAttachments: math.MaxInt}}, inst: inst("n", "z", 0, nil), want: "maxAttachments must be in [1, 4096], got 9223372036854775807"},
		{name: "override of the most slots", inst: inst("n", "z", most, &most)},
		{name: "override over the bound", inst: inst("n", "z", 0, &over), want: "attachLimit must be in [1, 4096], got 4097"},
		{name: "out-of-band slots of MaxInt", inst: inst("n", "z", math.MaxInt, &most), want: "outOfBandSlots must be in [0, 4096], got 9223372036854775807"},
		{name: "quotas at their bounds", inst: inst("n", "z", 0, nil), quotas: &store.Limits{Attachments: cloud.MaxQuotaCount, Volumes: cloud.MaxQuotaCount, CapacityBytes: cloud.MaxQuotaBytes}},
		{name: "attachment quota of MaxInt64", inst: inst("n", "z", 0, nil), quotas: &store.Limits{Attachments: maxI}, want: "attachments must be in [0, 1000000], got 9223372036854775807"},
		{name: "volume quota over the bound", inst: inst("n", "z", 0, nil), quotas: &store.Limits{Volumes: cloud.MaxQuotaCount + 1}, want: "volumes must be in [0, 1000000], got 1000001"},
		{name: "capacity quota of MaxInt64", inst: inst("n", "z", 0, nil), quotas: &store.Limits{CapacityBytes: maxI}, want: "capacityBytes must be in [0, 1152921504606846976], got 9223372036854775807"},
		{name: "override of 0", inst: inst("n", "z", 0, &zero), want: "attachLimit must be in [1, 4096], got 0"},
		{name: "out-of-band slots above the type's limit", inst: inst("n", "z", 5, nil), want: "outOfBandSlots 5 is above the attach limit 4"},
		{name: "out-of-band slots above the override", inst: inst("n", "z", 3, &two), want: "outOfBandSlots 3 is above the attach limit 2"},
		{name: "instance ID with a control character", inst: inst("n\x00", "z", 0, nil), want: "control character U+0000"},
		{name: "instance ID with a tab", inst: inst("n\t1", "z", 0, nil), want: "control character U+0009"},
		{name: "instance ID over 128 bytes", inst: inst(strings.Repeat("n", 129), "z", 0, nil), want: "at most 128"},
		{name: "zone with a space", inst: inst("n", "zone a", 0, nil), want: "not a CSI topology value"},
		{name: "zone over 63 characters", inst: inst("n", strings.Repeat("z", 64), 0, nil), want: "not a CSI topology value"},
		{name: "zone ending in a dash", inst: inst("n", "zone-", 0, nil), want: "not a CSI topology value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := testState()
			if tt.types != nil {
				st.InstanceTypes = tt.types
			}
			st.Instances = []store.SeedInstance{tt.inst}
			if tt.quotas != nil {
				st.Quotas = *tt.quotas
			}
			err := st.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate: %v, want valid", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestRetriedCreateInstanceFindsASeededOverride: an instance seeded with its own attach limit
// above its type's may hold more out-of-band slots than the type allows; an identical create
// returns it rather than refusing the request as over the type's limit.
func TestRetriedCreateInstanceFindsASeededOverride(t *testing.T) {
	st := testState()
	eight := 8
	big := cloud.CreateInstanceRequest{ID: "big", Zone: "z", InstanceType: "small", OutOfBandSlots: 6}
	st.Instances = append(st.Instances, store.SeedInstance{CreateInstanceRequest: big, AttachLimit: &eight})
	s := openSeeded(t, st, store.Options{})
	got, err := s.CreateInstance(big)
	if err != nil || got.ID != "big" || got.AttachLimit != 8 {
		t.Fatalf("identical create = %+v, %v; want the seeded instance", got, err)
	}
	other := big
	other.ID = "new"
	if _, err := s.CreateInstance(other); cloud.CodeOf(err) != cloud.CodeInvalidArgument {
		t.Fatalf("a new instance over its type's limit: %v, want InvalidArgument", err)
	}
}
