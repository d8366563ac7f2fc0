package kubeapi_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fakecloud/fakecloud-csi/internal/kubeapi"
	"github.com/fakecloud/fakecloud-csi/internal/kubeapi/kubeapitest"
)

// TestClientCalls: each method makes the request the clientset makes (verb, group, resource,
// namespace, name, list options) and reads the answer into the typed object; the API
// server's errors are StatusErrors; a type of a group not registered is refused before any
// request.
func TestClientCalls(t *testing.T) {
	srv := kubeapitest.New(t,
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"a": "b"}}},
		&storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va-1"}, Spec: storagev1.VolumeAttachmentSpec{Attacher: "x"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}})
	srv.SetServerVersion("v1.36.1")
	c, err := kubeapi.New(srv.Config(), corev1.AddToScheme, storagev1.AddToScheme, eventsv1.AddToScheme)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	if v, err := c.ServerVersion(ctx); err != nil || v.GitVersion != "v1.36.1" {
		t.Errorf("ServerVersion = %+v, %v; want v1.36.1", v, err)
	}
	n := &corev1.Node{}
	if err := c.Get(ctx, "nodes", "", "n1", n); err != nil || n.Labels["a"] != "b" {
		t.Errorf("Get node = %+v, %v", n, err)
	}
	if err := c.Get(ctx, "csidrivers", "", "none", &storagev1.CSIDriver{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get of a missing CSIDriver: %v, want NotFound", err)
	}
	vas := &storagev1.VolumeAttachmentList{}
	if err := c.List(ctx, "volumeattachments", "", metav1.ListOptions{Limit: 500}, vas); err != nil || len(vas.Items) != 1 || vas.Items[0].Spec.Attacher != "x" {
		t.Errorf("List VolumeAttachments = %+v, %v", vas, err)
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, "pods", metav1.NamespaceAll, metav1.ListOptions{FieldSelector: "status.phase=Pending"}, pods); err != nil || len(pods.Items) != 1 {
		t.Errorf("List pods = %+v, %v", pods, err)
	}
	ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "d-", Namespace: "default"}, Reason: "R"}
	got := &eventsv1.Event{}
	if err := c.Create(ctx, "events", "default", ev, got); err != nil || got.Name == "" || got.Reason != "R" {
		t.Errorf("Create event = %+v, %v", got, err)
	}
	if stored := srv.List(eventsv1.SchemeGroupVersion, "events"); len(stored) != 1 {
		t.Errorf("%d events stored, want 1", len(stored))
	}
	want := []kubeapitest.Action{
		{Verb: "get", Resource: "version"},
		{Verb: "get", Resource: "nodes", Name: "n1"},
		{Verb: "get", Group: "storage.k8s.io", Resource: "csidrivers", Name: "none"},
		{Verb: "list", Group: "storage.k8s.io", Resource: "volumeattachments", ListOptions: metav1.ListOptions{Limit: 500}},
		{Verb: "list", Resource: "pods", ListOptions: metav1.ListOptions{FieldSelector: "status.phase=Pending"}},
		{Verb: "create", Group: "events.k8s.io", Resource: "events", Namespace: "default"},
	}
	if d := cmp.Diff(want, srv.Actions()); d != "" {
		t.Errorf("requests (-want +got):\n%s", d)
	}

	// A client of the core group only cannot read storage.k8s.io objects.
	core, err := kubeapi.New(srv.Config(), corev1.AddToScheme)
	if err != nil {
		t.Fatal(err)
	}
	srv.ClearActions()
	if err := core.Get(ctx, "csidrivers", "", "x", &storagev1.CSIDriver{}); err == nil {
		t.Error("Get of an unregistered type succeeded")
	}
	if a := srv.Actions(); len(a) != 0 {
		t.Errorf("an unregistered type made requests: %+v", a)
	}
}
