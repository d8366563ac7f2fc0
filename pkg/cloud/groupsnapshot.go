package cloud

import (
	"errors"
	"fmt"
	"slices"
)

// Check reports every problem of the request at once, as one InvalidArgument error, and
// returns its volumes sorted: the name follows the rule of CreateVolumeRequest.Name
// (CheckName); there are 1 to MaxGroupSnapshotMembers volume IDs, each an identifier
// (CheckID), none twice. The fake cloud and the driver's test fake both check with it, so
// they refuse the same requests.
func (r CreateGroupSnapshotRequest) Check() ([]string, error) {
	var errs []error
	if err := CheckName("name", r.Name); err != nil {
		errs = append(errs, err)
	}
	switch n := len(r.SourceVolumeIDs); {
	case n == 0:
		errs = append(errs, errors.New("sourceVolumeIds: at least one volume is required"))
	case n > MaxGroupSnapshotMembers:
		errs = append(errs, fmt.Errorf("sourceVolumeIds: %d volumes, at most %d allowed", n, MaxGroupSnapshotMembers))
	}
	ids := slices.Clone(r.SourceVolumeIDs)
	slices.Sort(ids)
	for i, id := range ids {
		if len(errs) > 8 {
			// A list of 64 bad IDs needs no 64 messages.
			errs = append(errs, errors.New("sourceVolumeIds: more problems not listed"))
			break
		}
		if err := CheckID("sourceVolumeIds[]", id); err != nil {
			errs = append(errs, err)
			continue
		}
		if i > 0 && ids[i-1] == id {
			errs = append(errs, fmt.Errorf("sourceVolumeIds: volume %s is listed more than once", Quote(id)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, NewError(CodeInvalidArgument, "create group snapshot: %v", err)
	}
	return ids, nil
}
