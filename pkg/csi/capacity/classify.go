package capacity

import (
	"errors"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// ErrorClass is the class of a failed capacity lookup (docs/errors.md). Only
// ClassCapacity says anything about slots; every other class means "truth unknown".
type ErrorClass string

// The lookup error classes, also the "class" label of the lookup error metric.
const (
	ClassNone          ErrorClass = ""
	ClassCapacity      ErrorClass = "capacity"      // AttachmentLimitExceeded / AttachmentQuotaExceeded: the cloud says full
	ClassPermission    ErrorClass = "permission"    // AccessDenied (403)
	ClassAuth          ErrorClass = "auth"          // Unauthenticated (401)
	ClassNotFound      ErrorClass = "notFound"      // InstanceNotFound / NotFound (404)
	ClassThrottled     ErrorClass = "throttled"     // Throttled (429)
	ClassServer        ErrorClass = "server"        // InternalError / Unavailable / any 5xx
	ClassTimeout       ErrorClass = "timeout"       // context deadline or network timeout
	ClassCanceled      ErrorClass = "canceled"      // context canceled
	ClassNetwork       ErrorClass = "network"       // any non-cloud transport failure
	ClassStaleRevision ErrorClass = "staleRevision" // a reading older than one already used
	ClassInvalid       ErrorClass = "invalid"       // a reading that makes no sense (nil, negative fields)
	ClassOther         ErrorClass = "other"         // any other cloud code
)

// Classify returns the class of a lookup error, read from cloud.ClassOf; ClassNone for nil.
func Classify(err error) ErrorClass {
	switch cloud.ClassOf(err) {
	case cloud.ClassNone:
		return ClassNone
	case cloud.ClassAttachCapacity:
		return ClassCapacity
	case cloud.ClassPermission:
		return ClassPermission
	case cloud.ClassAuth:
		return ClassAuth
	case cloud.ClassInstanceNotFound, cloud.ClassNoRoute:
		return ClassNotFound
	case cloud.ClassThrottled:
		return ClassThrottled
	case cloud.ClassInternal, cloud.ClassUnavailable:
		return ClassServer
	case cloud.ClassUnknownCode:
		// A code this driver does not know: a 5xx still says the cloud failed.
		var ce *cloud.Error
		if errors.As(err, &ce) && ce.HTTPStatus >= 500 {
			return ClassServer
		}
		return ClassOther
	case cloud.ClassTimeout:
		return ClassTimeout
	case cloud.ClassCanceled:
		return ClassCanceled
	case cloud.ClassNetwork, cloud.ClassLocal:
		// Not a cloud answer: the cloud was not reached, or the answer was lost.
		return ClassNetwork
	default:
		// The storage quotas, topology, conflicts, volume and snapshot lookups, invalid
		// requests, instance health (an attach answer; a capacity reading carries the
		// instance's health instead): nothing a capacity lookup of an instance should see.
		return ClassOther
	}
}

// lowersCapacity reports whether an error of class c is a reachable cloud saying there are
// fewer slots; all other failures leave the value alone (last known good, then floor).
func (c ErrorClass) lowersCapacity() bool { return c == ClassCapacity }
