package capacityplot

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/capacity"
)

// QuotaShare is how much of the account's attachment-quota headroom counts
// toward one node: the driver's own type (--quota-share).
type QuotaShare = capacity.QuotaShare

// The quota shares the driver knows.
const (
	// QuotaShareNone gives every node the whole headroom.
	QuotaShareNone = capacity.QuotaShareNone
	// QuotaShareEven gives every node ceil(headroom / instances).
	QuotaShareEven = capacity.QuotaShareEven
)

// Truth is the count the driver should report for one instance's facts, in
// attach slots: max(1, min(slots, attached + share)) where share is the quota
// headroom, or ceil(headroom / instances) for QuotaShareEven. It is the
// driver's formula itself (capacity.Raw and capacity.Reportable, imported from
// the main module, docs/design.md "Capacity model"), not a copy of it: the
// plots compare the driver's reports with the truth, and a second statement
// of the formula could drift from the one the driver runs.
func Truth(slots, attached int, headroom int64, instances int, share QuotaShare) int64 {
	c := cloud.Capacity{AttachLimit: slots, Attached: attached, QuotaHeadroom: headroom, Instances: instances}
	return capacity.Reportable(capacity.Raw(c, share))
}

// InstanceFacts are the capacity inputs of one instance at the baseline.
type InstanceFacts struct {
	// Slots is attach limit minus out-of-band slots (cloud.Capacity.Slots).
	Slots    int
	Attached int
}

// Baseline is the cloud's state at one revision, the start of a replay.
type Baseline struct {
	Revision uint64
	At       time.Time
	// QuotaLimit and QuotaUsed are the account's attachment quota.
	QuotaLimit, QuotaUsed int64
	// Instances are the instances whose truth is replayed, by instance ID.
	Instances map[string]InstanceFacts
	// InstanceCount is the number of instances in the account (even share).
	InstanceCount int
	// TypeLimits maps instance type to maxAttachments, for instances created
	// during the replay.
	TypeLimits map[string]int
}

// TruthStep is the truth of one instance from At on, caused by the cloud
// event of Revision (Cause is its type; "baseline" for the first step).
type TruthStep struct {
	At       time.Time `json:"at"`
	Revision uint64    `json:"revision"`
	Cause    string    `json:"cause"`
	Truth    int64     `json:"truth"`
	Slots    int       `json:"slots"`
	Attached int       `json:"attached"`
	Headroom int64     `json:"headroom"`
}

// CaptureBaseline reads the capacity of every instance in ids and the
// quotas at one revision: it retries until no mutation happened between the
// reads (at most 10 times, then it fails). Errors are the cloud client's.
func CaptureBaseline(ctx context.Context, c *admin.Client, ids []string) (Baseline, error) {
	if len(ids) == 0 {
		return Baseline{}, errors.New("baseline: no instances")
	}
	types, err := c.ListInstanceTypes(ctx)
	if err != nil {
		return Baseline{}, fmt.Errorf("baseline: instance types: %w", err)
	}
	limits := map[string]int{}
	for _, t := range types {
		limits[t.Name] = t.MaxAttachments
	}
	for range 10 {
		b := Baseline{Instances: map[string]InstanceFacts{}, TypeLimits: limits}
		first, err := c.GetCapacity(ctx, ids[0])
		if err != nil {
			return Baseline{}, fmt.Errorf("baseline: capacity of %s: %w", ids[0], err)
		}
		q, err := c.GetQuotas(ctx)
		if err != nil {
			return Baseline{}, fmt.Errorf("baseline: quotas: %w", err)
		}
		b.Revision, b.At, b.InstanceCount = first.Revision, first.ObservedAt, first.Instances
		b.QuotaLimit, b.QuotaUsed = q.Attachments.Limit, q.Attachments.Used
		consistent := true
		for _, id := range ids {
			capa := first
			if id != ids[0] {
				if capa, err = c.GetCapacity(ctx, id); err != nil {
					return Baseline{}, fmt.Errorf("baseline: capacity of %s: %w", id, err)
				}
			}
			b.Instances[id] = InstanceFacts{Slots: capa.Slots(), Attached: capa.Attached}
			consistent = consistent && capa.Revision == b.Revision
		}
		if consistent {
			return b, nil
		}
	}
	return Baseline{}, errors.New("baseline: the cloud kept changing between reads (10 tries)")
}

var (
	quotaDetail    = regexp.MustCompile(`attachments=(-?\d+)`)
	createdDetail  = regexp.MustCompile(`type=(\S+) outOfBandSlots=(-?\d+)`)
	capacityEvents = map[string]bool{"InstancePatched": true, "InstanceCreated": true, "VolumeAttaching": true, "VolumeAttached": true,
		"VolumeAttachFailed": true, "VolumeDetaching": true, "VolumeDetached": true, "VolumeDetachFailed": true,
		"QuotasChanged": true, "Reset": true, "Seeded": true}
)

// Replay applies the cloud's audit events after b.Revision to b and returns
// the truth of every instance of b as steps (a step whenever its truth or
// attached count changes), plus notes on what could not be replayed. A Reset
// (or Seeded) event ends the replay: the seeded state is not in the log.
func Replay(b Baseline, events []cloud.Event, share QuotaShare) (map[string][]TruthStep, []string) {
	r := newReplay(b, share)
	r.record(b.At, b.Revision, "baseline")
	for _, e := range events {
		if e.Revision <= b.Revision || !capacityEvents[e.Type] {
			continue
		}
		switch e.Type {
		case "Reset", "Seeded":
			r.notes = append(r.notes, fmt.Sprintf("cloud %s at revision %d (%s): truth is not replayed past it", e.Type, e.Revision, e.Time.Format(time.RFC3339)))
			return r.out, r.notes
		case "QuotasChanged":
			if !r.quotasChanged(e) {
				continue
			}
		case "InstanceCreated":
			r.instanceCreated(e)
		case "InstancePatched", "VolumeAttaching", "VolumeAttached", "VolumeAttachFailed", "VolumeDetaching", "VolumeDetached", "VolumeDetachFailed":
			r.slotsChanged(e)
		}
		r.record(e.Time, e.Revision, e.Type)
	}
	return r.out, r.notes
}

// replayInstance is one instance's state during a Replay: its slots (attach limit −
// out-of-band), the slots held, and whether its slots are known.
type replayInstance struct {
	slots, attached int
	known           bool
}

// replay is a Replay in progress: every instance's state, the account's quota and instance
// count, the volumes attaching, and the steps and notes so far.
type replay struct {
	b     Baseline
	share QuotaShare
	state map[string]*replayInstance
	// quotaLimit and used are the account's attachment quota; count its instances.
	quotaLimit, used int64
	count            int
	// attaching holds the volumes seen starting an asynchronous attach (docs/attach.md): their
	// VolumeAttached takes no further slot. A synchronous attach is a VolumeAttached alone.
	attaching map[string]bool
	out       map[string][]TruthStep
	notes     []string
}

// newReplay starts a replay from b.
func newReplay(b Baseline, share QuotaShare) *replay {
	r := &replay{b: b, share: share, state: map[string]*replayInstance{},
		quotaLimit: b.QuotaLimit, used: b.QuotaUsed, count: b.InstanceCount,
		attaching: map[string]bool{}, out: map[string][]TruthStep{}}
	for id, f := range b.Instances {
		r.state[id] = &replayInstance{slots: f.Slots, attached: f.Attached, known: true}
	}
	return r
}

func (r *replay) headroom() int64 { return max(0, r.quotaLimit-r.used) }

// record adds a step, at the event of rev at time at, to every instance of the baseline
// whose slots are known and whose truth or attached count changed.
func (r *replay) record(at time.Time, rev uint64, cause string) {
	for id, s := range r.state {
		if _, tracked := r.b.Instances[id]; !tracked || !s.known {
			continue
		}
		step := TruthStep{At: at, Revision: rev, Cause: cause, Slots: s.slots, Attached: s.attached, Headroom: r.headroom(),
			Truth: Truth(s.slots, s.attached, r.headroom(), r.count, r.share)}
		prev := r.out[id]
		if n := len(prev); n > 0 && prev[n-1].Truth == step.Truth && prev[n-1].Attached == step.Attached {
			continue
		}
		r.out[id] = append(prev, step)
	}
}

// quotasChanged takes the new attachment quota from e's detail. It returns false, with a
// note, when the detail does not carry it.
func (r *replay) quotasChanged(e cloud.Event) bool {
	m := quotaDetail.FindStringSubmatch(e.Detail)
	if m == nil {
		r.notes = append(r.notes, fmt.Sprintf("event %d: QuotasChanged without attachments= in %q", e.Seq, e.Detail))
		return false
	}
	r.quotaLimit, _ = strconv.ParseInt(m[1], 10, 64)
	return true
}

// instanceCreated counts a new instance and, unless its slots are known already, starts it
// with the slots of its type and out-of-band count from e's detail (unknown when the detail
// or the type's limit is missing).
func (r *replay) instanceCreated(e cloud.Event) {
	r.count++
	s := &replayInstance{known: true}
	if m := createdDetail.FindStringSubmatch(e.Detail); m != nil {
		oob, _ := strconv.Atoi(m[2])
		limit, ok := r.b.TypeLimits[m[1]]
		s.slots, s.known = cloud.Capacity{AttachLimit: limit, OutOfBandSlots: oob}.Slots(), ok
	} else {
		s.known = false
	}
	if old, ok := r.state[e.InstanceID]; !ok || !old.known {
		r.state[e.InstanceID] = s
	}
}

// slotsChanged applies an InstancePatched or a volume attach or detach event: the slots held
// on its instance and in the quota, and the instance's slots when e carries its limit.
func (r *replay) slotsChanged(e cloud.Event) {
	// A slot and a unit of quota are held from the start of attaching to the end of
	// detaching; Attached counts the instance's slots held after the event.
	delta := 0
	switch e.Type {
	case "VolumeAttaching":
		delta, r.attaching[e.VolumeID] = 1, true
	case "VolumeAttached":
		if !r.attaching[e.VolumeID] {
			delta = 1
		}
		delete(r.attaching, e.VolumeID)
	case "VolumeAttachFailed":
		delta = -1
		delete(r.attaching, e.VolumeID)
	case "VolumeDetached":
		delta = -1
	}
	s := r.state[e.InstanceID]
	switch {
	case s == nil:
		s = &replayInstance{}
		if e.Attached != nil {
			s.attached = *e.Attached - delta
		}
		r.state[e.InstanceID] = s
	case e.Attached != nil:
		// Exact where the instance's count is known: a re-attach after a failed
		// detach, say, takes no new slot.
		delta = *e.Attached - s.attached
	}
	r.used += int64(delta)
	if e.Attached != nil {
		s.attached = *e.Attached
	}
	if e.Limit != nil {
		// Limit in these events is already attach limit − out-of-band.
		s.slots, s.known = *e.Limit, true
	}
}

// TruthAt is the truth of steps at t and whether it is known (t not before
// the first step).
func TruthAt(steps []TruthStep, t time.Time) (TruthStep, bool) {
	var cur TruthStep
	found := false
	for _, s := range steps {
		if s.At.After(t) {
			break
		}
		cur, found = s, true
	}
	return cur, found
}
