package csi

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/treecopy"
)

// cloudOp says which kind of RPC a cloud error comes from; it selects the gRPC column of the
// error matrix (cloud.Handling: GRPC, GRPCGone, GRPCPage).
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

// cloudCode is the gRPC column of the error matrix (docs/errors.md): the code for an error
// returned by the cloud (or by the transport, or the context) during an RPC of kind op,
// read from the row of the error's class (cloud.ClassOf, cloud.Class.Handling: GRPC,
// GRPCGone, GRPCPage). codes.OK means the error is success for that call (a missing object
// on delete/unpublish). An error that is not a cloud answer but a gRPC status error passed
// along keeps its code.
//
// Only real capacity shortages are RESOURCE_EXHAUSTED: attach slots (publish) and the
// storage quotas (create, expand). Throttling is UNAVAILABLE, never RESOURCE_EXHAUSTED, so
// that the kubelet does not reject pods for a fault that is not a shortage.
func cloudCode(op cloudOp, err error) codes.Code {
	class := cloud.ClassOf(err)
	if !class.FromCloud() && class != cloud.ClassNone {
		// A status error passed along keeps its code.
		if s, ok := status.FromError(err); ok && s.Code() != codes.Unknown {
			return s.Code()
		}
	}
	h := class.Handling()
	switch op {
	case opGone:
		return grpcCode(h.GRPCGone)
	case opPage:
		return grpcCode(h.GRPCPage)
	default:
		return grpcCode(h.GRPC)
	}
}

// grpcCode is the code of a canonical name of the error matrix's gRPC columns
// (RESOURCE_EXHAUSTED); INTERNAL for a name that is none (TestGRPCColumnsAreCodes).
func grpcCode(name string) codes.Code {
	var c codes.Code
	// The JSON form of a code is its quoted canonical name.
	if err := c.UnmarshalJSON([]byte(strconv.Quote(name))); err != nil {
		return codes.Internal
	}
	return c
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

// copyStatus wraps an error of a data copy (snapshot capture, clone or restore seeding;
// pkg/csi/treecopy) as a status error with a message of the form "<what>: <err>":
// FAILED_PRECONDITION for what no retry can copy until the volume changes (a device node, a
// tree deeper or larger than the bounds), UNAVAILABLE for a volume that kept changing while it
// was copied (a retry may find it still), DEADLINE_EXCEEDED or CANCELLED for the RPC's
// context, INTERNAL otherwise.
func copyStatus(err error, format string, args ...any) error {
	c := codes.Internal
	switch {
	case errors.Is(err, treecopy.ErrUnsupported), errors.Is(err, treecopy.ErrTooDeep),
		errors.Is(err, treecopy.ErrTooManyEntries), errors.Is(err, treecopy.ErrTooLarge):
		c = codes.FailedPrecondition
	case errors.Is(err, treecopy.ErrChanged):
		c = codes.Unavailable
	case errors.Is(err, context.DeadlineExceeded):
		c = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		c = codes.Canceled
	}
	return status.Errorf(c, "%s: %v", fmt.Sprintf(format, args...), err)
}
