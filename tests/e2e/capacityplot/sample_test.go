package capacityplot

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
)

func indexer(t *testing.T, objs ...runtime.Object) cache.Indexer {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		if err := idx.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	return idx
}

func pod(ns, name, node string, phase corev1.PodPhase, claims ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
	for _, c := range claims {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: c, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
	}
	return p
}

func claim(ns, name, pv string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv}}
}

func pv(name, driver string) *corev1.PersistentVolume {
	v := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if driver != "" {
		v.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: name}
	}
	return v
}

func va(name, driver, node string, attached bool) *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: driver, NodeName: node}, Status: storagev1.VolumeAttachmentStatus{Attached: attached}}
}

func TestSampleNode(t *testing.T) {
	// The cloud: capacity of n1 (limit 8, 1 out of band, 2 attached, headroom 3).
	cloudSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/instances/i-n1/capacity" {
			http.Error(w, `{"code":"InstanceNotFound","message":"no"}`, http.StatusNotFound)
			return
		}
		_ = json.NewEncoder(w).Encode(cloud.Capacity{InstanceID: "i-n1", AttachLimit: 8, OutOfBandSlots: 1, Attached: 2, QuotaHeadroom: 3, Instances: 2, Revision: 42})
	}))
	defer cloudSrv.Close()
	plugin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debug/capacity" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"nodeId":"i-n1","mode":"fresh","reported":6}`))
	}))
	defer plugin.Close()
	cc, err := admin.NewClient(cloudSrv.URL)
	if err != nil {
		t.Fatal(err)
	}
	other := "other.csi.dev"
	s := &Sampler{Driver: drv, Cloud: cc, Share: QuotaShareNone, PluginURLs: map[string]string{"n1": plugin.URL, "n2": "http://127.0.0.1:1"},
		Listers: Listers{
			CSINodes: storagelisters.NewCSINodeLister(indexer(t, csiNode("n1", "1", i32(5)))),
			VolumeAttachments: storagelisters.NewVolumeAttachmentLister(indexer(t,
				va("a1", drv, "n1", true), va("a2", drv, "n1", false), va("a3", drv, "n2", true), va("a4", other, "n1", true))),
			Pods: corelisters.NewPodLister(indexer(t,
				pod("ns", "p1", "n1", corev1.PodRunning, "c1", "c2"),
				pod("ns", "p2", "n1", corev1.PodPending, "c1"),         // same PV again: counted once
				pod("ns", "p3", "n1", corev1.PodSucceeded, "c3"),       // terminated
				pod("ns", "p4", "n1", corev1.PodRunning, "c4", "c5"),   // unbound claim, other driver
				pod("ns", "p5", "n2", corev1.PodRunning, "c3"),         // other node
				pod("other", "p6", "n1", corev1.PodRunning, "missing"), // no such claim
			)),
			PVCs: corelisters.NewPersistentVolumeClaimLister(indexer(t,
				claim("ns", "c1", "pv1"), claim("ns", "c2", "pv2"), claim("ns", "c3", "pv3"), claim("ns", "c4", ""), claim("ns", "c5", "pvx"))),
			PVs: corelisters.NewPersistentVolumeLister(indexer(t, pv("pv1", drv), pv("pv2", drv), pv("pv3", drv), pv("pvx", other))),
		}}
	ctx := context.Background()
	got := s.SampleNode(ctx, t0, "n1", "i-n1")
	if got.Cloud == nil || got.Cloud.Revision != 42 || got.Truth != 5 {
		t.Errorf("cloud: expected revision 42 and truth min(7, 2+3) = 5, got %+v truth %d (%s)", got.Cloud, got.Truth, got.CloudErr)
	}
	if fmtCount(got.CSINode) != "5" || fmtCount(got.Plugin) != "6" {
		t.Errorf("expected CSINode 5 and plugin 6, got %s and %s", fmtCount(got.CSINode), fmtCount(got.Plugin))
	}
	if got.Scheduled != 2 || got.VolumeAttachments != 2 || got.Attached != 1 {
		t.Errorf("expected 2 scheduled, 2 VolumeAttachments, 1 attached; got %d, %d, %d", got.Scheduled, got.VolumeAttachments, got.Attached)
	}

	n2 := s.SampleNode(ctx, t0, "n2", "i-n2")
	if n2.Cloud != nil || n2.CloudErr == "" || n2.Truth != 0 {
		t.Errorf("n2: a failed capacity read must leave Cloud nil with an error, got %+v", n2)
	}
	if n2.CSINode != nil || n2.Plugin != nil || n2.Scheduled != 1 || n2.VolumeAttachments != 1 {
		t.Errorf("n2: expected no CSINode, no plugin value, 1 scheduled, 1 VolumeAttachment; got %+v", n2)
	}
}
