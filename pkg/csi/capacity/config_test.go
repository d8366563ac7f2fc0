package capacity

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   []string // substrings; none: valid
	}{
		{"defaults", func(*Config) {}, nil},
		{"no hysteresis, no step limit", func(c *Config) { c.MaxStep = 0; c.StabilityWindow = 0; c.MaxStabilityWindow = 0 }, nil},
		{"even share", func(c *Config) { c.QuotaShare = QuotaShareEven }, nil},
		{"zero stale-after", func(c *Config) { c.StaleAfter = 0 }, []string{"stale-after must be > 0"}},
		{"negative step and window", func(c *Config) { c.MaxStep = -1; c.StabilityWindow = -time.Second }, []string{"max-step", "stability-window"}},
		{"max window below the window", func(c *Config) { c.MaxStabilityWindow = time.Second }, []string{"capacity max-stability-window (1s) must be >= capacity stability-window (30s)"}},
		{"zero interval", func(c *Config) { c.MinInterval = 0 }, []string{"min-interval must be > 0"}},
		{"jitter out of range", func(c *Config) { c.Jitter = 1.5 }, []string{"jitter"}},
		{"jitter NaN", func(c *Config) { c.Jitter = math.NaN() }, []string{"jitter"}},
		{"unknown share", func(c *Config) { c.QuotaShare = "" }, []string{"quota-share"}},
		{"bounds", func(c *Config) { c.AnswerBound = 0; c.LookupTimeout = -1 }, []string{"answer-bound", "lookup-timeout"}},
		{"increase spread", func(c *Config) { c.IncreaseSpread = time.Minute }, nil},
		{"negative increase spread", func(c *Config) { c.IncreaseSpread = -time.Second }, []string{"capacity increase-spread must be >= 0"}},
		{"stale before the interval", func(c *Config) { c.StaleAfter = time.Second }, []string{"capacity stale-after (1s) must be >= capacity min-interval"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mutate(&c)
			err := c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate = nil, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate = %q, want it to mention %q", err, w)
				}
			}
		})
	}
}

func TestParseQuotaShare(t *testing.T) {
	for in, want := range map[string]QuotaShare{"none": QuotaShareNone, "even": QuotaShareEven, "": "", "all": ""} {
		got, err := ParseQuotaShare(in)
		if got != want || (err != nil) != (want == "") {
			t.Errorf("ParseQuotaShare(%q) = %q, %v", in, got, err)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

var _ net.Error = timeoutErr{}

func TestClassify(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("get capacity of i-1: %w", err) }
	tests := []struct {
		err  error
		want ErrorClass
	}{
		{nil, ClassNone},
		{wrap(cloud.NewError(cloud.CodeAttachmentLimitExceeded, "")), ClassCapacity},
		{wrap(cloud.NewError(cloud.CodeAttachmentQuotaExceeded, "")), ClassCapacity},
		{wrap(cloud.NewError(cloud.CodeAccessDenied, "")), ClassPermission},
		{wrap(cloud.NewError(cloud.CodeUnauthenticated, "")), ClassAuth},
		{wrap(cloud.NewError(cloud.CodeInstanceNotFound, "")), ClassNotFound},
		{wrap(cloud.NewError(cloud.CodeThrottled, "")), ClassThrottled},
		{wrap(cloud.NewError(cloud.CodeInternalError, "")), ClassServer},
		{wrap(cloud.NewError(cloud.CodeUnavailable, "")), ClassServer},
		{wrap(&cloud.Error{Code: "Weird", HTTPStatus: 502}), ClassServer},
		{wrap(cloud.NewError(cloud.CodeZoneMismatch, "")), ClassOther},
		{wrap(context.DeadlineExceeded), ClassTimeout},
		{wrap(context.Canceled), ClassCanceled},
		{wrap(timeoutErr{}), ClassTimeout},
		{wrap(errors.New("connection refused")), ClassNetwork},
	}
	for _, tc := range tests {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// TestClassifyCoversEveryCode: the lookup class of every code of the cloud's error table as of
// this test; only the attach-capacity codes are ClassCapacity, the one class that lowers the
// value (docs/errors.md). A code added later gets its class's Capacity column
// (cloud.Class.Handling), which TestCapacityColumnIsAClass checks.
func TestClassifyCoversEveryCode(t *testing.T) {
	want := map[cloud.Code]ErrorClass{
		cloud.CodeAttachmentLimitExceeded: ClassCapacity, cloud.CodeAttachmentQuotaExceeded: ClassCapacity,
		cloud.CodeVolumeQuotaExceeded: ClassOther, cloud.CodeCapacityQuotaExceeded: ClassOther,
		cloud.CodeAccessDenied: ClassPermission, cloud.CodeUnauthenticated: ClassAuth,
		cloud.CodeZoneMismatch: ClassOther, cloud.CodeVolumeInUse: ClassOther, cloud.CodePreconditionFailed: ClassOther,
		cloud.CodeVolumeNotFound: ClassOther, cloud.CodeSnapshotNotFound: ClassOther,
		cloud.CodeGroupSnapshotNotFound: ClassOther, cloud.CodeSnapshotInGroup: ClassOther,
		cloud.CodeInstanceNotFound: ClassNotFound, cloud.CodeNotFound: ClassNotFound,
		cloud.CodeInstanceImpaired: ClassOther, cloud.CodeInstanceStopped: ClassOther,
		cloud.CodeAlreadyExists: ClassOther, cloud.CodeInvalidArgument: ClassOther, cloud.CodePayloadTooLarge: ClassOther,
		cloud.CodeFaultNotFound: ClassOther, cloud.CodeServerLimitExceeded: ClassOther, cloud.CodeMethodNotAllowed: ClassOther,
		cloud.CodeThrottled: ClassThrottled, cloud.CodeInternalError: ClassServer, cloud.CodeUnavailable: ClassServer,
		cloud.CodeIncorrectState: ClassOther,
	}
	for c, w := range want {
		if got := Classify(cloud.NewError(c, "x")); got != w {
			t.Errorf("Classify(%s) = %q, want %q", c, got, w)
		}
	}
}

// TestCapacityColumnIsAClass: the Capacity and Capacity5xx columns of every row of the error
// matrix are lookup classes of a cloud call (not staleRevision or invalid, which are the
// reading's), and only attachCapacity's is ClassCapacity.
func TestCapacityColumnIsAClass(t *testing.T) {
	known := map[ErrorClass]bool{ClassNone: true, ClassCapacity: true, ClassPermission: true, ClassAuth: true,
		ClassNotFound: true, ClassThrottled: true, ClassServer: true, ClassTimeout: true, ClassCanceled: true,
		ClassNetwork: true, ClassOther: true}
	for _, c := range cloud.Classes() {
		h := c.Handling()
		for _, v := range []ErrorClass{ErrorClass(h.Capacity), ErrorClass(h.Capacity5xx)} {
			if !known[v] {
				t.Errorf("cloud class %q: capacity lookup class %q is not one of a cloud call", c, v)
			}
			if v.lowersCapacity() && c != cloud.ClassAttachCapacity {
				t.Errorf("cloud class %q: lowers the capacity; only attachCapacity does", c)
			}
		}
	}
}
