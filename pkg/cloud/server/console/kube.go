package console

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/fakecloud/fakecloud-csi/internal/kubeapi"
)

// KubeClient is the cluster view's Kubernetes client: LIST calls of the four kinds the view
// reads (CSINodes, VolumeAttachments, Pods, Events), through kubeapi's small typed client on
// a scheme of the core and storage.k8s.io groups only.
//
// Not client-go's clientset (k8s.io/client-go/kubernetes): its scheme registers every API
// group of Kubernetes when the program starts, about 28 MB of the fake cloud's binary and
// 15 MB of its resident memory for one console panel (issues 25 and 28; docs/figures.md).
// internal/kubeapi's TestBinariesLinkNoClientset keeps it out.
type KubeClient struct {
	c *kubeapi.Client
}

// NewKubeClient returns a KubeClient for the cluster rc describes, e.g. from
// clientcmd.BuildConfigFromFlags. Like client-go's clientset it shares one HTTP client and
// one rate limiter (rc.QPS, rc.Burst) between the API groups, and speaks JSON. It connects to
// nothing yet; it reads the files rc names (client certificates, CA), as the clientset does.
func NewKubeClient(rc *rest.Config) (*KubeClient, error) {
	c, err := kubeapi.New(rc, corev1.AddToScheme, storagev1.AddToScheme)
	if err != nil {
		return nil, err
	}
	return &KubeClient{c: c}, nil
}

func (k *KubeClient) csiNodes(ctx context.Context, opts metav1.ListOptions) (*storagev1.CSINodeList, error) {
	out := &storagev1.CSINodeList{}
	return out, k.c.List(ctx, "csinodes", metav1.NamespaceAll, opts, out)
}

func (k *KubeClient) volumeAttachments(ctx context.Context, opts metav1.ListOptions) (*storagev1.VolumeAttachmentList, error) {
	out := &storagev1.VolumeAttachmentList{}
	return out, k.c.List(ctx, "volumeattachments", metav1.NamespaceAll, opts, out)
}

// pods and events list every namespace's.
func (k *KubeClient) pods(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	out := &corev1.PodList{}
	return out, k.c.List(ctx, "pods", metav1.NamespaceAll, opts, out)
}

func (k *KubeClient) events(ctx context.Context, opts metav1.ListOptions) (*corev1.EventList, error) {
	out := &corev1.EventList{}
	return out, k.c.List(ctx, "events", metav1.NamespaceAll, opts, out)
}
