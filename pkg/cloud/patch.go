package cloud

import (
	"errors"
	"fmt"
)

// CheckSlots reports a count of attach slots (an instance type's maxAttachments, an
// instance's attachLimit or outOfBandSlots) outside [lowest, MaxAttachSlots], naming the
// field, the value and the bounds; nil when it fits. The fake cloud answers a value it
// refuses with 400 InvalidArgument.
func CheckSlots(field string, v, lowest int) error {
	if v < lowest || v > MaxAttachSlots {
		return fmt.Errorf("%s must be in [%d, %d], got %d", field, lowest, MaxAttachSlots, v)
	}
	return nil
}

// CheckQuota reports a quota limit outside [0, bound] (MaxQuotaCount for the counts,
// MaxQuotaBytes for capacityBytes, in bytes), naming the field, the value and the bounds; nil
// v (not patched) and a value that fits are nil. The fake cloud answers a value it refuses
// with 400 InvalidArgument.
func CheckQuota(field string, v *int64, bound int64) error {
	if v == nil {
		return nil
	}
	if *v < 0 || *v > bound {
		return fmt.Errorf("%s must be in [0, %d], got %d", field, bound, *v)
	}
	return nil
}

// Check reports every problem of p that needs no instance to see, one a line (errors.Join),
// as PATCH /v1/instances/{id} refuses them with 400 InvalidArgument before it changes
// anything: an empty patch, attachLimit with clearAttachLimit, an attachLimit outside
// [1, MaxAttachSlots], outOfBandSlots outside [0, MaxAttachSlots]. What needs the instance
// (an unknown instanceType, outOfBandSlots above the resulting limit) is the cloud's to
// check when the patch applies. nil when p passes.
func (p InstancePatch) Check() error {
	var errs []error
	if p.AttachLimit == nil && !p.ClearAttachLimit && p.OutOfBandSlots == nil && p.InstanceType == nil {
		errs = append(errs, errors.New("patch changes nothing"))
	}
	if p.AttachLimit != nil && p.ClearAttachLimit {
		errs = append(errs, errors.New("attachLimit and clearAttachLimit are exclusive"))
	}
	if p.AttachLimit != nil && *p.AttachLimit < 1 {
		// 0 would read as "unlimited" to anyone who knows CSI's max_volumes_per_node; a node
		// without room for volumes is outOfBandSlots equal to the limit.
		errs = append(errs, fmt.Errorf("attachLimit must be >= 1, got %d (to leave no slot for volumes, set outOfBandSlots to the limit)", *p.AttachLimit))
	} else if p.AttachLimit != nil {
		errs = append(errs, CheckSlots("attachLimit", *p.AttachLimit, 1))
	}
	if p.OutOfBandSlots != nil {
		errs = append(errs, CheckSlots("outOfBandSlots", *p.OutOfBandSlots, 0))
	}
	return errors.Join(errs...)
}

// Check reports every problem of p, one a line (errors.Join), as PATCH /v1/quotas refuses
// them with 400 InvalidArgument before it changes anything: an empty patch, a count outside
// [0, MaxQuotaCount], capacityBytes outside [0, MaxQuotaBytes] (bytes). nil when p passes.
func (p QuotasPatch) Check() error {
	var errs []error
	if p.Attachments == nil && p.Volumes == nil && p.CapacityBytes == nil {
		errs = append(errs, errors.New("patch changes nothing"))
	}
	errs = append(errs, CheckQuota("attachments", p.Attachments, MaxQuotaCount),
		CheckQuota("volumes", p.Volumes, MaxQuotaCount), CheckQuota("capacityBytes", p.CapacityBytes, MaxQuotaBytes))
	return errors.Join(errs...)
}
