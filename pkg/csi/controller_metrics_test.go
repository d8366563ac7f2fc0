package csi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/backoff"
)

func TestCloudClass(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, classNone},
		{cloud.NewError(cloud.CodeAttachmentLimitExceeded, "full"), classCapacity},
		{fmt.Errorf("attach: %w", cloud.NewError(cloud.CodeAttachmentQuotaExceeded, "quota")), classCapacity},
		{cloud.NewError(cloud.CodeAccessDenied, "no"), classPermission},
		{cloud.NewError(cloud.CodeUnauthenticated, "who"), classAuth},
		{cloud.NewError(cloud.CodeZoneMismatch, "zone"), classTopology},
		{cloud.NewError(cloud.CodeVolumeInUse, "busy"), classConflict},
		{cloud.NewError(cloud.CodeVolumeNotFound, "gone"), classNotFound},
		{cloud.NewError(cloud.CodeInstanceNotFound, "gone"), classNotFound},
		{cloud.NewError(cloud.CodeThrottled, "slow"), classThrottled},
		{cloud.NewError(cloud.CodeUnavailable, "down"), classServer},
		{cloud.NewError(cloud.CodeInternalError, "bug"), classServer},
		{cloud.NewError(cloud.CodeMethodNotAllowed, "?"), classOther},
		{context.DeadlineExceeded, classTimeout},
		{context.Canceled, classCanceled},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, classNetwork},
	}
	for _, tc := range tests {
		if got := cloudClass(tc.err); got != tc.want {
			t.Errorf("cloudClass(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// newMeteredController is newBackoffController (fake clock, no jitter) with the controller
// metrics on a registry of its own.
func newMeteredController(t *testing.T) (*ControllerServer, *realCloud, *prometheus.Registry) {
	t.Helper()
	_, f := newController(t)
	s, _ := newBackoffController(t, f)
	reg := prometheus.NewRegistry()
	m, err := newControllerMetrics(reg, s.backoff, s.inflight)
	if err != nil {
		t.Fatal(err)
	}
	s.metrics = m
	return s, f, reg
}

func TestControllerMetricsCountAttachOutcomes(t *testing.T) {
	ctx := context.Background()
	s, f, reg := newMeteredController(t)
	ids := fillNode(t, s, "i-1", 3) // i-1 has 3 free slots: 3 × publish OK
	x := mustCreate(t, s, "x").GetVolumeId()
	_, err := publish(s, x, "i-1") // the cloud says full
	wantCode(t, err, codes.ResourceExhausted)
	_, err = publish(s, x, "i-1") // answered from the window
	wantCode(t, err, codes.ResourceExhausted)
	f.FailNext(cloud.OperationAttachVolume, cloud.NewError(cloud.CodeThrottled, "slow down"))
	_, err = publish(s, x, "i-2")
	wantCode(t, err, codes.Unavailable)
	_, err = publish(s, x, "i-b") // zone mismatch: the retryable window is per volume and node
	wantCode(t, err, codes.FailedPrecondition)
	_, err = publish(s, "", "i-1")
	wantCode(t, err, codes.InvalidArgument)
	_, err = s.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: ids[0], NodeId: "i-1"})
	wantCode(t, err, codes.OK)
	_, err = s.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-missing", NodeId: "i-1"})
	wantCode(t, err, codes.OK)

	want := `
# HELP fakecloud_csi_controller_attach_operations_total ControllerPublishVolume (operation=publish) and ControllerUnpublishVolume (operation=unpublish) results, by gRPC code and the cloud's error class (none on success; backoff or notAsked when the cloud was not asked).
# TYPE fakecloud_csi_controller_attach_operations_total counter
fakecloud_csi_controller_attach_operations_total{class="backoff",code="ResourceExhausted",operation="publish"} 1
fakecloud_csi_controller_attach_operations_total{class="capacity",code="ResourceExhausted",operation="publish"} 1
fakecloud_csi_controller_attach_operations_total{class="none",code="OK",operation="publish"} 3
fakecloud_csi_controller_attach_operations_total{class="notAsked",code="InvalidArgument",operation="publish"} 1
fakecloud_csi_controller_attach_operations_total{class="throttled",code="Unavailable",operation="publish"} 1
fakecloud_csi_controller_attach_operations_total{class="topology",code="FailedPrecondition",operation="publish"} 1
fakecloud_csi_controller_attach_operations_total{class="none",code="OK",operation="unpublish"} 1
fakecloud_csi_controller_attach_operations_total{class="notFound",code="OK",operation="unpublish"} 1
# HELP fakecloud_csi_controller_backoff_refusals_total Publishes answered from a backoff window without asking the cloud, by window class (capacity: node-wide, retryable: one volume).
# TYPE fakecloud_csi_controller_backoff_refusals_total counter
fakecloud_csi_controller_backoff_refusals_total{class="capacity"} 1
# HELP fakecloud_csi_controller_backoff_windows Backoff windows in force at scrape time, by class (capacity: nodes, retryable: node/volume pairs).
# TYPE fakecloud_csi_controller_backoff_windows gauge
fakecloud_csi_controller_backoff_windows{class="capacity"} 0
fakecloud_csi_controller_backoff_windows{class="retryable"} 1
# HELP fakecloud_csi_controller_inflight_operations Controller operations running now (one per volume, volume name or snapshot name).
# TYPE fakecloud_csi_controller_inflight_operations gauge
fakecloud_csi_controller_inflight_operations 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

func TestControllerMetricsShowOpenWindowsAndInflight(t *testing.T) {
	s, f, reg := newMeteredController(t)
	fillNode(t, s, "i-1", 3)
	x := mustCreate(t, s, "x").GetVolumeId()
	_, err := publish(s, x, "i-1")
	wantCode(t, err, codes.ResourceExhausted)
	if n, err := testutil.GatherAndCount(reg, "fakecloud_csi_controller_backoff_windows"); err != nil || n != 2 {
		t.Fatalf("backoff_windows series = %d (%v), want 2", n, err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "fakecloud_csi_controller_backoff_windows" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == string(backoff.ClassCapacity) && m.GetGauge().GetValue() != 1 {
				t.Errorf("capacity windows = %v, want 1 (i-1 is full)", m.GetGauge().GetValue())
			}
		}
	}

	entered, release := make(chan struct{}), make(chan struct{})
	f.SetHook(cloud.OperationAttachVolume, func(context.Context) error {
		close(entered)
		<-release
		return nil
	})
	done := make(chan error, 1)
	go func() { _, err := publish(s, x, "i-2"); done <- err }()
	<-entered
	if got := testutil.ToFloat64(s.metrics.inflight); got != 1 {
		t.Errorf("inflight during a publish = %v, want 1", got)
	}
	close(release)
	wantCode(t, <-done, codes.OK)
	if got := testutil.ToFloat64(s.metrics.inflight); got != 0 {
		t.Errorf("inflight after the publish = %v, want 0", got)
	}
}

// TestCloudClassCoversEveryCode: the class label of every code of the cloud's error table as
// of this test (docs/errors.md). A code added later gets its class's Metric column
// (cloud.Class.Handling), which TestMetricColumnIsALabel checks.
func TestCloudClassCoversEveryCode(t *testing.T) {
	want := map[cloud.Code]string{
		cloud.CodeAttachmentLimitExceeded: classCapacity, cloud.CodeAttachmentQuotaExceeded: classCapacity,
		cloud.CodeVolumeQuotaExceeded: classCapacity, cloud.CodeCapacityQuotaExceeded: classCapacity,
		cloud.CodeAccessDenied: classPermission, cloud.CodeUnauthenticated: classAuth,
		cloud.CodeZoneMismatch: classTopology, cloud.CodeVolumeInUse: classConflict, cloud.CodePreconditionFailed: classConflict,
		cloud.CodeVolumeNotFound: classNotFound, cloud.CodeSnapshotNotFound: classNotFound,
		cloud.CodeGroupSnapshotNotFound: classNotFound, cloud.CodeSnapshotInGroup: classConflict,
		cloud.CodeInstanceNotFound: classNotFound, cloud.CodeNotFound: classNotFound,
		cloud.CodeInstanceImpaired: classHealth, cloud.CodeInstanceStopped: classHealth,
		cloud.CodeAlreadyExists: classOther, cloud.CodeInvalidArgument: classOther, cloud.CodePayloadTooLarge: classOther,
		cloud.CodeFaultNotFound: classOther, cloud.CodeServerLimitExceeded: classOther, cloud.CodeMethodNotAllowed: classOther,
		cloud.CodeThrottled: classThrottled, cloud.CodeInternalError: classServer, cloud.CodeUnavailable: classServer,
		cloud.CodeIncorrectState: classConflict,
	}
	for c, w := range want {
		if got := cloudClass(cloud.NewError(c, "x")); got != w {
			t.Errorf("cloudClass(%s) = %q, want %q", c, got, w)
		}
	}
	if got := cloudClass(&cloud.Error{Code: "SomethingNew", HTTPStatus: 502}); got != classOther {
		t.Errorf("cloudClass(unknown code) = %q, want %q", got, classOther)
	}
}

// TestMetricColumnIsALabel: the Metric column of every row of the error matrix is one of the
// class labels documented above cloudClass (and in docs/metrics.md), so the label set stays
// bounded and known.
func TestMetricColumnIsALabel(t *testing.T) {
	labels := map[string]bool{classNone: true, classCapacity: true, classPermission: true, classAuth: true,
		classTopology: true, classConflict: true, classNotFound: true, classThrottled: true, classServer: true,
		classHealth: true, classTimeout: true, classCanceled: true, classNetwork: true, classOther: true}
	for _, c := range cloud.Classes() {
		if m := c.Handling().Metric; !labels[m] {
			t.Errorf("class %q: metric label %q is not one of the labels of cloudClass", c, m)
		}
	}
}
