package console

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// KubeClient is the cluster view's Kubernetes client: LIST calls of the four kinds the view
// reads (CSINodes, VolumeAttachments, Pods, Events), through client-go's REST client on a
// scheme that holds only those lists (and metav1's Status, for the API server's errors).
//
// Not client-go's clientset (k8s.io/client-go/kubernetes): its scheme registers every API
// group of Kubernetes when the program starts, about 28 MB of the fake cloud's binary and
// 15 MB of its resident memory for one console panel (issues 25 and 28; docs/figures.md).
// cmd/fakecloud's TestBinaryLinksNoClientset keeps it out.
type KubeClient struct {
	// core is /api/v1 (pods, events); storage /apis/storage.k8s.io/v1 (csinodes,
	// volumeattachments).
	core, storage rest.Interface
}

// NewKubeClient returns a KubeClient for the cluster rc describes, e.g. from
// clientcmd.BuildConfigFromFlags. Like client-go's clientset it shares one HTTP client and
// one rate limiter (rc.QPS, rc.Burst) between the API groups, and speaks JSON. It connects to
// nothing yet; it reads the files rc names (client certificates, CA), as the clientset does.
func NewKubeClient(rc *rest.Config) (*KubeClient, error) {
	scheme := runtime.NewScheme()
	scheme.AddKnownTypes(corev1.SchemeGroupVersion, &corev1.PodList{}, &corev1.EventList{})
	scheme.AddKnownTypes(storagev1.SchemeGroupVersion, &storagev1.CSINodeList{}, &storagev1.VolumeAttachmentList{})
	// metav1's Status (an API server's error answers) and options, as client-go's own
	// scheme registers them.
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	codecs := serializer.NewCodecFactory(scheme)

	cfg := rest.CopyConfig(rc)
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	cfg.NegotiatedSerializer = codecs.WithoutConversion()
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	client := func(apiPath string, gv schema.GroupVersion) (rest.Interface, error) {
		c := *cfg
		c.APIPath, c.GroupVersion = apiPath, &gv
		gc, err := rest.RESTClientForConfigAndClient(&c, httpClient)
		if err != nil {
			return nil, fmt.Errorf("kubernetes client for %s: %w", gv, err)
		}
		return gc, nil
	}
	k := &KubeClient{}
	if k.core, err = client("/api", corev1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if k.storage, err = client("/apis", storagev1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	return k, nil
}

// list GETs the cluster-wide list of resource into out, with opts as query parameters.
func list(ctx context.Context, c rest.Interface, resource string, opts metav1.ListOptions, out runtime.Object) error {
	return c.Get().Resource(resource).VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
}

func (k *KubeClient) csiNodes(ctx context.Context, opts metav1.ListOptions) (*storagev1.CSINodeList, error) {
	out := &storagev1.CSINodeList{}
	return out, list(ctx, k.storage, "csinodes", opts, out)
}

func (k *KubeClient) volumeAttachments(ctx context.Context, opts metav1.ListOptions) (*storagev1.VolumeAttachmentList, error) {
	out := &storagev1.VolumeAttachmentList{}
	return out, list(ctx, k.storage, "volumeattachments", opts, out)
}

// pods and events list every namespace's.
func (k *KubeClient) pods(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	out := &corev1.PodList{}
	return out, list(ctx, k.core, "pods", opts, out)
}

func (k *KubeClient) events(ctx context.Context, opts metav1.ListOptions) (*corev1.EventList, error) {
	out := &corev1.EventList{}
	return out, list(ctx, k.core, "events", opts, out)
}
