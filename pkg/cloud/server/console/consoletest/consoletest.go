// Package consoletest serves a Kubernetes API server for tests of the console's cluster view:
// the four LIST calls the view makes (CSINodes, VolumeAttachments, Pods and Events, every
// namespace's), answered over HTTP from a client-go clientset, typically its fake. A test sets
// the cluster up and changes it through the clientset, counts the view's calls in the fake's
// Actions (each with the ListOptions the request carried), and turns a list into an API
// error with a reactor; the console reaches it through its own client (console.KubeClient),
// on the wire as it reaches a real API server.
//
// Tests only: the clientset it takes is what the fake cloud's binary must not link (the
// console's KubeClient exists so it need not).
package consoletest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/console"
)

// Client starts an API server answering from kube (closed when t ends) and returns the
// console's client of it.
func Client(t testing.TB, kube kubernetes.Interface) *console.KubeClient {
	t.Helper()
	c, err := console.NewKubeClient(Serve(t, kube))
	if err != nil {
		t.Fatalf("console client of the test API server: %v", err)
	}
	return c
}

// Serve starts an API server answering the cluster view's lists from kube, closed when t
// ends, and returns its client configuration (plain HTTP, no credentials). Other paths
// answer 404 and other methods 405, as Kubernetes Status objects.
func Serve(t testing.TB, kube kubernetes.Interface) *rest.Config {
	t.Helper()
	type lister func(context.Context, metav1.ListOptions) (runtime.Object, error)
	routes := map[string]struct {
		kind schema.GroupVersionKind
		list lister
	}{
		"/apis/storage.k8s.io/v1/csinodes": {schema.GroupVersionKind{Group: "storage.k8s.io", Version: "v1", Kind: "CSINodeList"},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return kube.StorageV1().CSINodes().List(ctx, o)
			}},
		"/apis/storage.k8s.io/v1/volumeattachments": {schema.GroupVersionKind{Group: "storage.k8s.io", Version: "v1", Kind: "VolumeAttachmentList"},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return kube.StorageV1().VolumeAttachments().List(ctx, o)
			}},
		"/api/v1/pods": {schema.GroupVersionKind{Version: "v1", Kind: "PodList"},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, o)
			}},
		"/api/v1/events": {schema.GroupVersionKind{Version: "v1", Kind: "EventList"},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return kube.CoreV1().Events(metav1.NamespaceAll).List(ctx, o)
			}},
	}
	// The query's list options, decoded as an API server does (metav1's conversions from
	// url.Values).
	scheme := runtime.NewScheme()
	v1 := schema.GroupVersion{Version: "v1"}
	metav1.AddToGroupVersion(scheme, v1)
	params := runtime.NewParameterCodec(scheme)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route, ok := routes[r.URL.Path]
		switch {
		case !ok:
			writeError(w, apierrors.NewNotFound(schema.GroupResource{}, r.URL.Path))
			return
		case r.Method != http.MethodGet:
			writeError(w, apierrors.NewMethodNotSupported(schema.GroupResource{}, r.Method))
			return
		}
		var opts metav1.ListOptions
		if err := params.DecodeParameters(r.URL.Query(), v1, &opts); err != nil {
			writeError(w, apierrors.NewBadRequest(fmt.Sprintf("list options %s: %v", r.URL.RawQuery, err)))
			return
		}
		obj, err := route.list(r.Context(), opts)
		if err != nil {
			writeError(w, err)
			return
		}
		obj.GetObjectKind().SetGroupVersionKind(route.kind)
		write(w, http.StatusOK, obj)
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}
}

// writeError answers err as the API server does: its Status (an internal error's for an
// error that carries none), with the Status's code.
func writeError(w http.ResponseWriter, err error) {
	var s apierrors.APIStatus
	if !errors.As(err, &s) {
		s = apierrors.NewInternalError(err)
	}
	st := s.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	write(w, int(st.Code), &st)
}

func write(w http.ResponseWriter, code int, obj any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(obj)
}
