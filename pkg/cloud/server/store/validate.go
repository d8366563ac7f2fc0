package store

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Size limits of names and IDs, in bytes.
const (
	// MaxNameBytes bounds volume and snapshot names: the CSI spec's size limit of a string
	// field (spec.md, "Size Limits"), also csi-sanity's maximum-length name. The driver passes
	// CSI names through unchanged, so every name a CO may send fits.
	MaxNameBytes = 128
	// MaxInstanceIDBytes bounds instance IDs: a Kubernetes node name (a DNS subdomain) has at
	// most 253 characters, and the driver's node ID is its node's name.
	MaxInstanceIDBytes = 253
)

// checkName reports what is wrong with a volume or snapshot name: empty (or white space
// only), over MaxNameBytes, or holding a character the CSI spec bans from names
// (CreateVolumeRequest.name, CreateSnapshotRequest.name: U+0000–U+0008, U+000B, U+000C,
// U+000E–U+001F, U+007F–U+009F). Tab, line feed and carriage return stay allowed, as in CSI:
// refusing a name CSI allows would fail a valid CreateVolume.
func checkName(field, v string) error {
	return checkText(field, v, MaxNameBytes, func(r rune) bool {
		return unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r'
	})
}

// checkInstanceID reports what is wrong with an instance ID: empty, over MaxInstanceIDBytes,
// or holding any control character (a node name has none).
func checkInstanceID(v string) error {
	return checkText("id", v, MaxInstanceIDBytes, unicode.IsControl)
}

func checkText(field, v string, maxBytes int, banned func(rune) bool) error {
	if strings.TrimSpace(v) == "" {
		return fmt.Errorf("%s is required", field)
	}
	if len(v) > maxBytes {
		return fmt.Errorf("%s is %d bytes long, at most %d allowed", field, len(v), maxBytes)
	}
	for i, r := range v {
		if banned(r) {
			return fmt.Errorf("%s has the control character %U at byte %d", field, r, i)
		}
	}
	return nil
}

// CheckZone reports what is wrong with a zone name. A zone is the value of the driver's
// topology segment, so it follows the CSI spec's rule for segment values (the Topology
// message): 1 to 63 characters, alphanumerics at both ends, '-', '_', '.' or alphanumerics in
// between (the rule of a Kubernetes label value).
func CheckZone(zone string) error {
	if zone == "" {
		return errors.New("zone is required")
	}
	if msgs := validation.IsValidLabelValue(zone); len(msgs) > 0 {
		return fmt.Errorf("zone %q is not a CSI topology value: %s", zone, strings.Join(msgs, "; "))
	}
	return nil
}
