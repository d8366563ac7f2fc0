package cloud

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// Code is a cloud error code, the "code" field of every error body.
type Code string

// The cloud's error codes. Each has one row in the table of errorTable (HTTP status,
// retryability, class); the gRPC code the driver maps a class to is in docs/errors.md.
const (
	CodeAttachmentLimitExceeded Code = "AttachmentLimitExceeded" // 409: instance slots full
	CodeAttachmentQuotaExceeded Code = "AttachmentQuotaExceeded" // 409: account attachment quota
	CodeVolumeQuotaExceeded     Code = "VolumeQuotaExceeded"     // 409: account volume count quota
	CodeCapacityQuotaExceeded   Code = "CapacityQuotaExceeded"   // 409: account bytes quota
	CodeAccessDenied            Code = "AccessDenied"            // 403: token lacks the role
	CodeUnauthenticated         Code = "Unauthenticated"         // 401: no or unknown token
	CodeZoneMismatch            Code = "ZoneMismatch"            // 400: volume and instance zones differ
	CodeVolumeInUse             Code = "VolumeInUse"             // 409: attached elsewhere, or delete while attached
	CodeVolumeNotFound          Code = "VolumeNotFound"          // 404
	CodeInstanceNotFound        Code = "InstanceNotFound"        // 404
	CodeInstanceImpaired        Code = "InstanceImpaired"        // 409, retryable: the instance's health is impaired; it takes no attaches
	CodeInstanceStopped         Code = "InstanceStopped"         // 409, retryable: the instance is stopped; it takes no attaches
	CodeSnapshotNotFound        Code = "SnapshotNotFound"        // 404
	CodeGroupSnapshotNotFound   Code = "GroupSnapshotNotFound"   // 404
	CodeSnapshotInGroup         Code = "SnapshotInGroup"         // 409: a group's member is deleted with its group only
	CodeFaultNotFound           Code = "FaultNotFound"           // 404
	CodeServerLimitExceeded     Code = "ServerLimitExceeded"     // 409: a count bound of the server (fault rules, instances) is reached
	CodeNotFound                Code = "NotFound"                // 404: no such route
	CodeAlreadyExists           Code = "AlreadyExists"           // 409: same name, other parameters
	CodeInvalidArgument         Code = "InvalidArgument"         // 400: malformed or invalid request
	CodeMethodNotAllowed        Code = "MethodNotAllowed"        // 405
	CodePreconditionFailed      Code = "PreconditionFailed"      // 412: If-Match did not match
	CodePayloadTooLarge         Code = "PayloadTooLarge"         // 413: body over the size limit
	CodeThrottled               Code = "Throttled"               // 429, with Retry-After
	CodeInternalError           Code = "InternalError"           // 500
	CodeUnavailable             Code = "Unavailable"             // 503
	// CodeIncorrectState (409, retryable): the volume is in a transition that excludes the
	// request (an attach while it detaches from that instance); it completes by itself.
	CodeIncorrectState Code = "IncorrectState"
)

// codeRow is one row of the error table.
type codeRow struct {
	status    int
	retryable bool
	class     Class
}

// errorTable is the one table of cloud error codes: the server answers with status and the
// body's retryable flag from it, and every reader of an error (the driver's gRPC mapping, its
// metrics labels, the capacity policy, the publish backoff) works from the class. Read only;
// TestEveryCodeHasARow fails when a Code constant has no row.
var errorTable = map[Code]codeRow{
	CodeAttachmentLimitExceeded: {http.StatusConflict, false, ClassAttachCapacity},
	CodeAttachmentQuotaExceeded: {http.StatusConflict, false, ClassAttachCapacity},
	CodeVolumeQuotaExceeded:     {http.StatusConflict, false, ClassStorageQuota},
	CodeCapacityQuotaExceeded:   {http.StatusConflict, false, ClassStorageQuota},
	CodeAccessDenied:            {http.StatusForbidden, false, ClassPermission},
	CodeUnauthenticated:         {http.StatusUnauthorized, false, ClassAuth},
	CodeZoneMismatch:            {http.StatusBadRequest, false, ClassTopology},
	CodeVolumeInUse:             {http.StatusConflict, false, ClassConflict},
	CodePreconditionFailed:      {http.StatusPreconditionFailed, false, ClassConflict},
	CodeVolumeNotFound:          {http.StatusNotFound, false, ClassObjectNotFound},
	CodeSnapshotNotFound:        {http.StatusNotFound, false, ClassObjectNotFound},
	CodeGroupSnapshotNotFound:   {http.StatusNotFound, false, ClassObjectNotFound},
	CodeSnapshotInGroup:         {http.StatusConflict, false, ClassConflict},
	CodeInstanceNotFound:        {http.StatusNotFound, false, ClassInstanceNotFound},
	CodeInstanceImpaired:        {http.StatusConflict, true, ClassInstanceHealth},
	CodeInstanceStopped:         {http.StatusConflict, true, ClassInstanceHealth},
	CodeNotFound:                {http.StatusNotFound, false, ClassNoRoute},
	CodeAlreadyExists:           {http.StatusConflict, false, ClassAlreadyExists},
	CodeInvalidArgument:         {http.StatusBadRequest, false, ClassInvalid},
	CodePayloadTooLarge:         {http.StatusRequestEntityTooLarge, false, ClassInvalid},
	CodeFaultNotFound:           {http.StatusNotFound, false, ClassOther},
	CodeServerLimitExceeded:     {http.StatusConflict, false, ClassOther},
	CodeMethodNotAllowed:        {http.StatusMethodNotAllowed, false, ClassOther},
	CodeThrottled:               {http.StatusTooManyRequests, true, ClassThrottled},
	CodeInternalError:           {http.StatusInternalServerError, true, ClassInternal},
	CodeUnavailable:             {http.StatusServiceUnavailable, true, ClassUnavailable},
	CodeIncorrectState:          {http.StatusConflict, true, ClassTransition},
}

// Codes returns every known code, sorted.
func Codes() []Code {
	out := make([]Code, 0, len(errorTable))
	for c := range errorTable {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// HTTPStatus is the HTTP status the cloud answers with for a code; unknown codes are 500.
func (c Code) HTTPStatus() int {
	if r, ok := errorTable[c]; ok {
		return r.status
	}
	return http.StatusInternalServerError
}

// Retryable reports whether a client may retry the same request unchanged and expect a
// different answer without anyone changing the cloud's state. Unknown codes are not.
func (c Code) Retryable() bool { return errorTable[c].retryable }

// Class is the class of the code's row; ClassUnknownCode for a code with no row (a newer
// cloud, a wrong route) and for "".
func (c Code) Class() Class {
	if r, ok := errorTable[c]; ok {
		return r.class
	}
	return ClassUnknownCode
}

// Known reports whether c is one of the codes above.
func (c Code) Known() bool {
	_, ok := errorTable[c]
	return ok
}

// Error is a cloud error: the JSON error body of every non-2xx answer,
// {"code", "message", "retryable", "requestId"}, plus the HTTP status and Retry-After the
// client saw. errors.Is(err, ErrX) matches on Code alone.
type Error struct {
	Code      Code   `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
	RequestID string `json:"requestId,omitempty"`
	// HTTPStatus and RetryAfter are filled by the client from the response, not the body.
	HTTPStatus int           `json:"-"`
	RetryAfter time.Duration `json:"-"`
}

// NewError returns an error with the code's standard status and retryability. The message
// is cut to MaxMessageBytes; callers quote inputs with Quote, so no message echoes a whole
// input.
func NewError(code Code, format string, args ...any) *Error {
	return &Error{
		Code:       code,
		Message:    TruncateMessage(fmt.Sprintf(format, args...)),
		Retryable:  code.Retryable(),
		HTTPStatus: code.HTTPStatus(),
	}
}

// Error is "Code: Message", or the code alone when there is no message.
func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Is matches any *Error with the same Code, so sentinels work with errors.Is.
func (e *Error) Is(target error) bool {
	var t *Error
	if !errors.As(target, &t) {
		return false
	}
	return t.Code == e.Code
}

// CodeOf returns the cloud code carried by err, or "" when err is not a cloud error (a
// transport failure or a context error, say).
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Sentinels for errors.Is; each matches every *Error with its code.
var (
	ErrAttachmentLimitExceeded = &Error{Code: CodeAttachmentLimitExceeded}
	ErrAttachmentQuotaExceeded = &Error{Code: CodeAttachmentQuotaExceeded}
	ErrVolumeQuotaExceeded     = &Error{Code: CodeVolumeQuotaExceeded}
	ErrCapacityQuotaExceeded   = &Error{Code: CodeCapacityQuotaExceeded}
	ErrAccessDenied            = &Error{Code: CodeAccessDenied}
	ErrUnauthenticated         = &Error{Code: CodeUnauthenticated}
	ErrZoneMismatch            = &Error{Code: CodeZoneMismatch}
	ErrVolumeInUse             = &Error{Code: CodeVolumeInUse}
	ErrVolumeNotFound          = &Error{Code: CodeVolumeNotFound}
	ErrInstanceNotFound        = &Error{Code: CodeInstanceNotFound}
	ErrInstanceImpaired        = &Error{Code: CodeInstanceImpaired}
	ErrInstanceStopped         = &Error{Code: CodeInstanceStopped}
	ErrSnapshotNotFound        = &Error{Code: CodeSnapshotNotFound}
	ErrGroupSnapshotNotFound   = &Error{Code: CodeGroupSnapshotNotFound}
	ErrSnapshotInGroup         = &Error{Code: CodeSnapshotInGroup}
	ErrFaultNotFound           = &Error{Code: CodeFaultNotFound}
	ErrServerLimitExceeded     = &Error{Code: CodeServerLimitExceeded}
	ErrNotFound                = &Error{Code: CodeNotFound}
	ErrAlreadyExists           = &Error{Code: CodeAlreadyExists}
	ErrInvalidArgument         = &Error{Code: CodeInvalidArgument}
	ErrMethodNotAllowed        = &Error{Code: CodeMethodNotAllowed}
	ErrPreconditionFailed      = &Error{Code: CodePreconditionFailed}
	ErrPayloadTooLarge         = &Error{Code: CodePayloadTooLarge}
	ErrThrottled               = &Error{Code: CodeThrottled}
	ErrInternalError           = &Error{Code: CodeInternalError}
	ErrUnavailable             = &Error{Code: CodeUnavailable}
	ErrIncorrectState          = &Error{Code: CodeIncorrectState}
)
