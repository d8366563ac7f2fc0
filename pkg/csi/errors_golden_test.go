package csi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/backoff"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/capacity"
)

// goldenTimeout is a net.Error that timed out.
type goldenTimeout struct{}

func (goldenTimeout) Error() string   { return "i/o timeout" }
func (goldenTimeout) Timeout() bool   { return true }
func (goldenTimeout) Temporary() bool { return true }

// goldenErrors are the errors of TestErrorVocabularyGolden: one of every cloud code (wrapped,
// as the driver's calls return them), and every kind of error that is not a cloud answer.
func goldenErrors() map[string]error {
	wrap := func(err error) error { return fmt.Errorf("attach vol-1 to i-1: %w", err) }
	errs := map[string]error{
		"nil":                         nil,
		"unknown code 400":            wrap(&cloud.Error{Code: "SomethingNew", HTTPStatus: 400}),
		"unknown code 502":            wrap(&cloud.Error{Code: "SomethingNew", HTTPStatus: 502}),
		"unknown code NewError (500)": wrap(cloud.NewError("SomethingNew", "x")),
		"known code with status 500":  wrap(&cloud.Error{Code: cloud.CodeVolumeInUse, HTTPStatus: 500}),
		"empty code":                  wrap(&cloud.Error{}),
		"deadline":                    wrap(context.DeadlineExceeded),
		"canceled":                    wrap(context.Canceled),
		"net timeout":                 wrap(goldenTimeout{}),
		"dns timeout":                 &net.DNSError{Err: "timeout", IsTimeout: true},
		"url error":                   &url.Error{Op: "Post", URL: "http://x", Err: errors.New("boom")},
		"url timeout":                 &url.Error{Op: "Post", URL: "http://x", Err: goldenTimeout{}},
		"refused":                     wrap(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}),
		"reset":                       wrap(syscall.ECONNRESET),
		"cut-off body":                wrap(io.ErrUnexpectedEOF),
		"eof":                         wrap(io.EOF),
		"plain":                       errors.New("bug"),
		"status aborted":              status.Error(codes.Aborted, "busy"),
		"status resource exhausted":   status.Error(codes.ResourceExhausted, "AttachmentLimitExceeded"),
		"status unknown":              status.Error(codes.Unknown, "?"),
		"wrapped status unavailable":  wrap(status.Error(codes.Unavailable, "later")),
	}
	for _, c := range cloud.Codes() {
		errs[string(c)] = wrap(cloud.NewError(c, "x"))
	}
	return errs
}

// TestErrorVocabularyGolden pins what the driver makes of every cloud code and of every kind of
// error that is not a cloud answer, as recorded from ceafbb2's four readers (the gRPC code of a
// default, a gone-is-OK and a paged RPC; the attach metrics' class label; the capacity lookup
// class; the publish backoff class). The error matrix refactor must leave every row as it is.
func TestErrorVocabularyGolden(t *testing.T) {
	type row struct {
		def, gone, page           codes.Code
		metric, capacity, backoff string
	}
	golden := map[string]row{
		"AccessDenied":                {codes.PermissionDenied, codes.PermissionDenied, codes.PermissionDenied, "permission", "permission", ""},
		"AlreadyExists":               {codes.AlreadyExists, codes.AlreadyExists, codes.AlreadyExists, "other", "other", ""},
		"AttachmentLimitExceeded":     {codes.ResourceExhausted, codes.ResourceExhausted, codes.ResourceExhausted, "capacity", "capacity", "capacity"},
		"AttachmentQuotaExceeded":     {codes.ResourceExhausted, codes.ResourceExhausted, codes.ResourceExhausted, "capacity", "capacity", "capacity"},
		"CapacityQuotaExceeded":       {codes.ResourceExhausted, codes.ResourceExhausted, codes.ResourceExhausted, "capacity", "other", "capacity"},
		"FaultNotFound":               {codes.Internal, codes.Internal, codes.Internal, "other", "other", "retryable"},
		"GroupSnapshotNotFound":       {codes.NotFound, codes.OK, codes.NotFound, "notFound", "other", ""},
		"IncorrectState":              {codes.Aborted, codes.Aborted, codes.Aborted, "conflict", "other", ""},
		"InstanceImpaired":            {codes.Unavailable, codes.Unavailable, codes.Unavailable, "health", "other", "retryable"},
		"InstanceNotFound":            {codes.NotFound, codes.OK, codes.NotFound, "notFound", "notFound", ""},
		"InstanceStopped":             {codes.Unavailable, codes.Unavailable, codes.Unavailable, "health", "other", "retryable"},
		"InternalError":               {codes.Internal, codes.Internal, codes.Internal, "server", "server", "retryable"},
		"InvalidArgument":             {codes.InvalidArgument, codes.InvalidArgument, codes.Aborted, "other", "other", ""},
		"MethodNotAllowed":            {codes.Internal, codes.Internal, codes.Internal, "other", "other", "retryable"},
		"NotFound":                    {codes.Internal, codes.Internal, codes.Internal, "notFound", "notFound", "retryable"},
		"PayloadTooLarge":             {codes.InvalidArgument, codes.InvalidArgument, codes.Aborted, "other", "other", ""},
		"PreconditionFailed":          {codes.FailedPrecondition, codes.FailedPrecondition, codes.FailedPrecondition, "conflict", "other", ""},
		"ServerLimitExceeded":         {codes.Internal, codes.Internal, codes.Internal, "other", "other", "retryable"},
		"SnapshotInGroup":             {codes.FailedPrecondition, codes.FailedPrecondition, codes.FailedPrecondition, "conflict", "other", ""},
		"SnapshotNotFound":            {codes.NotFound, codes.OK, codes.NotFound, "notFound", "other", ""},
		"Throttled":                   {codes.Unavailable, codes.Unavailable, codes.Unavailable, "throttled", "throttled", "retryable"},
		"Unauthenticated":             {codes.Unauthenticated, codes.Unauthenticated, codes.Unauthenticated, "auth", "auth", ""},
		"Unavailable":                 {codes.Unavailable, codes.Unavailable, codes.Unavailable, "server", "server", "retryable"},
		"VolumeInUse":                 {codes.FailedPrecondition, codes.FailedPrecondition, codes.FailedPrecondition, "conflict", "other", ""},
		"VolumeNotFound":              {codes.NotFound, codes.OK, codes.NotFound, "notFound", "other", ""},
		"VolumeQuotaExceeded":         {codes.ResourceExhausted, codes.ResourceExhausted, codes.ResourceExhausted, "capacity", "other", "capacity"},
		"ZoneMismatch":                {codes.FailedPrecondition, codes.FailedPrecondition, codes.FailedPrecondition, "topology", "other", ""},
		"canceled":                    {codes.Canceled, codes.Canceled, codes.Canceled, "canceled", "canceled", ""},
		"cut-off body":                {codes.Unavailable, codes.Unavailable, codes.Unavailable, "network", "network", "retryable"},
		"deadline":                    {codes.DeadlineExceeded, codes.DeadlineExceeded, codes.DeadlineExceeded, "timeout", "timeout", "retryable"},
		"dns timeout":                 {codes.DeadlineExceeded, codes.DeadlineExceeded, codes.DeadlineExceeded, "timeout", "timeout", "retryable"},
		"empty code":                  {codes.Internal, codes.Internal, codes.Internal, "network", "network", "retryable"},
		"eof":                         {codes.Unavailable, codes.Unavailable, codes.Unavailable, "network", "network", "retryable"},
		"known code with status 500":  {codes.FailedPrecondition, codes.FailedPrecondition, codes.FailedPrecondition, "conflict", "other", ""},
		"net timeout":                 {codes.DeadlineExceeded, codes.DeadlineExceeded, codes.DeadlineExceeded, "timeout", "timeout", "retryable"},
		"nil":                         {codes.OK, codes.OK, codes.OK, "none", "", ""},
		"plain":                       {codes.Internal, codes.Internal, codes.Internal, "network", "network", "retryable"},
		"refused":                     {codes.Unavailable, codes.Unavailable, codes.Unavailable, "network", "network", "retryable"},
		"reset":                       {codes.Unavailable, codes.Unavailable, codes.Unavailable, "network", "network", "retryable"},
		"status aborted":              {codes.Aborted, codes.Aborted, codes.Aborted, "network", "network", "retryable"},
		"status resource exhausted":   {codes.ResourceExhausted, codes.ResourceExhausted, codes.ResourceExhausted, "network", "network", "retryable"},
		"status unknown":              {codes.Internal, codes.Internal, codes.Internal, "network", "network", "retryable"},
		"unknown code 400":            {codes.Internal, codes.Internal, codes.Internal, "other", "other", "retryable"},
		"unknown code 502":            {codes.Internal, codes.Internal, codes.Internal, "other", "server", "retryable"},
		"unknown code NewError (500)": {codes.Internal, codes.Internal, codes.Internal, "other", "server", "retryable"},
		"url error":                   {codes.Unavailable, codes.Unavailable, codes.Unavailable, "network", "network", "retryable"},
		"url timeout":                 {codes.DeadlineExceeded, codes.DeadlineExceeded, codes.DeadlineExceeded, "timeout", "timeout", "retryable"},
		"wrapped status unavailable":  {codes.Unavailable, codes.Unavailable, codes.Unavailable, "network", "network", "retryable"},
	}
	errs := goldenErrors()
	for name, want := range golden {
		err, ok := errs[name]
		if !ok {
			t.Errorf("%s: no such error (a cloud code removed?)", name)
			continue
		}
		got := row{cloudCode(opDefault, err), cloudCode(opGone, err), cloudCode(opPage, err),
			cloudClass(err), string(capacity.Classify(err)), string(backoff.Classify(err))}
		if got != want {
			t.Errorf("%s: got %+v, want %+v", name, got, want)
		}
	}
}
