package store

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// MaxNameBytes bounds volume and snapshot names and instance IDs, in bytes: the one bound
// of every identifier (cloud.MaxIDBytes, the CSI spec's size limit of a string field). A
// Kubernetes node name may be longer (253), but the driver's node ID is its node's name and a
// CSI node_id has at most 128 bytes, so no node this driver can serve is refused.
const MaxNameBytes = cloud.MaxIDBytes

// checkName reports what is wrong with a volume or snapshot name (cloud.CheckName: empty,
// over MaxNameBytes, or a control character the CSI spec bans from names).
func checkName(field, v string) error { return cloud.CheckName(field, v) }

// checkInstanceID reports what is wrong with an instance ID (cloud.CheckID: empty, over
// MaxNameBytes, any control character, "." or "..").
func checkInstanceID(v string) error { return cloud.CheckID("id", v) }

// CheckZone reports what is wrong with a zone name. A zone is the value of the driver's
// topology segment, so it follows the CSI spec's rule for segment values (the Topology
// message): 1 to 63 characters, alphanumerics at both ends, '-', '_', '.' or alphanumerics in
// between (the rule of a Kubernetes label value).
func CheckZone(zone string) error {
	if zone == "" {
		return errors.New("zone is required")
	}
	if msgs := validation.IsValidLabelValue(zone); len(msgs) > 0 {
		return fmt.Errorf("zone %s is not a CSI topology value: %s", cloud.Quote(zone), strings.Join(msgs, "; "))
	}
	return nil
}
