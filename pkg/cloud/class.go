package cloud

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"slices"
	"syscall"
)

// Class is what kind of failure an error from a cloud call is: one per row group of the
// error table for answers of the cloud, plus the classes of errors that are not answers
// (the context ended, the transport failed). Every reader of a cloud error (gRPC codes,
// metric labels, the capacity policy, the publish backoff) reads its column of the class's
// row in classTable (Class.Handling), never the code, so a new code with an existing class
// changes nothing outside errorTable. docs/errors.md has the whole matrix, generated from
// both tables.
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
	// PreconditionFailed, SnapshotInGroup: a group snapshot's member deleted alone).
	ClassConflict Class = "conflict"
	// ClassObjectNotFound: the volume, snapshot or group snapshot named does not exist
	// (VolumeNotFound, SnapshotNotFound, GroupSnapshotNotFound).
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

// Handling is one row of the error matrix (docs/errors.md): what the driver makes of an error
// of one class. Each reader of a cloud error reads its own column and maps nothing itself.
//
// The gRPC columns hold a code's canonical name (RESOURCE_EXHAUSTED, CANCELLED: the names
// of the CSI spec and of google.golang.org/grpc/codes), so that this package, which the fake
// cloud builds on too, imports no gRPC.
type Handling struct {
	// GRPC is the gRPC code of a controller RPC failing with the error (pkg/csi, cloudCode);
	// OK for nil. Only real capacity shortages are RESOURCE_EXHAUSTED: the kubelet fails the
	// waiting pod for that code on a VolumeAttachment (errorCode 8).
	GRPC string
	// GRPCGone is the code in DeleteVolume, DeleteSnapshot and ControllerUnpublishVolume, where
	// the CSI spec makes a missing volume, snapshot or node success (OK), so that a call
	// retried after a crash succeeds.
	GRPCGone string
	// GRPCPage is the code in a paged list (ListVolumes, ListSnapshots): the only invalid
	// argument the cloud can return there is the page token (the request was validated
	// before), which the CSI spec answers ABORTED.
	GRPCPage string
	// Metric is the "class" label of fakecloud_csi_controller_attach_operations_total
	// (docs/metrics.md).
	Metric string
	// Capacity is the class of a failed capacity lookup (pkg/csi/capacity.ErrorClass): only
	// "capacity" lowers the reported count; every other class means "truth unknown".
	Capacity string
	// Capacity5xx, if not "", replaces Capacity for an answer (a *Error) with a 5xx HTTP
	// status: a code this driver does not know still says the cloud failed.
	Capacity5xx string
	// Backoff is the window a failed ControllerPublishVolume opens (pkg/csi/backoff.Class):
	// "capacity" for the whole node, "retryable" for the node and volume, "" none (success, or
	// a final error: retrying changes nothing and remembering would hide a fix).
	Backoff string
}

// classTable is the one table of what the driver makes of each class: a row per Class
// constant, every column set (TestEveryClassHasARow). Read only. docs/errors.md's matrix is
// generated from it and errorTable (TestErrorsDoc; make docs-errors).
var classTable = map[Class]Handling{
	// Columns: GRPC, GRPCGone, GRPCPage, Metric, Capacity, Capacity5xx, Backoff.
	ClassNone:           {"OK", "OK", "OK", "none", "", "", ""},
	ClassAttachCapacity: {"RESOURCE_EXHAUSTED", "RESOURCE_EXHAUSTED", "RESOURCE_EXHAUSTED", "capacity", "capacity", "", "capacity"},
	// Never an attach's answer unless a fault rule makes it one; answered RESOURCE_EXHAUSTED
	// like attach capacity, so it opens the same window. Not a capacity lookup's answer.
	ClassStorageQuota: {"RESOURCE_EXHAUSTED", "RESOURCE_EXHAUSTED", "RESOURCE_EXHAUSTED", "capacity", "other", "", "capacity"},
	// Final: the request, the token or the objects must change first.
	ClassPermission:     {"PERMISSION_DENIED", "PERMISSION_DENIED", "PERMISSION_DENIED", "permission", "permission", "", ""},
	ClassAuth:           {"UNAUTHENTICATED", "UNAUTHENTICATED", "UNAUTHENTICATED", "auth", "auth", "", ""},
	ClassTopology:       {"FAILED_PRECONDITION", "FAILED_PRECONDITION", "FAILED_PRECONDITION", "topology", "other", "", ""},
	ClassConflict:       {"FAILED_PRECONDITION", "FAILED_PRECONDITION", "FAILED_PRECONDITION", "conflict", "other", "", ""},
	ClassObjectNotFound: {"NOT_FOUND", "OK", "NOT_FOUND", "notFound", "other", "", ""},
	// For the node plugin, a missing instance is its own identity: a capacity lookup's
	// notFound.
	ClassInstanceNotFound: {"NOT_FOUND", "OK", "NOT_FOUND", "notFound", "notFound", "", ""},
	// An impaired or stopped instance is not full: UNAVAILABLE makes the external-attacher
	// retry, and the kubelet fails no pod for it. A capacity reading carries the instance's
	// health instead, so a lookup never sees the class.
	ClassInstanceHealth: {"UNAVAILABLE", "UNAVAILABLE", "UNAVAILABLE", "health", "other", "", "retryable"},
	// A client and server of different API versions: INTERNAL, and a window keeps a broken
	// cloud from being asked at the external-attacher's full rate.
	ClassNoRoute:       {"INTERNAL", "INTERNAL", "INTERNAL", "notFound", "notFound", "", "retryable"},
	ClassAlreadyExists: {"ALREADY_EXISTS", "ALREADY_EXISTS", "ALREADY_EXISTS", "other", "other", "", ""},
	ClassInvalid:       {"INVALID_ARGUMENT", "INVALID_ARGUMENT", "ABORTED", "other", "other", "", ""},
	ClassOther:         {"INTERNAL", "INTERNAL", "INTERNAL", "other", "other", "", "retryable"},
	// The volume is in the cloud's opposite transition (attach while detaching): CSI's
	// "operation pending for volume", which the caller retries with backoff. It ends by
	// itself, and the retry must reach the cloud as soon as it has: no window.
	ClassTransition: {"ABORTED", "ABORTED", "ABORTED", "conflict", "other", "", ""},
	// Throttling is UNAVAILABLE, never RESOURCE_EXHAUSTED: it is not a shortage.
	ClassThrottled:   {"UNAVAILABLE", "UNAVAILABLE", "UNAVAILABLE", "throttled", "throttled", "", "retryable"},
	ClassInternal:    {"INTERNAL", "INTERNAL", "INTERNAL", "server", "server", "", "retryable"},
	ClassUnavailable: {"UNAVAILABLE", "UNAVAILABLE", "UNAVAILABLE", "server", "server", "", "retryable"},
	// A newer cloud: nothing says the next try fails the same way.
	ClassUnknownCode: {"INTERNAL", "INTERNAL", "INTERNAL", "other", "other", "server", "retryable"},
	ClassTimeout:     {"DEADLINE_EXCEEDED", "DEADLINE_EXCEEDED", "DEADLINE_EXCEEDED", "timeout", "timeout", "", "retryable"},
	// The caller gave up; the cloud said nothing.
	ClassCanceled: {"CANCELLED", "CANCELLED", "CANCELLED", "canceled", "canceled", "", ""},
	// Not a cloud answer: the cloud was not reached, or its answer was lost.
	ClassNetwork: {"UNAVAILABLE", "UNAVAILABLE", "UNAVAILABLE", "network", "network", "", "retryable"},
	// A bug, or a gRPC status error passed along (which keeps its code: pkg/csi, cloudCode).
	ClassLocal: {"INTERNAL", "INTERNAL", "INTERNAL", "network", "network", "", "retryable"},
}

// Handling returns the row of c in the error matrix. A Class that is not one of the
// constants above (never returned by ClassOf) gets ClassLocal's row.
func (c Class) Handling() Handling {
	if h, ok := classTable[c]; ok {
		return h
	}
	return classTable[ClassLocal]
}

// Classes returns every class, sorted.
func Classes() []Class {
	out := make([]Class, 0, len(classTable))
	for c := range classTable {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

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
