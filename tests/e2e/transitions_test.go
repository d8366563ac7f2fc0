package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
)

// attacherTimeout is the csi-attacher's --timeout in deploy/kind and on the
// local cluster (tests/e2e/localcluster): the deadline of each
// ControllerPublishVolume and ControllerUnpublishVolume call.
const attacherTimeout = 30 * time.Second

// lastRevision is the cloud's revision now, for reading the events after it.
func lastRevision(t *testing.T) uint64 {
	t.Helper()
	page, err := env.cloud.ListEventsPage(testCtx(t), admin.EventQuery{SinceRevision: 1 << 62, MaxResults: 1})
	if err != nil {
		failf(t, "events: %v", err)
	}
	return page.Revision
}

// S16: an attach slower than the csi-attacher's --timeout (docs/attach.md):
// the first ControllerPublishVolume answers DEADLINE_EXCEEDED, the
// attacher's retries join the one attach in the cloud, and the pod converges
// to Running with exactly one attach of its volume in the cloud.
func TestS16AttachSlowerThanAttacherTimeout(t *testing.T) {
	ns := namespace(t)
	node, _ := smallestNode(t)
	slow := attacherTimeout + 15*time.Second
	addFault(t, cloud.FaultRule{Operation: cloud.OperationAttachVolume, InstanceID: node, Transition: cloud.TransitionSlow,
		DurationMS: int(slow.Milliseconds())})
	since := lastRevision(t)
	start := time.Now()
	podWithClaim(t, ns, "slow", node)
	waitPodRunning(t, ns, "slow", runDeadline+slow)
	vol := volumeHandle(t, ns, "slow")
	v, err := env.cloud.GetVolume(testCtx(t), vol)
	if err != nil || v.State != cloud.StateAttached || v.AttachedTo != node {
		failf(t, "cloud volume %s: expected attached to %s, seen %+v (err %v)", vol, node, v, err)
	}
	events, err := env.cloud.ListEvents(testCtx(t), since)
	if err != nil {
		failf(t, "events: %v", err)
	}
	n := map[string]int{}
	for _, e := range events {
		if e.VolumeID == vol {
			n[e.Type]++
		}
	}
	if n["VolumeAttaching"] != 1 || n["VolumeAttached"] != 1 {
		failf(t, "cloud events of %s: expected one VolumeAttaching and one VolumeAttached, seen %v", vol, n)
	}
	t.Logf("S16: attach of %v against a %v attacher timeout: pod Running after %v, one attach in the cloud",
		slow, attacherTimeout, time.Since(start).Round(time.Second))
}

// S17: a full node whose pods are deleted and replaced by pods with new
// volumes while its detaches are slow: the detaching volumes hold their
// slots, so the cloud never holds more than the node's limit at any revision
// (checked on every event that carries the count); the replacements run once
// the detaches end. The attaches the cloud refused on the way (errorCode 8
// seen on VolumeAttachments) are counted and reported.
func TestS17SlowDetachChurnOnFullNode(t *testing.T) {
	ns := namespace(t)
	node, count := smallestNode(t)
	slow := 20 * time.Second // below attacherTimeout: each unpublish waits it out
	since := lastRevision(t)
	statefulSet(t, ns, "old", podSpec(node, "data"), count)
	eventually(t, runDeadline+slack, fmt.Sprintf("%d pods of old Running on %s", count, node), func() error {
		return checkFilled(t, ns, node, int(count), 0)
	})
	addFault(t, cloud.FaultRule{Operation: cloud.OperationDetachVolume, InstanceID: node, Transition: cloud.TransitionSlow,
		DurationMS: int(slow.Milliseconds())})

	refused, stopWatch := watchRefusedAttaches(t, ns)
	const rounds = 2
	prev := "old"
	for r := range rounds {
		next := "new" + strconv.Itoa(r)
		scale(t, ns, prev, 0)
		statefulSet(t, ns, next, podSpec(node, "data"), count)
		eventually(t, runDeadline+slow+slack, fmt.Sprintf("round %d: %d pods of %s Running on %s", r, count, next, node), func() error {
			running := 0
			for _, p := range listPods(t, ns) {
				if p.Labels["app"] == next && isRunning(&p) && p.Spec.NodeName == node {
					running++
				}
			}
			if running != int(count) {
				return fmt.Errorf("%d of %d pods of %s Running", running, count, next)
			}
			return nil
		})
		prev = next
	}
	stopWatch()
	events, err := env.cloud.ListEvents(testCtx(t), since)
	if err != nil {
		failf(t, "events: %v", err)
	}
	maxHeld := 0
	for _, e := range events {
		if e.InstanceID != node || !takesSlot(e.Type) || e.Attached == nil || e.Limit == nil {
			continue
		}
		maxHeld = max(maxHeld, *e.Attached)
		if *e.Attached > *e.Limit {
			failf(t, "cloud event %d (%s %s): instance %s holds %d slots, over its limit %d", e.Seq, e.Type, e.VolumeID, node, *e.Attached, *e.Limit)
		}
	}
	if got := cloudAttached(t, node); got != int(count) {
		failf(t, "cloud instance %s: expected %d volumes holding slots at the end, seen %d", node, count, got)
	}
	t.Logf("S17: %d rounds of %d pods on %s with %v detaches: at most %d slots held (limit %d), %d attaches refused with RESOURCE_EXHAUSTED (errorCode 8)",
		rounds, count, node, slow, maxHeld, count, refused())
}

// scale sets the replicas of StatefulSet ns/name.
func scale(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	if _, err := env.cs.AppsV1().StatefulSets(ns).UpdateScale(testCtx(t), name,
		&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: replicas}},
		metav1.UpdateOptions{}); err != nil {
		failf(t, "scale StatefulSet %s/%s to %d: %v", ns, name, replicas, err)
	}
}

// watchRefusedAttaches polls the VolumeAttachments of ns every second and
// counts the distinct attach errors with errorCode 8 it sees (one per
// VolumeAttachment and error time). refused reads the count; stop ends the
// watch.
func watchRefusedAttaches(t *testing.T, ns string) (refused func() int, stop func()) {
	ctx, cancel := context.WithCancel(testCtx(t))
	var mu sync.Mutex
	seen := map[string]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			if vas, err := volumeAttachmentsFor(ctx, ns); err == nil {
				mu.Lock()
				for _, va := range vas {
					if ae := va.Status.AttachError; ae != nil && ae.ErrorCode != nil && *ae.ErrorCode == codeResourceExhausted {
						seen[va.Name+"@"+ae.Time.String()] = true
					}
				}
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	return func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(seen)
		}, func() {
			once.Do(func() {
				cancel()
				<-done
			})
		}
}
