package capacityplot

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
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
func CaptureBaseline(ctx context.Context, c *cloud.Client, ids []string) (Baseline, error) {
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
	type inst struct {
		slots, attached int
		known           bool
	}
	state := map[string]*inst{}
	for id, f := range b.Instances {
		state[id] = &inst{slots: f.Slots, attached: f.Attached, known: true}
	}
	quotaLimit, used, count := b.QuotaLimit, b.QuotaUsed, b.InstanceCount
	// attaching holds the volumes seen starting an asynchronous attach (docs/attach.md): their
	// VolumeAttached takes no further slot. A synchronous attach is a VolumeAttached alone.
	attaching := map[string]bool{}
	out := map[string][]TruthStep{}
	headroom := func() int64 { return max(0, quotaLimit-used) }
	record := func(at time.Time, rev uint64, cause string) {
		for id, s := range state {
			if _, tracked := b.Instances[id]; !tracked || !s.known {
				continue
			}
			step := TruthStep{At: at, Revision: rev, Cause: cause, Slots: s.slots, Attached: s.attached, Headroom: headroom(),
				Truth: Truth(s.slots, s.attached, headroom(), count, share)}
			prev := out[id]
			if n := len(prev); n > 0 && prev[n-1].Truth == step.Truth && prev[n-1].Attached == step.Attached {
				continue
			}
			out[id] = append(prev, step)
		}
	}
	record(b.At, b.Revision, "baseline")
	var notes []string
	for _, e := range events {
		if e.Revision <= b.Revision || !capacityEvents[e.Type] {
			continue
		}
		switch e.Type {
		case "Reset", "Seeded":
			notes = append(notes, fmt.Sprintf("cloud %s at revision %d (%s): truth is not replayed past it", e.Type, e.Revision, e.Time.Format(time.RFC3339)))
			return out, notes
		case "QuotasChanged":
			m := quotaDetail.FindStringSubmatch(e.Detail)
			if m == nil {
				notes = append(notes, fmt.Sprintf("event %d: QuotasChanged without attachments= in %q", e.Seq, e.Detail))
				continue
			}
			quotaLimit, _ = strconv.ParseInt(m[1], 10, 64)
		case "InstanceCreated":
			count++
			s := &inst{known: true}
			if m := createdDetail.FindStringSubmatch(e.Detail); m != nil {
				oob, _ := strconv.Atoi(m[2])
				limit, ok := b.TypeLimits[m[1]]
				s.slots, s.known = cloud.Capacity{AttachLimit: limit, OutOfBandSlots: oob}.Slots(), ok
			} else {
				s.known = false
			}
			if old, ok := state[e.InstanceID]; !ok || !old.known {
				state[e.InstanceID] = s
			}
		case "InstancePatched", "VolumeAttaching", "VolumeAttached", "VolumeAttachFailed", "VolumeDetaching", "VolumeDetached", "VolumeDetachFailed":
			// A slot and a unit of quota are held from the start of attaching to the end of
			// detaching; Attached counts the instance's slots held after the event.
			delta := 0
			switch e.Type {
			case "VolumeAttaching":
				delta, attaching[e.VolumeID] = 1, true
			case "VolumeAttached":
				if !attaching[e.VolumeID] {
					delta = 1
				}
				delete(attaching, e.VolumeID)
			case "VolumeAttachFailed":
				delta = -1
				delete(attaching, e.VolumeID)
			case "VolumeDetached":
				delta = -1
			}
			s := state[e.InstanceID]
			switch {
			case s == nil:
				s = &inst{}
				if e.Attached != nil {
					s.attached = *e.Attached - delta
				}
				state[e.InstanceID] = s
			case e.Attached != nil:
				// Exact where the instance's count is known: a re-attach after a failed
				// detach, say, takes no new slot.
				delta = *e.Attached - s.attached
			}
			used += int64(delta)
			if e.Attached != nil {
				s.attached = *e.Attached
			}
			if e.Limit != nil {
				// Limit in these events is already attach limit − out-of-band.
				s.slots, s.known = *e.Limit, true
			}
		}
		record(e.Time, e.Revision, e.Type)
	}
	return out, notes
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
