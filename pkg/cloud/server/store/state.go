package store

import (
	"errors"
	"fmt"

	"github.com/fakecloud/fakecloud-csi/internal/plural"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// Limits are the account quota limits: attachments and volumes are counts, CapacityBytes is
// bytes. All must be ≥ 0, the counts at most cloud.MaxQuotaCount, the bytes at most
// cloud.MaxQuotaBytes.
type Limits struct {
	Attachments   int64 `json:"attachments"`
	Volumes       int64 `json:"volumes"`
	CapacityBytes int64 `json:"capacityBytes"`
}

// SeedInstance is an instance of the seeded state; AttachLimit, when set, is its per-instance
// override of the type's MaxAttachments.
type SeedInstance struct {
	cloud.CreateInstanceRequest
	AttachLimit *int `json:"attachLimit,omitempty"`
}

// State is the seeded state: what a new data directory starts with and what Reset returns to.
type State struct {
	InstanceTypes []cloud.InstanceType `json:"instanceTypes"`
	Instances     []SeedInstance       `json:"instances"`
	Quotas        Limits               `json:"quotas"`
}

// Validate reports every problem of the state at once: empty or duplicate names and IDs,
// instance types or per-instance limits outside [1, cloud.MaxAttachSlots], attach or detach durations outside
// [0, cloud.MaxTransitionMS], out-of-band slots or quotas outside their bounds
// (cloud.MaxAttachSlots, cloud.MaxQuotaCount, cloud.MaxQuotaBytes), out-of-band
// slots above an instance's limit, instance IDs or zones that fail the checks of
// POST /v1/instances, and instances of unknown types.
func (st State) Validate() error {
	var errs []error
	types := map[string]int{}
	for i, it := range st.InstanceTypes {
		switch _, dup := types[it.Name]; {
		case it.Name == "":
			errs = append(errs, fmt.Errorf("instanceTypes[%d]: name is required", i))
		case dup:
			errs = append(errs, fmt.Errorf("instanceTypes[%d]: duplicate name %q", i, it.Name))
		}
		if err := cloud.CheckSlots("maxAttachments", it.MaxAttachments, 1); err != nil {
			errs = append(errs, fmt.Errorf("instanceTypes[%d]: %w", i, err))
		}
		for _, d := range []struct {
			name string
			v    *int
		}{{"attachDurationMs", it.AttachDurationMS}, {"detachDurationMs", it.DetachDurationMS}} {
			if d.v != nil && (*d.v < 0 || *d.v > cloud.MaxTransitionMS) {
				errs = append(errs, fmt.Errorf("instanceTypes[%d]: %s must be in [0, %d], got %d", i, d.name, cloud.MaxTransitionMS, *d.v))
			}
		}
		types[it.Name] = it.MaxAttachments
	}
	ids := map[string]bool{}
	for i, in := range st.Instances {
		override := in.AttachLimit
		if override != nil {
			if err := cloud.CheckSlots("attachLimit", *override, 1); err != nil {
				errs = append(errs, fmt.Errorf("instances[%d]: %w", i, err))
				override = nil
			}
		}
		if err := validateCreateInstance(in.CreateInstanceRequest, types, override); err != nil {
			errs = append(errs, fmt.Errorf("instances[%d]: %w", i, err))
		}
		if ids[in.ID] {
			errs = append(errs, fmt.Errorf("instances[%d]: duplicate id %q", i, in.ID))
		}
		ids[in.ID] = true
	}
	if err := validateLimits(st.Quotas); err != nil {
		errs = append(errs, fmt.Errorf("quotas: %w", err))
	}
	return errors.Join(errs...)
}

func validateLimits(l Limits) error {
	return errors.Join(cloud.CheckQuota("attachments", &l.Attachments, cloud.MaxQuotaCount),
		cloud.CheckQuota("volumes", &l.Volumes, cloud.MaxQuotaCount), cloud.CheckQuota("capacityBytes", &l.CapacityBytes, cloud.MaxQuotaBytes))
}

// SeedIfEmpty writes st when the store has never been seeded (a new data directory) and
// reports whether it did. A store that already holds state keeps it: that is what makes the
// data directory durable across restarts.
func (s *Store) SeedIfEmpty(st State) (bool, error) {
	if err := st.Validate(); err != nil {
		return false, cloud.NewError(cloud.CodeInvalidArgument, "seed: %v", err)
	}
	var seeded bool
	err := s.update(func(t *txn) error {
		seeded = false // the batch may run this more than once
		if t.tx.Bucket(bucketMeta).Get(keySeeded) != nil {
			return nil
		}
		seeded = true
		return t.load(st, "Seeded")
	})
	if err != nil {
		return false, fmt.Errorf("seed store: %w", err)
	}
	return seeded, nil
}

// Reset replaces all instances, volumes, snapshots and quotas with st, in one transaction.
// The revision and the event log go on (they never go backwards); it returns the new revision.
func (s *Store) Reset(st State) (uint64, error) {
	if err := st.Validate(); err != nil {
		return 0, cloud.NewError(cloud.CodeInvalidArgument, "seed: %v", err)
	}
	var rev uint64
	err := s.update(func(t *txn) error {
		for _, name := range stateBuckets {
			if err := t.emptyBucket(name); err != nil {
				return err
			}
		}
		if err := t.load(st, "Reset"); err != nil {
			return err
		}
		rev = t.rev
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("reset store: %w", err)
	}
	return rev, nil
}

// load writes a validated state into empty state buckets.
func (t *txn) load(st State, eventType string) error {
	rev, err := t.bump()
	if err != nil {
		return err
	}
	for _, it := range st.InstanceTypes {
		if err := t.putJSON(bucketTypes, []byte(it.Name), it); err != nil {
			return err
		}
	}
	for _, in := range st.Instances {
		iv := &instView{
			rec: instanceRec{ID: in.ID, Zone: in.Zone, InstanceType: in.InstanceType, AttachLimitOverride: in.AttachLimit,
				OutOfBandSlots: in.OutOfBandSlots, CreatedAt: t.now},
			state: instanceState{revision: rev},
		}
		if err := t.putInstance(iv); err != nil {
			return err
		}
	}
	q := cloud.Quotas{
		Attachments:   cloud.Quota{Limit: st.Quotas.Attachments},
		Volumes:       cloud.Quota{Limit: st.Quotas.Volumes},
		CapacityBytes: cloud.Quota{Limit: st.Quotas.CapacityBytes},
	}
	if err := t.putQuotas(&q); err != nil {
		return err
	}
	if err := t.put(bucketMeta, keySeeded, []byte("1")); err != nil {
		return fmt.Errorf("mark seeded: %w", err)
	}
	return t.event(cloud.Event{Type: eventType, Detail: plural.Of(len(st.InstanceTypes), "instance type", "instance types") + ", " + plural.Of(len(st.Instances), "instance", "instances")})
}
