package cloud

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// The volume types. Every type takes one attach slot: the scheduler and CSINode count
// volumes, not slots (KEP-4876's allocatable.count is a volume count), so a type that took
// more would make every count the driver reports wrong by an amount that depends on the mix
// of types on the node (docs/design.md, "Volume types and attach slots").
const (
	VolumeTypeStandard = "standard" // the default; no provisioned IOPS
	VolumeTypeSSD      = "ssd"      // provisioned IOPS allowed
	VolumeTypeNVMe     = "nvme"     // provisioned IOPS allowed
)

// VolumeTypes lists the volume types, the default first.
func VolumeTypes() []string { return []string{VolumeTypeStandard, VolumeTypeSSD, VolumeTypeNVMe} }

// The bounds of a volume's provisioned IOPS; 0 means the type's baseline.
const (
	MinIOPS = 100
	MaxIOPS = 64000
)

// ModifyVolumeRequest is the body of POST /v1/volumes/{id}/modify: the volume's mutable
// parameters; nil fields are left as they are. Asking for what the volume has is a success
// that changes nothing (no revision, no event).
type ModifyVolumeRequest struct {
	// Type is one of VolumeTypes.
	Type *string `json:"type,omitempty"`
	// IOPS is the provisioned IOPS, MinIOPS to MaxIOPS, or 0 for the type's baseline; only
	// ssd and nvme take a non-zero value.
	IOPS *int `json:"iops,omitempty"`
}

// CheckVolumeParameters reports every problem of a volume's type and IOPS as one error: an
// unknown type, IOPS outside 0 or [MinIOPS, MaxIOPS], IOPS on a standard volume. typ ""
// reads as VolumeTypeStandard.
func CheckVolumeParameters(typ string, iops int) error {
	var errs []error
	if typ == "" {
		typ = VolumeTypeStandard
	}
	if !slices.Contains(VolumeTypes(), typ) {
		errs = append(errs, fmt.Errorf("type must be one of %v, got %s", VolumeTypes(), Quote(typ)))
	}
	switch {
	case iops != 0 && (iops < MinIOPS || iops > MaxIOPS):
		errs = append(errs, fmt.Errorf("iops must be 0 (the type's baseline) or in [%d, %d], got %d", MinIOPS, MaxIOPS, iops))
	case iops != 0 && typ == VolumeTypeStandard:
		errs = append(errs, fmt.Errorf("a %s volume takes no provisioned iops (use %s or %s)", VolumeTypeStandard, VolumeTypeSSD, VolumeTypeNVMe))
	}
	return errors.Join(errs...)
}

// Apply is a volume's type and IOPS after the request: the fields given replace typ and iops
// (typ "" reads as VolumeTypeStandard), and the result must pass CheckVolumeParameters (its
// error, for an InvalidArgument answer). changed says whether the result differs from what
// the volume has; asking for what it has changes nothing (no revision, no event).
func (r ModifyVolumeRequest) Apply(typ string, iops int) (newType string, newIOPS int, changed bool, err error) {
	typ = cmp.Or(typ, VolumeTypeStandard)
	newType, newIOPS = typ, iops
	if r.Type != nil {
		newType = *r.Type
	}
	if r.IOPS != nil {
		newIOPS = *r.IOPS
	}
	if err := CheckVolumeParameters(newType, newIOPS); err != nil {
		return "", 0, false, err
	}
	return newType, newIOPS, newType != typ || newIOPS != iops, nil
}
