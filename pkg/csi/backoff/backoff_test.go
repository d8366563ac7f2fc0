package backoff

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// outcome is an attach failure as ControllerPublishVolume records it: the error of the
// cloud's attach (cause) and the status error the RPC answered with (answer).
type outcome struct{ cause, answer error }

// failed is the outcome of an attach of vol-1 to i-1 the cloud refused with code and msg,
// answered with the gRPC code c.
func failed(code cloud.Code, c codes.Code, msg string) outcome {
	return outcome{
		cause:  fmt.Errorf("attach vol-1 to i-1: %w", cloud.NewError(code, "%s", msg)),
		answer: status.Errorf(c, "attach vol-1 to i-1: %s: %s", code, msg),
	}
}

var (
	attached     = outcome{}
	errFull      = failed(cloud.CodeAttachmentLimitExceeded, codes.ResourceExhausted, "no free slot")
	errQuota     = failed(cloud.CodeAttachmentQuotaExceeded, codes.ResourceExhausted, "account quota")
	errThrottled = failed(cloud.CodeThrottled, codes.Unavailable, "slow down")
	errZone      = failed(cloud.CodeZoneMismatch, codes.FailedPrecondition, "zones differ")
	errDenied    = failed(cloud.CodeAccessDenied, codes.PermissionDenied, "no role")
)

// op is one step of a scripted timeline; exactly one of its actions is set.
type op struct {
	advance   time.Duration
	record    *recordOp
	reset     string
	forget    [2]string
	detached  [2]string
	published [2]string
	check     [2]string
	want      codes.Code // for check
}

type recordOp struct {
	node, volume string
	outcome
}

func rec(node, volume string, o outcome) op { return op{record: &recordOp{node, volume, o}} }
func chk(node, volume string, want codes.Code) op {
	return op{check: [2]string{node, volume}, want: want}
}
func wait(d time.Duration) op { return op{advance: d} }

func TestBackoffTimelines(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Jitter = 0 // exact windows; jitter has its own test
	tests := []struct {
		name string
		ops  []op
	}{
		{"nothing recorded passes", []op{chk("i-1", "vol-1", codes.OK)}},
		{"capacity error blocks the whole node, fast, until the window ends", []op{
			rec("i-1", "vol-1", errFull),
			chk("i-1", "vol-1", codes.ResourceExhausted),
			chk("i-1", "vol-2", codes.ResourceExhausted),
			chk("i-2", "vol-2", codes.OK),
			wait(4999 * time.Millisecond),
			chk("i-1", "vol-3", codes.ResourceExhausted),
			wait(time.Millisecond),
			chk("i-1", "vol-3", codes.OK),
		}},
		{"quota exhaustion is a capacity error too", []op{
			rec("i-1", "vol-1", errQuota),
			chk("i-1", "vol-9", codes.ResourceExhausted),
		}},
		{"without an answer the cloud error is remembered, with the window's code", []op{
			rec("i-1", "vol-1", outcome{cause: cloud.NewError(cloud.CodeAttachmentLimitExceeded, "full")}),
			chk("i-1", "vol-2", codes.ResourceExhausted),
			rec("i-2", "vol-1", outcome{cause: cloud.NewError(cloud.CodeThrottled, "slow")}),
			chk("i-2", "vol-1", codes.Unavailable),
			rec("i-3", "vol-1", outcome{cause: cloud.NewError(cloud.CodeZoneMismatch, "zone")}),
			chk("i-3", "vol-1", codes.OK),
		}},
		{"the class comes from the cloud error, not the answer's code", []op{
			rec("i-1", "vol-1", outcome{cause: cloud.NewError(cloud.CodeThrottled, "slow"), answer: status.Error(codes.ResourceExhausted, "odd")}),
			chk("i-1", "vol-2", codes.OK),
			chk("i-1", "vol-1", codes.ResourceExhausted),
		}},
		{"consecutive capacity failures double the window up to the cap", []op{
			rec("i-1", "vol-1", errFull), wait(5 * time.Second), chk("i-1", "vol-1", codes.OK),
			rec("i-1", "vol-1", errFull), wait(9 * time.Second), chk("i-1", "vol-1", codes.ResourceExhausted),
			wait(time.Second), chk("i-1", "vol-1", codes.OK),
			rec("i-1", "vol-1", errFull), wait(20 * time.Second), chk("i-1", "vol-1", codes.OK),
			rec("i-1", "vol-1", errFull), wait(40 * time.Second), chk("i-1", "vol-1", codes.OK),
			rec("i-1", "vol-1", errFull), wait(59 * time.Second), chk("i-1", "vol-1", codes.ResourceExhausted),
			wait(time.Second), chk("i-1", "vol-1", codes.OK),
			rec("i-1", "vol-1", errFull), wait(59 * time.Second), chk("i-1", "vol-1", codes.ResourceExhausted),
		}},
		{"a failure long after the last window starts from the initial window", []op{
			rec("i-1", "vol-1", errFull), wait(5 * time.Second),
			rec("i-1", "vol-1", errFull), wait(10 * time.Second),
			wait(2 * time.Minute),
			rec("i-1", "vol-1", errFull), wait(5 * time.Second), chk("i-1", "vol-1", codes.OK),
		}},
		{"a successful detach on the node clears the capacity window", []op{
			rec("i-1", "vol-1", errFull),
			op{reset: "i-1"},
			chk("i-1", "vol-1", codes.OK),
		}},
		{"a successful detach of a volume on the node clears the capacity window", []op{
			rec("i-1", "vol-1", attached),
			rec("i-1", "vol-2", errFull),
			chk("i-1", "vol-2", codes.ResourceExhausted),
			op{detached: [2]string{"i-1", "vol-1"}},
			chk("i-1", "vol-2", codes.OK),
		}},
		{"a volume already published to the full node still reaches the cloud", []op{
			rec("i-1", "vol-1", attached),
			rec("i-1", "vol-2", errFull),
			chk("i-1", "vol-1", codes.OK),
			chk("i-1", "vol-2", codes.ResourceExhausted),
			op{detached: [2]string{"i-1", "vol-1"}},
			rec("i-1", "vol-3", errFull),
			chk("i-1", "vol-1", codes.ResourceExhausted),
		}},
		{"a repeated publish of a published pair keeps the node's window", []op{
			rec("i-1", "vol-1", attached),
			rec("i-1", "vol-2", errFull),
			rec("i-1", "vol-1", attached),
			chk("i-1", "vol-2", codes.ResourceExhausted),
		}},
		{"a pair the cloud reports attached passes and keeps the node's window", []op{
			rec("i-1", "vol-2", errFull),
			op{published: [2]string{"i-1", "vol-1"}},
			chk("i-1", "vol-1", codes.OK),
			rec("i-1", "vol-1", attached),
			chk("i-1", "vol-3", codes.ResourceExhausted),
		}},
		{"a capacity or final error forgets the published pair, a transient one does not", []op{
			rec("i-1", "vol-1", attached),
			rec("i-1", "vol-2", attached),
			rec("i-1", "vol-1", errThrottled),
			rec("i-1", "vol-3", errFull),
			chk("i-1", "vol-1", codes.OK),
			rec("i-1", "vol-1", errFull),
			chk("i-1", "vol-1", codes.ResourceExhausted),
			rec("i-1", "vol-2", errZone),
			chk("i-1", "vol-2", codes.ResourceExhausted),
		}},
		{"a detach on another node does not", []op{
			rec("i-1", "vol-1", errFull),
			op{reset: "i-2"},
			chk("i-1", "vol-1", codes.ResourceExhausted),
		}},
		{"a successful publish clears the node and the volume", []op{
			rec("i-1", "vol-1", errFull),
			wait(5 * time.Second),
			rec("i-1", "vol-1", attached),
			rec("i-1", "vol-1", errFull), // starts again from the initial window
			wait(5 * time.Second),
			chk("i-1", "vol-1", codes.OK),
		}},
		{"retryable errors hold only that volume on that node", []op{
			rec("i-1", "vol-1", errThrottled),
			chk("i-1", "vol-1", codes.Unavailable),
			chk("i-1", "vol-2", codes.OK),
			chk("i-2", "vol-1", codes.OK),
			wait(time.Second),
			chk("i-1", "vol-1", codes.OK),
			rec("i-1", "vol-1", errThrottled),
			wait(time.Second),
			chk("i-1", "vol-1", codes.Unavailable),
			wait(time.Second),
			chk("i-1", "vol-1", codes.OK),
		}},
		{"a retryable window survives a detach, Forget closes it", []op{
			rec("i-1", "vol-1", errThrottled),
			op{reset: "i-1"},
			chk("i-1", "vol-1", codes.Unavailable),
			op{forget: [2]string{"i-1", "vol-1"}},
			chk("i-1", "vol-1", codes.OK),
		}},
		{"final errors open no window", []op{
			rec("i-1", "vol-1", errZone),
			rec("i-1", "vol-2", errDenied),
			rec("i-1", "vol-3", failed(cloud.CodeInvalidArgument, codes.InvalidArgument, "bad")),
			rec("i-1", "vol-4", outcome{cause: fmt.Errorf("attach: %w", context.Canceled), answer: status.Error(codes.Canceled, "gone")}),
			chk("i-1", "vol-1", codes.OK),
			chk("i-1", "vol-2", codes.OK),
			chk("i-1", "vol-3", codes.OK),
			chk("i-1", "vol-4", codes.OK),
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
			b, err := New(cfg, clk)
			if err != nil {
				t.Fatal(err)
			}
			var elapsed time.Duration
			for i, o := range tc.ops {
				switch {
				case o.advance > 0:
					elapsed += o.advance
					clk.SetTime(clk.Now().Add(o.advance))
				case o.record != nil:
					b.Record(o.record.node, o.record.volume, o.record.cause, o.record.answer)
				case o.reset != "":
					b.Reset(o.reset)
				case o.forget[0] != "":
					b.Forget(o.forget[0], o.forget[1])
				case o.detached[0] != "":
					b.Detached(o.detached[0], o.detached[1])
				case o.published[0] != "":
					b.Published(o.published[0], o.published[1])
				default:
					class, err := b.Check(o.check[0], o.check[1])
					got := status.Code(err)
					if (class == ClassNone) != (got == codes.OK) {
						t.Fatalf("op %d at +%s: Check(%s, %s) = class %q with %v", i, elapsed, o.check[0], o.check[1], class, err)
					}
					if got != o.want {
						t.Fatalf("op %d at +%s: Check(%s, %s) = %s, want %s", i, elapsed, o.check[0], o.check[1], got, o.want)
					}
				}
			}
		})
	}
}

// The message of a refusal is about the volume asked for: a node-wide window opened by
// another volume's attach quotes that attach as the cause, never as this volume's error
// (the message lands in the VolumeAttachment of the volume asked for).
func TestCheckMessageNamesTheVolumeAskedFor(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Jitter = 0 // exact windows, so that the remaining time can be checked
	for _, tc := range []struct {
		name         string
		recordVolume string
		recorded     outcome
		after        time.Duration
		checkVolume  string
		wantCode     codes.Code
		wantMsg      string
	}{
		{
			name: "node window opened by another volume", recordVolume: "vol-4",
			recorded: outcome{cloud.NewError(cloud.CodeAttachmentLimitExceeded, "no free slot"),
				status.Error(codes.ResourceExhausted, "attach vol-4 to i-1: AttachmentLimitExceeded: no free slot")},
			after: 1200 * time.Millisecond, checkVolume: "vol-3", wantCode: codes.ResourceExhausted,
			wantMsg: "attach vol-3 to i-1 not tried: the cloud refused an attach there for lack of capacity 1.2s ago " +
				"(attach vol-4 to i-1: AttachmentLimitExceeded: no free slot); not asking the cloud again for 3.8s",
		},
		{
			name: "quota window", recordVolume: "vol-4", recorded: errQuota,
			after: 0, checkVolume: "vol-9", wantCode: codes.ResourceExhausted,
			wantMsg: "attach vol-9 to i-1 not tried: the cloud refused an attach there for lack of capacity 0s ago " +
				"(attach vol-1 to i-1: AttachmentQuotaExceeded: account quota); not asking the cloud again for 5s",
		},
		{
			name: "volume window", recordVolume: "vol-1", recorded: errThrottled,
			after: 300 * time.Millisecond, checkVolume: "vol-1", wantCode: codes.Unavailable,
			wantMsg: "attach vol-1 to i-1 not retried yet: it failed 300ms ago (attach vol-1 to i-1: Throttled: slow down); backing off for 700ms",
		},
		{
			name: "plain error remembered", recordVolume: "vol-4", recorded: outcome{cause: cloud.NewError(cloud.CodeAttachmentLimitExceeded, "full")},
			after: time.Second, checkVolume: "vol-5", wantCode: codes.ResourceExhausted,
			wantMsg: "attach vol-5 to i-1 not tried: the cloud refused an attach there for lack of capacity 1s ago " +
				"(AttachmentLimitExceeded: full); not asking the cloud again for 4s",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
			b, err := New(cfg, clk)
			if err != nil {
				t.Fatal(err)
			}
			b.Record("i-1", tc.recordVolume, tc.recorded.cause, tc.recorded.answer)
			clk.SetTime(clk.Now().Add(tc.after))
			_, err = b.Check("i-1", tc.checkVolume)
			s, _ := status.FromError(err)
			if s.Code() != tc.wantCode || s.Message() != tc.wantMsg {
				t.Errorf("Check(i-1, %s) = %s %q\nwant %s %q", tc.checkVolume, s.Code(), s.Message(), tc.wantCode, tc.wantMsg)
			}
		})
	}
}

func TestJitterShortensWithinBounds(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Jitter = 0.5
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	seen := map[time.Duration]bool{}
	for i := range 20 {
		clk := clocktesting.NewFakePassiveClock(start)
		b, _ := New(cfg, clk)
		for range i { // different draws from the same generator
			b.Record("i-0", "v", errFull.cause, errFull.answer)
		}
		b.Record("i-1", "vol-1", errFull.cause, errFull.answer)
		w := b.nodes["i-1"].until.Sub(start)
		if w <= cfg.CapacityInitial/2 || w > cfg.CapacityInitial {
			t.Fatalf("window %s outside (%s, %s]", w, cfg.CapacityInitial/2, cfg.CapacityInitial)
		}
		seen[w] = true
	}
	if len(seen) < 2 {
		t.Errorf("jitter produced one window only: %v", seen)
	}
}

func TestSweepDropsOldWindows(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	b, _ := New(DefaultConfig(), clk)
	b.Record("i-1", "vol-1", errFull.cause, errFull.answer)
	b.Record("i-1", "vol-1", errThrottled.cause, errThrottled.answer)
	clk.SetTime(clk.Now().Add(time.Hour))
	for range 256 {
		b.Record("i-2", "vol-2", nil, nil)
	}
	if n, v := b.Len(); n != 0 || v != 0 {
		t.Errorf("after the sweep: %d node and %d volume windows, want none", n, v)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	bad := Config{CapacityInitial: time.Minute, CapacityMax: time.Second, RetryableInitial: 0, RetryableMax: time.Second, Jitter: 1}
	err := bad.Validate()
	for _, want := range []string{"capacity backoff", "retryable backoff", "jitter"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want it to mention %q", err, want)
		}
	}
	if _, err := New(bad, nil); err == nil {
		t.Error("New with a bad config = nil error")
	}
}

// TestClassify is the retry policy's table: a class for every code of the cloud's error
// table as of this test and for the errors that are not answers. A code added later gets its
// class's Backoff column (cloud.Class.Handling), which TestBackoffColumnIsAClass checks.
func TestClassify(t *testing.T) {
	codeRows := map[cloud.Code]Class{
		cloud.CodeAttachmentLimitExceeded: ClassCapacity, cloud.CodeAttachmentQuotaExceeded: ClassCapacity,
		cloud.CodeVolumeQuotaExceeded: ClassCapacity, cloud.CodeCapacityQuotaExceeded: ClassCapacity,
		cloud.CodeAccessDenied: ClassNone, cloud.CodeUnauthenticated: ClassNone,
		cloud.CodeZoneMismatch: ClassNone, cloud.CodeVolumeInUse: ClassNone, cloud.CodePreconditionFailed: ClassNone,
		cloud.CodeVolumeNotFound: ClassNone, cloud.CodeSnapshotNotFound: ClassNone, cloud.CodeGroupSnapshotNotFound: ClassNone, cloud.CodeSnapshotInGroup: ClassNone, cloud.CodeInstanceNotFound: ClassNone,
		cloud.CodeAlreadyExists: ClassNone, cloud.CodeInvalidArgument: ClassNone, cloud.CodePayloadTooLarge: ClassNone,
		cloud.CodeIncorrectState:   ClassNone,
		cloud.CodeInstanceImpaired: ClassRetryable, cloud.CodeInstanceStopped: ClassRetryable,
		cloud.CodeThrottled: ClassRetryable, cloud.CodeInternalError: ClassRetryable, cloud.CodeUnavailable: ClassRetryable,
		cloud.CodeNotFound: ClassRetryable, cloud.CodeFaultNotFound: ClassRetryable,
		cloud.CodeServerLimitExceeded: ClassRetryable, cloud.CodeMethodNotAllowed: ClassRetryable,
	}
	for c, want := range codeRows {
		if got := Classify(fmt.Errorf("attach vol-1 to i-1: %w", cloud.NewError(c, "x"))); got != want {
			t.Errorf("Classify(%s) = %q, want %q", c, got, want)
		}
	}
	for _, tc := range []struct {
		name string
		err  error
		want Class
	}{
		{"success", nil, ClassNone},
		{"a code the driver does not know", &cloud.Error{Code: "SomethingNew", HTTPStatus: 500}, ClassRetryable},
		{"deadline", fmt.Errorf("attach: %w", context.DeadlineExceeded), ClassRetryable},
		{"canceled", fmt.Errorf("attach: %w", context.Canceled), ClassNone},
		{"connection refused", &url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}, ClassRetryable},
		{"local error (answered INTERNAL)", errors.New("bug"), ClassRetryable},
		{"a status error decides nothing", status.Error(codes.ResourceExhausted, "AttachmentLimitExceeded"), ClassRetryable},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("%s: Classify(%v) = %q, want %q", tc.name, tc.err, got, tc.want)
		}
	}
}

func TestOpenCountsOnlyWindowsInForce(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Jitter = 0
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	b, _ := New(cfg, clk)
	b.Record("i-1", "vol-1", errFull.cause, errFull.answer)
	b.Record("i-2", "vol-2", errThrottled.cause, errThrottled.answer)
	b.Record("i-2", "vol-3", errThrottled.cause, errThrottled.answer)
	b.Record("i-3", "vol-4", errZone.cause, errZone.answer) // final: no window
	if n, v := b.Open(); n != 1 || v != 2 {
		t.Errorf("Open = %d nodes, %d volumes; want 1, 2", n, v)
	}
	clk.SetTime(clk.Now().Add(cfg.RetryableInitial))
	if n, v := b.Open(); n != 1 || v != 0 {
		t.Errorf("after the retryable windows: Open = %d, %d; want 1, 0", n, v)
	}
	clk.SetTime(clk.Now().Add(cfg.CapacityInitial))
	if n, v := b.Open(); n != 0 || v != 0 {
		t.Errorf("after every window: Open = %d, %d; want 0, 0", n, v)
	}
	if n, v := b.Len(); n != 1 || v != 2 {
		t.Errorf("Len = %d, %d; want the expired windows still remembered (1, 2)", n, v)
	}
}

// TestBackoffColumnIsAClass: the Backoff column of every row of the error matrix is one of the
// classes Classify returns.
func TestBackoffColumnIsAClass(t *testing.T) {
	for _, c := range cloud.Classes() {
		switch b := Class(c.Handling().Backoff); b {
		case ClassNone, ClassCapacity, ClassRetryable:
		default:
			t.Errorf("cloud class %q: backoff %q is not a Class", c, b)
		}
	}
}
