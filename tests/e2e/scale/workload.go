package scale

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Namespace holds the workload's pods and claims.
const Namespace = "scale"

// storageClass is deploy/base's StorageClass of the driver (WaitForFirstConsumer).
const storageClass = "fakecloud-disk"

// podImage is any name: the hollow kubelets' runtime is fake.
const podImage = "registry.k8s.io/pause:3.10"

// codeResourceExhausted is gRPC RESOURCE_EXHAUSTED, a VolumeAttachment's
// attachError.errorCode when the attach was refused for capacity.
const codeResourceExhausted = 8

// workload keeps Keep pods, each with a claim of its own, and replaces the oldest every
// Every; it records every VolumeAttachment whose attach failed with RESOURCE_EXHAUSTED.
type workload struct {
	cs    kubernetes.Interface
	keep  int
	every time.Duration

	pods cache.Indexer

	mu        sync.Mutex
	alive     []string
	seq       int
	created   int
	errors    int
	lastErr   error
	exhausted map[string]time.Time
}

// startWorkload creates the namespace and starts the Pod and VolumeAttachment informers,
// which run until ctx ends; run creates and deletes the pods.
func startWorkload(ctx context.Context, cs kubernetes.Interface, keep int, every time.Duration) (*workload, error) {
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("workload namespace: %w", err)
	}
	w := &workload{cs: cs, keep: keep, every: every, exhausted: map[string]time.Time{}}
	f := informers.NewSharedInformerFactory(cs, 0)
	podInf := f.Core().V1().Pods().Informer()
	w.pods = podInf.GetIndexer()
	vaInf := f.Storage().V1().VolumeAttachments().Informer()
	seen := func(obj any) {
		va, ok := obj.(*storagev1.VolumeAttachment)
		if !ok || va.Status.AttachError == nil || va.Status.AttachError.ErrorCode == nil || *va.Status.AttachError.ErrorCode != codeResourceExhausted {
			return
		}
		w.mu.Lock()
		if _, ok := w.exhausted[va.Name]; !ok {
			w.exhausted[va.Name] = time.Now()
		}
		w.mu.Unlock()
	}
	if _, err := vaInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, n any) { seen(n) }}); err != nil {
		return nil, fmt.Errorf("workload: VolumeAttachment handler: %w", err)
	}
	f.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for typ, ok := range f.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			return nil, fmt.Errorf("workload: %v cache did not sync within a minute", typ)
		}
	}
	return w, nil
}

// resize sets how many pods the workload keeps and how often it replaces one, from the
// next run on.
func (w *workload) resize(keep int, every time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.keep, w.every = keep, every
}

// run creates and deletes pods until ctx ends.
func (w *workload) run(ctx context.Context) {
	w.mu.Lock()
	every := w.every
	w.mu.Unlock()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		w.step(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (w *workload) step(ctx context.Context) {
	w.mu.Lock()
	w.seq++
	name := fmt.Sprintf("w-%d", w.seq)
	var old string
	if len(w.alive) >= w.keep {
		old, w.alive = w.alive[0], w.alive[1:]
	}
	w.mu.Unlock()
	err := w.create(ctx, name)
	if old != "" {
		err = joinFirst(err, w.remove(ctx, old))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	// Kept even when its create failed: the later delete of what may half exist is NotFound.
	w.alive = append(w.alive, name)
	if err == nil {
		w.created++
	}
	if err != nil && ctx.Err() == nil {
		w.errors++
		w.lastErr = err
	}
}

func joinFirst(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func (w *workload) create(ctx context.Context, name string) error {
	sc := storageClass
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &sc,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := w.cs.CoreV1().PersistentVolumeClaims(Namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create claim %s: %w", name, err)
	}
	zero := int64(0)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, Labels: map[string]string{"app": "scale"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{Name: "app", Image: podImage,
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}},
		},
	}
	if _, err := w.cs.CoreV1().Pods(Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create pod %s: %w", name, err)
	}
	return nil
}

func (w *workload) remove(ctx context.Context, name string) error {
	zero := int64(0)
	if err := w.cs.CoreV1().Pods(Namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pod %s: %w", name, err)
	}
	if err := w.cs.CoreV1().PersistentVolumeClaims(Namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete claim %s: %w", name, err)
	}
	return nil
}

// PodCounts are the workload's pods by state at one moment.
type PodCounts struct {
	// Running pods; Unscheduled are Pending without a node (the scheduler's count check
	// holds them back: by design); ContainerCreating are Pending on a node (waiting for
	// the attach); Stuck are those of ContainerCreating scheduled more than stuckAfter ago;
	// Failed were rejected by their kubelet.
	Running, Unscheduled, ContainerCreating, Stuck, Failed int
}

// counts classifies the workload's pods now (deleted ones excepted).
func (w *workload) counts(stuckAfter time.Duration) PodCounts {
	var c PodCounts
	now := time.Now()
	for _, obj := range w.pods.List() {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Namespace != Namespace || p.DeletionTimestamp != nil {
			continue
		}
		switch {
		case p.Status.Phase == corev1.PodRunning:
			c.Running++
		case p.Status.Phase == corev1.PodFailed:
			c.Failed++
		case p.Spec.NodeName == "":
			c.Unscheduled++
		default:
			c.ContainerCreating++
			if now.Sub(scheduledAt(p)) > stuckAfter {
				c.Stuck++
			}
		}
	}
	return c
}

// scheduledAt is when the scheduler bound p to its node (its PodScheduled condition), or
// its creation when that is unknown: the wait for a volume starts there, and on a loaded
// machine provisioning alone may take minutes before it.
func scheduledAt(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	return p.CreationTimestamp.Time
}

// exhaustedBetween counts VolumeAttachments first seen failing with RESOURCE_EXHAUSTED in
// [from, to).
func (w *workload) exhaustedBetween(from, to time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, at := range w.exhausted {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

// stats are the pods created so far and the create/delete errors, with the last one.
func (w *workload) stats() (created, errs int, last error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.created, w.errors, w.lastErr
}
