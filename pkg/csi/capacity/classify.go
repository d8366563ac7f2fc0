package capacity

import (
	"context"
	"errors"
	"net"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// ErrorClass is the class of a failed capacity lookup (domain.md, "Error classes"). Only
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

// Classify returns the class of a lookup error; ClassNone for nil.
func Classify(err error) ErrorClass {
	if err == nil {
		return ClassNone
	}
	switch cloud.CodeOf(err) {
	case cloud.CodeAttachmentLimitExceeded, cloud.CodeAttachmentQuotaExceeded:
		return ClassCapacity
	case cloud.CodeAccessDenied:
		return ClassPermission
	case cloud.CodeUnauthenticated:
		return ClassAuth
	case cloud.CodeInstanceNotFound, cloud.CodeNotFound:
		return ClassNotFound
	case cloud.CodeThrottled:
		return ClassThrottled
	case cloud.CodeInternalError, cloud.CodeUnavailable:
		return ClassServer
	case "":
		// Not a cloud answer: the cloud was not reached, or the answer was lost.
	default:
		var ce *cloud.Error
		if errors.As(err, &ce) && ce.HTTPStatus >= 500 {
			return ClassServer
		}
		return ClassOther
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return ClassTimeout
	}
	if errors.Is(err, context.Canceled) {
		return ClassCanceled
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ClassTimeout
	}
	return ClassNetwork
}

// lowersCapacity reports whether an error of class c is a reachable cloud saying there are
// fewer slots; all other failures leave the value alone (last known good, then floor).
func (c ErrorClass) lowersCapacity() bool { return c == ClassCapacity }
