package cloud

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"syscall"
)

// Class is what kind of failure an error from a cloud call is: one per row group of the
// error table for answers of the cloud, plus the classes of errors that are not answers
// (the context ended, the transport failed). Every reader of a cloud error (gRPC codes,
// metric labels, the capacity policy, the publish backoff) maps classes, never codes, so a
// new code with an existing class changes nothing outside errorTable. docs/errors.md has
// the whole matrix.
type Class string

// The classes of cloud answers (Code.Class).
const (
	// ClassNone is the class of a nil error.
	ClassNone Class = ""
	// ClassAttachCapacity: no attach slot, on the instance (AttachmentLimitExceeded) or in
	// the account (AttachmentQuotaExceeded). The only class that says anything about slots.
	ClassAttachCapacity Class = "attachCapacity"
	// ClassStorageQuota: the account's volume count or bytes quota (VolumeQuotaExceeded,
	// CapacityQuotaExceeded).
	ClassStorageQuota Class = "storageQuota"
	// ClassPermission: the token lacks the role (AccessDenied, 403).
	ClassPermission Class = "permission"
	// ClassAuth: no or unknown token (Unauthenticated, 401).
	ClassAuth Class = "auth"
	// ClassTopology: volume and instance are in different zones (ZoneMismatch).
	ClassTopology Class = "topology"
	// ClassConflict: the object's state forbids the call now (VolumeInUse,
	// PreconditionFailed).
	ClassConflict Class = "conflict"
	// ClassObjectNotFound: the volume or snapshot named does not exist (VolumeNotFound,
	// SnapshotNotFound).
	ClassObjectNotFound Class = "objectNotFound"
	// ClassInstanceNotFound: the instance named does not exist (InstanceNotFound). Kept
	// apart from ClassObjectNotFound because for the node plugin it is its own identity
	// that is missing.
	ClassInstanceNotFound Class = "instanceNotFound"
	// ClassInstanceHealth: the instance is impaired or stopped and takes no attaches now
	// (InstanceImpaired, InstanceStopped). Retryable, and never capacity: the instance is
	// not full, and its health returns without the caller changing anything.
	ClassInstanceHealth Class = "instanceHealth"
	// ClassNoRoute: the cloud has no such route (NotFound): a client and server of
	// different API versions.
	ClassNoRoute Class = "noRoute"
	// ClassAlreadyExists: the name is taken with other parameters (AlreadyExists).
	ClassAlreadyExists Class = "alreadyExists"
	// ClassInvalid: the cloud rejected the request itself (InvalidArgument,
	// PayloadTooLarge).
	ClassInvalid Class = "invalid"
	// ClassOther: answers a driver never expects from its own calls (FaultNotFound,
	// ServerLimitExceeded, MethodNotAllowed).
	ClassOther Class = "other"
	// ClassTransition: the volume is in a transition that excludes the request (an attach
	// while it detaches from that instance: IncorrectState, 409); it ends by itself, so the
	// same request is retried (docs/attach.md).
	ClassTransition Class = "transition"
	// ClassThrottled: the request rate is over the limit (Throttled, 429, Retry-After).
	ClassThrottled Class = "throttled"
	// ClassInternal: the cloud failed (InternalError, 500).
	ClassInternal Class = "internal"
	// ClassUnavailable: the cloud is not serving (Unavailable, 503).
	ClassUnavailable Class = "unavailable"
	// ClassUnknownCode: an answer with a code that has no row (a newer cloud, say).
	ClassUnknownCode Class = "unknownCode"
)

// The classes of errors that are not answers of the cloud (ClassOf).
const (
	// ClassTimeout: the context's deadline passed, or the transport timed out.
	ClassTimeout Class = "timeout"
	// ClassCanceled: the context was canceled.
	ClassCanceled Class = "canceled"
	// ClassNetwork: the cloud was not reached or its answer was lost (a URL or net error,
	// connection refused or reset, a cut-off body).
	ClassNetwork Class = "network"
	// ClassLocal: none of the above: an error made before or after the call (a bug, a gRPC
	// status error passed along).
	ClassLocal Class = "local"
)

// FromCloud reports whether c is the class of an answer of the cloud (a *Error with a
// code), as opposed to a context, transport or local error.
func (c Class) FromCloud() bool {
	switch c {
	case ClassNone, ClassTimeout, ClassCanceled, ClassNetwork, ClassLocal:
		return false
	default:
		return true
	}
}

// ClassOf returns the class of err: ClassNone for nil; for a cloud answer (a *Error with a
// code, wrapped or not) the class of its code's row; otherwise the first of ClassTimeout
// (context deadline, net timeout), ClassCanceled, ClassNetwork and ClassLocal that fits.
func ClassOf(err error) Class {
	if err == nil {
		return ClassNone
	}
	if c := CodeOf(err); c != "" {
		return c.Class()
	}
	var netErr net.Error
	var urlErr *url.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return ClassTimeout
	case errors.Is(err, context.Canceled):
		return ClassCanceled
	case errors.As(err, &netErr) && netErr.Timeout():
		return ClassTimeout
	case errors.As(err, &netErr), errors.As(err, &urlErr), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return ClassNetwork
	}
	return ClassLocal
}
