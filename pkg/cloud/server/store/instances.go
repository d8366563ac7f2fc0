package store

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// InstanceTypes lists the instance types sorted by name.
func (s *Store) InstanceTypes() ([]cloud.InstanceType, error) {
	out := []cloud.InstanceType{}
	err := s.view(func(t *txn) error {
		return t.tx.Bucket(bucketTypes).ForEach(func(_, v []byte) error {
			var it cloud.InstanceType
			if err := jsonUnmarshal(v, &it); err != nil {
				return err
			}
			out = append(out, it)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list instance types: %w", err)
	}
	return out, nil
}

func validateCreateInstance(req cloud.CreateInstanceRequest, types map[string]bool) error {
	var errs []error
	if strings.TrimSpace(req.ID) == "" {
		errs = append(errs, errors.New("id is required"))
	}
	if strings.TrimSpace(req.Zone) == "" {
		errs = append(errs, errors.New("zone is required"))
	}
	if req.InstanceType == "" {
		errs = append(errs, errors.New("instanceType is required"))
	} else if !types[req.InstanceType] {
		errs = append(errs, fmt.Errorf("unknown instanceType %q", req.InstanceType))
	}
	if req.OutOfBandSlots < 0 {
		errs = append(errs, fmt.Errorf("outOfBandSlots must be >= 0, got %d", req.OutOfBandSlots))
	}
	return errors.Join(errs...)
}

func (t *txn) typeNames() map[string]bool {
	names := map[string]bool{}
	_ = t.tx.Bucket(bucketTypes).ForEach(func(k, _ []byte) error {
		names[string(k)] = true
		return nil
	})
	return names
}

// getInstance reads an instance and fills its effective AttachLimit; InstanceNotFound if absent.
func (t *txn) getInstance(id string) (*cloud.Instance, error) {
	var inst cloud.Instance
	ok, err := getJSON(t.tx.Bucket(bucketInstances), []byte(id), &inst)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, cloud.NewError(cloud.CodeInstanceNotFound, "instance %q not found", id)
	}
	if err := t.fillLimit(&inst); err != nil {
		return nil, err
	}
	return &inst, nil
}

func (t *txn) fillLimit(inst *cloud.Instance) error {
	if inst.Attachments == nil {
		inst.Attachments = []string{}
	}
	if inst.AttachLimitOverride != nil {
		inst.AttachLimit = *inst.AttachLimitOverride
		return nil
	}
	var it cloud.InstanceType
	ok, err := getJSON(t.tx.Bucket(bucketTypes), []byte(inst.InstanceType), &it)
	if err != nil {
		return err
	}
	if !ok {
		// Types are only written by seeding, so this is a corrupt store, not bad input.
		return fmt.Errorf("instance %s has unknown type %q", inst.ID, inst.InstanceType)
	}
	inst.AttachLimit = it.MaxAttachments
	return nil
}

func (t *txn) putInstance(inst *cloud.Instance) error {
	stored := *inst
	stored.AttachLimit = 0 // derived on read, so a type's limit is never stale in the record
	return t.putJSON(bucketInstances, []byte(inst.ID), stored)
}

// createInstance creates req or returns the existing instance with the same ID and fields.
func (t *txn) createInstance(req cloud.CreateInstanceRequest) (*cloud.Instance, error) {
	if err := validateCreateInstance(req, t.typeNames()); err != nil {
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "create instance: %v", err)
	}
	existing, err := t.getInstance(req.ID)
	if err == nil {
		if existing.Zone != req.Zone || existing.InstanceType != req.InstanceType || existing.OutOfBandSlots != req.OutOfBandSlots {
			return nil, cloud.NewError(cloud.CodeAlreadyExists, "instance %q exists with zone %q, type %q, outOfBandSlots %d",
				req.ID, existing.Zone, existing.InstanceType, existing.OutOfBandSlots)
		}
		return existing, nil
	}
	if !errors.Is(err, cloud.ErrInstanceNotFound) {
		return nil, err
	}
	rev, err := t.bump()
	if err != nil {
		return nil, err
	}
	inst := &cloud.Instance{
		ID:             req.ID,
		Zone:           req.Zone,
		InstanceType:   req.InstanceType,
		OutOfBandSlots: req.OutOfBandSlots,
		Attachments:    []string{},
		CreatedAt:      t.now,
		Revision:       rev,
	}
	if err := t.putInstance(inst); err != nil {
		return nil, err
	}
	if err := t.fillLimit(inst); err != nil {
		return nil, err
	}
	if err := t.event(cloud.Event{Type: "InstanceCreated", InstanceID: inst.ID,
		Detail: fmt.Sprintf("zone=%s type=%s outOfBandSlots=%d", inst.Zone, inst.InstanceType, inst.OutOfBandSlots)}); err != nil {
		return nil, err
	}
	return inst, nil
}

// CreateInstance creates an instance, idempotent on ID: the same fields return the existing
// instance, other fields are AlreadyExists; bad fields or an unknown type are InvalidArgument.
func (s *Store) CreateInstance(req cloud.CreateInstanceRequest) (*cloud.Instance, error) {
	var out *cloud.Instance
	err := s.update(func(t *txn) error {
		var err error
		out, err = t.createInstance(req)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create instance %s: %w", req.ID, err)
	}
	return out, nil
}

// EnsureInstance creates req unless an instance with its ID exists, in which case the
// existing instance is returned whatever its fields (auto-registration must not fail on an
// instance an admin already created differently).
func (s *Store) EnsureInstance(req cloud.CreateInstanceRequest) (*cloud.Instance, error) {
	var out *cloud.Instance
	err := s.update(func(t *txn) error {
		var err error
		out, err = t.ensureInstance(req)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("register instance %s: %w", req.ID, err)
	}
	return out, nil
}

func (t *txn) ensureInstance(req cloud.CreateInstanceRequest) (*cloud.Instance, error) {
	inst, err := t.getInstance(req.ID)
	if errors.Is(err, cloud.ErrInstanceNotFound) {
		return t.createInstance(req)
	}
	return inst, err
}

// GetInstance returns one instance; InstanceNotFound if absent.
func (s *Store) GetInstance(id string) (*cloud.Instance, error) {
	var out *cloud.Instance
	err := s.view(func(t *txn) error {
		var err error
		out, err = t.getInstance(id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get instance %s: %w", id, err)
	}
	return out, nil
}

// ListInstances returns every instance sorted by ID.
func (s *Store) ListInstances() ([]cloud.Instance, error) {
	out := []cloud.Instance{}
	err := s.view(func(t *txn) error {
		return t.tx.Bucket(bucketInstances).ForEach(func(_, v []byte) error {
			var inst cloud.Instance
			if err := jsonUnmarshal(v, &inst); err != nil {
				return err
			}
			if err := t.fillLimit(&inst); err != nil {
				return err
			}
			out = append(out, inst)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	return out, nil
}

// PatchInstance applies p. With ifMatch != nil the instance's Revision must equal *ifMatch
// (else PreconditionFailed). Negative values, an unknown type, an empty patch, or setting and
// clearing the limit at once are InvalidArgument. Lowering a limit below current use is
// allowed: it refuses new attaches and detaches nothing.
func (s *Store) PatchInstance(id string, p cloud.InstancePatch, ifMatch *uint64) (*cloud.Instance, error) {
	var errs []error
	if p.AttachLimit == nil && !p.ClearAttachLimit && p.OutOfBandSlots == nil && p.InstanceType == nil {
		errs = append(errs, errors.New("patch changes nothing"))
	}
	if p.AttachLimit != nil && p.ClearAttachLimit {
		errs = append(errs, errors.New("attachLimit and clearAttachLimit are exclusive"))
	}
	if p.AttachLimit != nil && *p.AttachLimit < 0 {
		errs = append(errs, fmt.Errorf("attachLimit must be >= 0, got %d", *p.AttachLimit))
	}
	if p.OutOfBandSlots != nil && *p.OutOfBandSlots < 0 {
		errs = append(errs, fmt.Errorf("outOfBandSlots must be >= 0, got %d", *p.OutOfBandSlots))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "patch instance %s: %v", id, err)
	}
	var out *cloud.Instance
	err := s.update(func(t *txn) error {
		inst, err := t.getInstance(id)
		if err != nil {
			return err
		}
		if ifMatch != nil && *ifMatch != inst.Revision {
			return cloud.NewError(cloud.CodePreconditionFailed, "instance %s is at revision %d, If-Match wants %d", id, inst.Revision, *ifMatch)
		}
		if p.InstanceType != nil {
			if !t.typeNames()[*p.InstanceType] {
				return cloud.NewError(cloud.CodeInvalidArgument, "unknown instanceType %q", *p.InstanceType)
			}
			inst.InstanceType = *p.InstanceType
		}
		if p.AttachLimit != nil {
			v := *p.AttachLimit
			inst.AttachLimitOverride = &v
		}
		if p.ClearAttachLimit {
			inst.AttachLimitOverride = nil
		}
		if p.OutOfBandSlots != nil {
			inst.OutOfBandSlots = *p.OutOfBandSlots
		}
		rev, err := t.bump()
		if err != nil {
			return err
		}
		inst.Revision = rev
		if err := t.putInstance(inst); err != nil {
			return err
		}
		if err := t.fillLimit(inst); err != nil {
			return err
		}
		attached, limit := len(inst.Attachments), inst.AttachLimit-inst.OutOfBandSlots
		if err := t.event(cloud.Event{Type: "InstancePatched", InstanceID: id, Attached: &attached, Limit: &limit,
			Detail: fmt.Sprintf("attachLimit=%d outOfBandSlots=%d type=%s", inst.AttachLimit, inst.OutOfBandSlots, inst.InstanceType)}); err != nil {
			return err
		}
		out = inst
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("patch instance %s: %w", id, err)
	}
	return out, nil
}

// Capacity returns the raw capacity facts of one instance, all read in one transaction so
// they are consistent with the revision they carry.
func (s *Store) Capacity(id string) (*cloud.Capacity, error) {
	var out *cloud.Capacity
	err := s.view(func(t *txn) error {
		inst, err := t.getInstance(id)
		if err != nil {
			return err
		}
		q, err := t.quotas()
		if err != nil {
			return err
		}
		out = &cloud.Capacity{
			InstanceID:     inst.ID,
			AttachLimit:    inst.AttachLimit,
			OutOfBandSlots: inst.OutOfBandSlots,
			Attached:       len(inst.Attachments),
			QuotaHeadroom:  max(0, q.Attachments.Limit-q.Attachments.Used),
			Instances:      t.tx.Bucket(bucketInstances).Stats().KeyN,
			Revision:       t.rev,
			Epoch:          t.s.epoch,
			ObservedAt:     t.now,
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("capacity of %s: %w", id, err)
	}
	return out, nil
}

func insertSorted(list []string, v string) []string {
	i := sort.SearchStrings(list, v)
	if i < len(list) && list[i] == v {
		return list
	}
	list = append(list, "")
	copy(list[i+1:], list[i:])
	list[i] = v
	return list
}

func removeSorted(list []string, v string) []string {
	i := sort.SearchStrings(list, v)
	if i < len(list) && list[i] == v {
		return append(list[:i], list[i+1:]...)
	}
	return list
}
