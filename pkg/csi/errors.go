package csi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// cloudOp says which kind of RPC a cloud error comes from; it selects the few rows of the
// error matrix that differ by call.
type cloudOp int

const (
	// opDefault: a lookup or mutation where "not found" is an error.
	opDefault cloudOp = iota
	// opGone: DeleteVolume, DeleteSnapshot, ControllerUnpublishVolume. The CSI spec makes a
	// missing volume, snapshot or node success, so a retried call after a crash is OK.
	opGone
	// opPage: a paged list. The only InvalidArgument the cloud can return here is for the
	// page token (the request was validated before), which the spec maps to ABORTED.
	opPage
)

// cloudCode is the error matrix of domain.md, "Error classes": the gRPC code for an error
// returned by the cloud (or by the transport, or the context) during an RPC of kind op.
// codes.OK means the error is success for that call (a missing object on delete/unpublish).
//
// Only real capacity shortages are RESOURCE_EXHAUSTED: AttachmentLimitExceeded and
// AttachmentQuotaExceeded (publish), VolumeQuotaExceeded and CapacityQuotaExceeded (create,
// expand). Throttling is UNAVAILABLE, never RESOURCE_EXHAUSTED, so that the kubelet does not
// reject pods for a fault that is not a shortage.
func cloudCode(op cloudOp, err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	switch cloud.CodeOf(err) {
	case cloud.CodeAttachmentLimitExceeded, cloud.CodeAttachmentQuotaExceeded,
		cloud.CodeVolumeQuotaExceeded, cloud.CodeCapacityQuotaExceeded:
		return codes.ResourceExhausted
	case cloud.CodeAccessDenied:
		return codes.PermissionDenied
	case cloud.CodeUnauthenticated:
		return codes.Unauthenticated
	case cloud.CodeZoneMismatch, cloud.CodeVolumeInUse, cloud.CodePreconditionFailed:
		return codes.FailedPrecondition
	case cloud.CodeVolumeNotFound, cloud.CodeInstanceNotFound, cloud.CodeSnapshotNotFound:
		if op == opGone {
			return codes.OK
		}
		return codes.NotFound
	case cloud.CodeAlreadyExists:
		return codes.AlreadyExists
	case cloud.CodeInvalidArgument, cloud.CodePayloadTooLarge:
		if op == opPage {
			return codes.Aborted
		}
		return codes.InvalidArgument
	case cloud.CodeThrottled, cloud.CodeUnavailable:
		return codes.Unavailable
	case cloud.CodeIncorrectState:
		// The volume is in the cloud's opposite transition (attach while detaching): CSI's
		// "operation pending for volume", which the caller retries with backoff.
		return codes.Aborted
	case cloud.CodeInternalError:
		return codes.Internal
	case "":
		// Not a cloud answer: a context, transport or programming error.
	default:
		// A cloud code this driver does not know (a newer cloud, a wrong route).
		return codes.Internal
	}
	if s, ok := status.FromError(err); ok && s.Code() != codes.Unknown {
		return s.Code()
	}
	var netErr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	case errors.As(err, &netErr) && netErr.Timeout():
		return codes.DeadlineExceeded
	case errors.As(err, &netErr), isURLError(err), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return codes.Unavailable
	}
	return codes.Internal
}

func isURLError(err error) bool {
	var u *url.Error
	return errors.As(err, &u)
}

// cloudStatus wraps err as a status error with the code cloudCode gives it and a message of
// the form "<what>: <err>"; it returns nil when the code is OK.
func cloudStatus(op cloudOp, err error, format string, args ...any) error {
	c := cloudCode(op, err)
	if c == codes.OK {
		return nil
	}
	return status.Errorf(c, "%s: %v", fmt.Sprintf(format, args...), err)
}
