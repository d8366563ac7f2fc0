package csi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"syscall"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

func TestCloudCodeMatrix(t *testing.T) {
	wrap := func(c cloud.Code) error { return fmt.Errorf("attach vol-1 to i-1: %w", cloud.NewError(c, "x")) }
	type row struct {
		err             error
		def, gone, page codes.Code
	}
	same := func(err error, c codes.Code) row { return row{err, c, c, c} }
	rows := map[string]row{
		"nil":                     same(nil, codes.OK),
		"AttachmentLimitExceeded": same(wrap(cloud.CodeAttachmentLimitExceeded), codes.ResourceExhausted),
		"AttachmentQuotaExceeded": same(wrap(cloud.CodeAttachmentQuotaExceeded), codes.ResourceExhausted),
		"VolumeQuotaExceeded":     same(wrap(cloud.CodeVolumeQuotaExceeded), codes.ResourceExhausted),
		"CapacityQuotaExceeded":   same(wrap(cloud.CodeCapacityQuotaExceeded), codes.ResourceExhausted),
		"AccessDenied":            same(wrap(cloud.CodeAccessDenied), codes.PermissionDenied),
		"Unauthenticated":         same(wrap(cloud.CodeUnauthenticated), codes.Unauthenticated),
		"ZoneMismatch":            same(wrap(cloud.CodeZoneMismatch), codes.FailedPrecondition),
		"VolumeInUse":             same(wrap(cloud.CodeVolumeInUse), codes.FailedPrecondition),
		"PreconditionFailed":      same(wrap(cloud.CodePreconditionFailed), codes.FailedPrecondition),
		"VolumeNotFound":          {wrap(cloud.CodeVolumeNotFound), codes.NotFound, codes.OK, codes.NotFound},
		"InstanceNotFound":        {wrap(cloud.CodeInstanceNotFound), codes.NotFound, codes.OK, codes.NotFound},
		"InstanceImpaired":        same(wrap(cloud.CodeInstanceImpaired), codes.Unavailable),
		"InstanceStopped":         same(wrap(cloud.CodeInstanceStopped), codes.Unavailable),
		"SnapshotNotFound":        {wrap(cloud.CodeSnapshotNotFound), codes.NotFound, codes.OK, codes.NotFound},
		"GroupSnapshotNotFound":   {wrap(cloud.CodeGroupSnapshotNotFound), codes.NotFound, codes.OK, codes.NotFound},
		"SnapshotInGroup":         same(wrap(cloud.CodeSnapshotInGroup), codes.FailedPrecondition),
		"FaultNotFound":           same(wrap(cloud.CodeFaultNotFound), codes.Internal),
		"ServerLimitExceeded":     same(wrap(cloud.CodeServerLimitExceeded), codes.Internal),
		"NotFound":                same(wrap(cloud.CodeNotFound), codes.Internal),
		"AlreadyExists":           same(wrap(cloud.CodeAlreadyExists), codes.AlreadyExists),
		"InvalidArgument":         {wrap(cloud.CodeInvalidArgument), codes.InvalidArgument, codes.InvalidArgument, codes.Aborted},
		"PayloadTooLarge":         {wrap(cloud.CodePayloadTooLarge), codes.InvalidArgument, codes.InvalidArgument, codes.Aborted},
		"MethodNotAllowed":        same(wrap(cloud.CodeMethodNotAllowed), codes.Internal),
		"Throttled":               same(wrap(cloud.CodeThrottled), codes.Unavailable),
		"Unavailable":             same(wrap(cloud.CodeUnavailable), codes.Unavailable),
		"IncorrectState":          same(wrap(cloud.CodeIncorrectState), codes.Aborted),
		"InternalError":           same(wrap(cloud.CodeInternalError), codes.Internal),
		"unknown cloud code":      same(wrap(cloud.Code("SomethingNew")), codes.Internal),
		"deadline":                same(fmt.Errorf("get: %w", context.DeadlineExceeded), codes.DeadlineExceeded),
		"canceled":                same(fmt.Errorf("get: %w", context.Canceled), codes.Canceled),
		"url error":               same(&url.Error{Op: "Post", URL: "http://x", Err: errors.New("boom")}, codes.Unavailable),
		"connection refused": same(&url.Error{Op: "Post", URL: "http://x",
			Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}, codes.Unavailable),
		"net timeout":  same(&net.DNSError{Err: "timeout", IsTimeout: true}, codes.DeadlineExceeded),
		"status error": same(status.Error(codes.Aborted, "busy"), codes.Aborted),
		"plain error":  same(errors.New("bug"), codes.Internal),
	}
	// A code added later gets the gRPC columns of its class's row (cloud.Class.Handling), which
	// TestEveryClassHasARow in pkg/cloud requires, and shows in docs/errors.md.
	for name, r := range rows {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				op   cloudOp
				want codes.Code
			}{{opDefault, r.def}, {opGone, r.gone}, {opPage, r.page}} {
				if got := cloudCode(tc.op, r.err); got != tc.want {
					t.Errorf("op %d: cloudCode = %s, want %s", tc.op, got, tc.want)
				}
				err := cloudStatus(tc.op, r.err, "do %s", "it")
				if tc.want == codes.OK {
					if err != nil {
						t.Errorf("op %d: cloudStatus = %v, want nil", tc.op, err)
					}
					continue
				}
				st, ok := status.FromError(err)
				if !ok || st.Code() != tc.want {
					t.Errorf("op %d: cloudStatus = %v, want a status error with code %s", tc.op, err, tc.want)
				}
			}
		})
	}
}

func TestOnlyCapacityIsResourceExhausted(t *testing.T) {
	capacity := map[cloud.Code]bool{
		cloud.CodeAttachmentLimitExceeded: true, cloud.CodeAttachmentQuotaExceeded: true,
		cloud.CodeVolumeQuotaExceeded: true, cloud.CodeCapacityQuotaExceeded: true,
	}
	for _, c := range cloud.Codes() {
		got := cloudCode(opDefault, cloud.NewError(c, "x")) == codes.ResourceExhausted
		if got != capacity[c] {
			t.Errorf("%s: RESOURCE_EXHAUSTED = %v, want %v", c, got, capacity[c])
		}
	}
}

// TestGRPCColumnsAreCodes: every gRPC column of every row of the error matrix is the
// canonical name of a gRPC code, and grpcCode reads it as that code.
func TestGRPCColumnsAreCodes(t *testing.T) {
	for _, c := range cloud.Classes() {
		h := c.Handling()
		for _, name := range []string{h.GRPC, h.GRPCGone, h.GRPCPage} {
			var want codes.Code
			if err := want.UnmarshalJSON([]byte(strconv.Quote(name))); err != nil {
				t.Errorf("class %q: %q is not a gRPC code's name: %v", c, name, err)
				continue
			}
			if got := grpcCode(name); got != want || want.String() == "" {
				t.Errorf("class %q: grpcCode(%q) = %s, want %s", c, name, got, want)
			}
		}
	}
	for _, bad := range []string{"", "8", "ResourceExhausted", "NOPE"} {
		if got := grpcCode(bad); got != codes.Internal {
			t.Errorf("grpcCode(%q) = %s, want INTERNAL", bad, got)
		}
	}
}
