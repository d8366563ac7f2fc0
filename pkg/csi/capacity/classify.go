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

// Classify returns the class of a lookup error: the Capacity column of the row of its class
// (cloud.ClassOf, cloud.Class.Handling), or its Capacity5xx column for an answer with a 5xx
// status when that is set (a code this driver does not know still says the cloud failed);
// ClassNone for nil.
func Classify(err error) ErrorClass {
	h := cloud.ClassOf(err).Handling()
	var ce *cloud.Error
	if h.Capacity5xx != "" && errors.As(err, &ce) && ce.HTTPStatus >= 500 {
		return ErrorClass(h.Capacity5xx)
	}
	return ErrorClass(h.Capacity)
}

// lowersCapacity reports whether an error of class c is a reachable cloud saying there are
// fewer slots; all other failures leave the value alone (last known good, then floor).
func (c ErrorClass) lowersCapacity() bool { return c == ClassCapacity }
