package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fakecloud/fakecloud-csi/internal/plural"
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

// validateCreateInstance checks a new instance against the instance types (name →
// maxAttachments); override is its per-instance attach limit, if any. Out-of-band slots may
// take every slot of the limit (a node with no room for this driver) but not more.
func validateCreateInstance(req cloud.CreateInstanceRequest, types map[string]int, override *int) error {
	var errs []error
	if err := checkInstanceID(req.ID); err != nil {
		errs = append(errs, err)
	}
	if err := CheckZone(req.Zone); err != nil {
		errs = append(errs, err)
	}
	limit, known := types[req.InstanceType]
	if req.InstanceType == "" {
		errs = append(errs, errors.New("instanceType is required"))
	} else if !known {
		errs = append(errs, fmt.Errorf("unknown instanceType %s", cloud.Quote(req.InstanceType)))
	}
	if override != nil {
		limit, known = *override, true
	}
	switch {
	case req.OutOfBandSlots < 0 || req.OutOfBandSlots > cloud.MaxAttachSlots:
		errs = append(errs, cloud.CheckSlots("outOfBandSlots", req.OutOfBandSlots, 0))
	case known && req.OutOfBandSlots > limit:
		errs = append(errs, outOfBandAboveLimit(req.OutOfBandSlots, limit))
	}
	return errors.Join(errs...)
}

func outOfBandAboveLimit(oob, limit int) error {
	return fmt.Errorf("outOfBandSlots %d is above the attach limit %d: out-of-band slots are part of the limit (equal to it leaves none for volumes)", oob, limit)
}

// typeLimits maps each instance type's name to its maxAttachments.
func (t *txn) typeLimits() (map[string]int, error) {
	limits := map[string]int{}
	err := t.tx.Bucket(bucketTypes).ForEach(func(k, v []byte) error {
		var it cloud.InstanceType
		if err := jsonUnmarshal(v, &it); err != nil {
			return fmt.Errorf("instance type %s: %w", k, err)
		}
		limits[string(k)] = it.MaxAttachments
		return nil
	})
	return limits, err
}

// instanceRec is the stored JSON record of an instance: what only a create or a patch
// changes. Its revision and attachments, which every attach and detach changes, are narrow
// records of their own (see Format).
type instanceRec struct {
	ID                  string    `json:"id"`
	Zone                string    `json:"zone"`
	InstanceType        string    `json:"instanceType"`
	AttachLimitOverride *int      `json:"attachLimitOverride,omitempty"`
	OutOfBandSlots      int       `json:"outOfBandSlots"`
	CreatedAt           time.Time `json:"createdAt"`
}

// instView is an instance as a mutation sees it: its record, its state and its effective
// attach limit. The attachment list is read only where the API returns it (instance).
type instView struct {
	rec   instanceRec
	state instanceState
	limit int
}

// slots is the instance's limit, out-of-band slots and held slots, for the slot formulas of
// cloud.Capacity (Slots, FreeSlots).
func (iv *instView) slots() cloud.Capacity {
	return cloud.Capacity{AttachLimit: iv.limit, OutOfBandSlots: iv.rec.OutOfBandSlots, Attached: int(iv.state.attached)}
}

// loadInstance reads an instance's record and state and its effective limit;
// InstanceNotFound if absent.
func (t *txn) loadInstance(id string) (*instView, error) {
	iv := &instView{}
	ok, err := t.s.recs.instances.getJSON(t.tx.Bucket(bucketInstances), []byte(id), &iv.rec)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, cloud.NewError(cloud.CodeInstanceNotFound, "instance %s not found", cloud.Quote(id))
	}
	if iv.state, err = decodeInstanceState(t.tx.Bucket(bucketInstStates).Get([]byte(id))); err != nil {
		return nil, fmt.Errorf("instance %s: %w", id, err)
	}
	if iv.limit, err = t.attachLimit(&iv.rec); err != nil {
		return nil, err
	}
	return iv, nil
}

// attachLimit is the instance's override, or else its type's MaxAttachments.
func (t *txn) attachLimit(rec *instanceRec) (int, error) {
	if rec.AttachLimitOverride != nil {
		return *rec.AttachLimitOverride, nil
	}
	var it cloud.InstanceType
	ok, err := t.s.recs.types.getJSON(t.tx.Bucket(bucketTypes), []byte(rec.InstanceType), &it)
	if err != nil {
		return 0, err
	}
	if !ok {
		// Types are only written by seeding, so this is a corrupt store, not bad input.
		return 0, fmt.Errorf("instance %s has unknown type %q", rec.ID, rec.InstanceType)
	}
	return it.MaxAttachments, nil
}

// instance is iv in the API's shape, with its sorted attachment list.
//
// The state counts come from the same transaction as the attachments, so they always add up
// to at most len(Attachments); an undecodable phase (a corrupt store) leaves them at zero,
// as the attachment list has no error to return either.
func (t *txn) instance(iv *instView) *cloud.Instance {
	out := &cloud.Instance{
		ID:                  iv.rec.ID,
		Zone:                iv.rec.Zone,
		InstanceType:        iv.rec.InstanceType,
		AttachLimitOverride: iv.rec.AttachLimitOverride,
		AttachLimit:         iv.limit,
		OutOfBandSlots:      iv.rec.OutOfBandSlots,
		Attachments:         make([]string, 0, iv.state.attached),
		CreatedAt:           iv.rec.CreatedAt,
		Revision:            iv.state.revision,
	}
	if b := t.tx.Bucket(bucketAttach).Bucket([]byte(iv.rec.ID)); b != nil {
		// Keys come in byte order, which is the sorted order the API promises.
		_ = b.ForEach(func(k, _ []byte) error {
			out.Attachments = append(out.Attachments, string(k))
			return nil
		})
		if a, d, f, err := t.slotStates(iv.rec.ID); err == nil {
			out.Attaching, out.Detaching, out.Failed = a, d, f
		}
	}
	return out
}

// getInstance reads an instance in the API's shape; InstanceNotFound if absent.
func (t *txn) getInstance(id string) (*cloud.Instance, error) {
	iv, err := t.loadInstance(id)
	if err != nil {
		return nil, err
	}
	return t.instance(iv), nil
}

// putInstance writes iv's record and state; the caller has stamped the state's revision.
func (t *txn) putInstance(iv *instView) error {
	if err := t.putJSON(bucketInstances, []byte(iv.rec.ID), iv.rec); err != nil {
		return err
	}
	return t.putInstanceState(iv.rec.ID, iv.state)
}

// createInstance creates req or returns the existing instance with the same ID and fields.
func (t *txn) createInstance(req cloud.CreateInstanceRequest) (*instView, error) {
	// The existing instance first: a retried create must get it back even when it was seeded
	// with a per-instance limit that lets its out-of-band slots exceed its type's.
	existing, err := t.loadInstance(req.ID)
	switch {
	case err == nil:
		if existing.rec.Zone != req.Zone || existing.rec.InstanceType != req.InstanceType || existing.rec.OutOfBandSlots != req.OutOfBandSlots {
			return nil, cloud.NewError(cloud.CodeAlreadyExists, "instance %s exists with zone %s, type %s, outOfBandSlots %d",
				cloud.Quote(req.ID), cloud.Quote(existing.rec.Zone), cloud.Quote(existing.rec.InstanceType), existing.rec.OutOfBandSlots)
		}
		return existing, nil
	case !errors.Is(err, cloud.ErrInstanceNotFound):
		return nil, err
	}
	types, err := t.typeLimits()
	if err != nil {
		return nil, err
	}
	if err := validateCreateInstance(req, types, nil); err != nil {
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "create instance: %v", err)
	}
	// Seeds are checked against the bound by State.Validate's caller; this holds the API.
	if n := t.tx.Bucket(bucketInstances).Stats().KeyN; n >= t.s.maxInstances {
		return nil, cloud.NewError(cloud.CodeServerLimitExceeded, "create instance: the cloud holds at most %s", plural.Of(t.s.maxInstances, "instance", "instances"))
	}
	rev, err := t.bump()
	if err != nil {
		return nil, err
	}
	iv := &instView{
		rec:   instanceRec{ID: req.ID, Zone: req.Zone, InstanceType: req.InstanceType, OutOfBandSlots: req.OutOfBandSlots, CreatedAt: t.now},
		state: instanceState{revision: rev},
	}
	if err := t.putInstance(iv); err != nil {
		return nil, err
	}
	if iv.limit, err = t.attachLimit(&iv.rec); err != nil {
		return nil, err
	}
	if err := t.event(cloud.Event{Type: "InstanceCreated", InstanceID: req.ID,
		Detail: fmt.Sprintf("zone=%s type=%s outOfBandSlots=%d", req.Zone, req.InstanceType, req.OutOfBandSlots)}); err != nil {
		return nil, err
	}
	return iv, nil
}

// CreateInstance creates an instance, idempotent on ID: the same fields return the existing
// instance, other fields are AlreadyExists; bad fields or an unknown type are InvalidArgument;
// a new instance past Options.MaxInstances is ServerLimitExceeded.
func (s *Store) CreateInstance(req cloud.CreateInstanceRequest) (*cloud.Instance, error) {
	var out *cloud.Instance
	err := s.update(func(t *txn) error {
		iv, err := t.createInstance(req)
		if err != nil {
			return err
		}
		out = t.instance(iv)
		return nil
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
		iv, err := t.ensureInstance(req)
		if err != nil {
			return err
		}
		out = t.instance(iv)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("register instance %s: %w", req.ID, err)
	}
	return out, nil
}

func (t *txn) ensureInstance(req cloud.CreateInstanceRequest) (*instView, error) {
	iv, err := t.loadInstance(req.ID)
	if errors.Is(err, cloud.ErrInstanceNotFound) {
		return t.createInstance(req)
	}
	return iv, err
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
		return t.tx.Bucket(bucketInstances).ForEach(func(k, _ []byte) error {
			inst, err := t.getInstance(string(k))
			if err != nil {
				return err
			}
			out = append(out, *inst)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	return out, nil
}

// PatchInstance applies p. With ifMatch != nil the instance's Revision must equal *ifMatch
// (else PreconditionFailed). InvalidArgument, changing nothing: an empty patch, setting and
// clearing the limit at once, an attachLimit below 1, negative outOfBandSlots, an unknown
// type, or a result whose outOfBandSlots exceed its effective attach limit (equal is allowed:
// a node with no slot left for this driver). Lowering a limit below current use is allowed:
// it refuses new attaches and detaches nothing.
func (s *Store) PatchInstance(id string, p cloud.InstancePatch, ifMatch *uint64) (*cloud.Instance, error) {
	if err := p.Check(); err != nil {
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "patch instance %s: %v", cloud.Quote(id), err)
	}
	var out *cloud.Instance
	err := s.update(func(t *txn) error {
		iv, err := t.loadInstance(id)
		if err != nil {
			return err
		}
		if ifMatch != nil && *ifMatch != iv.state.revision {
			return cloud.NewError(cloud.CodePreconditionFailed, "instance %s is at revision %d, If-Match wants %d", cloud.Quote(id), iv.state.revision, *ifMatch)
		}
		if p.InstanceType != nil {
			types, err := t.typeLimits()
			if err != nil {
				return err
			}
			if _, ok := types[*p.InstanceType]; !ok {
				return cloud.NewError(cloud.CodeInvalidArgument, "unknown instanceType %s", cloud.Quote(*p.InstanceType))
			}
			iv.rec.InstanceType = *p.InstanceType
		}
		if p.AttachLimit != nil {
			v := *p.AttachLimit
			iv.rec.AttachLimitOverride = &v
		}
		if p.ClearAttachLimit {
			iv.rec.AttachLimitOverride = nil
		}
		if p.OutOfBandSlots != nil {
			iv.rec.OutOfBandSlots = *p.OutOfBandSlots
		}
		// The result is checked, not the fields one by one, so that one patch may lower the
		// limit and the out-of-band slots together.
		if iv.limit, err = t.attachLimit(&iv.rec); err != nil {
			return err
		}
		if iv.rec.OutOfBandSlots > iv.limit {
			return cloud.NewError(cloud.CodeInvalidArgument, "patch instance %s: %v", cloud.Quote(id), outOfBandAboveLimit(iv.rec.OutOfBandSlots, iv.limit))
		}
		if iv.state.revision, err = t.bump(); err != nil {
			return err
		}
		if err := t.putInstance(iv); err != nil {
			return err
		}
		attached, limit := int(iv.state.attached), iv.slots().Slots()
		if err := t.event(cloud.Event{Type: "InstancePatched", InstanceID: id, Attached: &attached, Limit: &limit,
			Detail: fmt.Sprintf("attachLimit=%d outOfBandSlots=%d type=%s", iv.limit, iv.rec.OutOfBandSlots, iv.rec.InstanceType)}); err != nil {
			return err
		}
		out = t.instance(iv)
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
		iv, err := t.loadInstance(id)
		if err != nil {
			return err
		}
		q, err := t.quotas()
		if err != nil {
			return err
		}
		attaching, detaching, failed, err := t.slotStates(iv.rec.ID)
		if err != nil {
			return err
		}
		out = &cloud.Capacity{
			InstanceID:     iv.rec.ID,
			AttachLimit:    iv.limit,
			OutOfBandSlots: iv.rec.OutOfBandSlots,
			Attached:       int(iv.state.attached),
			Attaching:      attaching,
			Detaching:      detaching,
			Failed:         failed,
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

// slotStates counts the volumes bound to an instance by attach state: attaching, detaching,
// and error (a failed detach); the rest are attached.
func (t *txn) slotStates(instID string) (attaching, detaching, failed int, err error) {
	b := t.tx.Bucket(bucketAttach).Bucket([]byte(instID))
	if b == nil {
		return 0, 0, 0, nil
	}
	phases := t.tx.Bucket(bucketPhases)
	err = b.ForEach(func(k, _ []byte) error {
		data := phases.Get(k)
		if data == nil {
			return nil // a format 2 attachment: attached
		}
		var p phase
		if err := json.Unmarshal(data, &p); err != nil {
			return fmt.Errorf("volume %s: decode phase: %w", k, err)
		}
		switch p.State {
		case cloud.StateAttaching:
			attaching++
		case cloud.StateDetaching:
			detaching++
		case cloud.StateError:
			failed++
		}
		return nil
	})
	return attaching, detaching, failed, err
}
