package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// vacName is deploy/base/volumeattributesclass.yaml's class: type ssd, 3000 IOPS.
const vacName = "fakecloud-fast"

// S18: a clone of a bound claim (CLONE_VOLUME): a claim whose dataSource is
// another claim is provisioned as a cloud volume with the source's volume as
// sourceVolumeId, in its zone and at least its size, and a pod using it runs
// on the source's node.
func TestS18CloneOfBoundClaim(t *testing.T) {
	ns := namespace(t)
	node, _ := smallestNode(t)
	podWithClaim(t, ns, "source", node)
	waitPodRunning(t, ns, "source", runDeadline)
	src := volumeHandle(t, ns, "source")

	clone := pvc(ns, "clone")
	clone.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "source"}
	if _, err := env.cs.CoreV1().PersistentVolumeClaims(ns).Create(testCtx(t), clone, metav1.CreateOptions{}); err != nil {
		failf(t, "create PVC %s/clone: %v", ns, err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "clone", Namespace: ns, Labels: map[string]string{"app": "e2e"}}, Spec: podSpec(node, "clone")}
	if _, err := env.cs.CoreV1().Pods(ns).Create(testCtx(t), pod, metav1.CreateOptions{}); err != nil {
		failf(t, "create pod %s/clone: %v", ns, err)
	}
	waitPodRunning(t, ns, "clone", runDeadline)
	id := volumeHandle(t, ns, "clone")
	c, err := env.cloud.GetVolume(testCtx(t), id)
	if err != nil {
		failf(t, "cloud volume %s: %v", id, err)
	}
	s, err := env.cloud.GetVolume(testCtx(t), src)
	if err != nil {
		failf(t, "cloud volume %s: %v", src, err)
	}
	if c.SourceVolumeID != src || c.Zone != s.Zone || c.SizeBytes < s.SizeBytes || c.AttachedTo != node {
		failf(t, "clone %s: expected source %s, zone %s, at least %d bytes, attached to %s; seen source %q, zone %s, %d bytes, on %q",
			id, src, s.Zone, s.SizeBytes, node, c.SourceVolumeID, c.Zone, c.SizeBytes, c.AttachedTo)
	}
	t.Logf("S18: clone %s of %s (zone %s) Running on %s", id, src, c.Zone, node)
}

// ensureVAC creates deploy/base's VolumeAttributesClass when the cluster
// lacks it; deploy/base (and so deploy/kind) applies it, the local cluster applies it too
// (localcluster deployFiles), so this only matters on another cluster.
func ensureVAC(t *testing.T) {
	t.Helper()
	_, err := env.cs.StorageV1().VolumeAttributesClasses().Get(testCtx(t), vacName, metav1.GetOptions{})
	if err == nil {
		return
	}
	if !apierrors.IsNotFound(err) {
		failf(t, "get VolumeAttributesClass %s: %v", vacName, err)
	}
	vac := &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: vacName}, DriverName: driverName,
		Parameters: map[string]string{"type": "ssd", "iops": "3000"}}
	if _, err := env.cs.StorageV1().VolumeAttributesClasses().Create(testCtx(t), vac, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		failf(t, "create VolumeAttributesClass %s: %v", vacName, err)
	}
}

// S19: a VolumeAttributesClass modify of a bound, attached claim
// (MODIFY_VOLUME through the csi-resizer): the claim's
// currentVolumeAttributesClassName becomes the class, the cloud volume
// takes its type and IOPS, the pod keeps running, and the node's count does
// not move (every type takes one attach slot).
func TestS19ModifyBoundClaim(t *testing.T) {
	ensureVAC(t)
	ns := namespace(t)
	node, _ := smallestNode(t)
	podWithClaim(t, ns, "modified", node)
	waitPodRunning(t, ns, "modified", runDeadline)
	before := nodeCount(t, node)
	id := volumeHandle(t, ns, "modified")
	start := time.Now()
	patch := fmt.Appendf(nil, `{"spec":{"volumeAttributesClassName":%q}}`, vacName)
	if _, err := env.cs.CoreV1().PersistentVolumeClaims(ns).Patch(testCtx(t), "modified", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		failf(t, "set volumeAttributesClassName of %s/modified: %v", ns, err)
	}
	// The csi-resizer picks the change up from its informer and calls
	// ControllerModifyVolume at once; runDeadline covers a retry.
	eventually(t, runDeadline, fmt.Sprintf("PVC %s/modified at class %s and cloud volume %s ssd/3000", ns, vacName, id), func() error {
		c, err := env.cs.CoreV1().PersistentVolumeClaims(ns).Get(testCtx(t), "modified", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur := c.Status.CurrentVolumeAttributesClassName; cur == nil || *cur != vacName {
			return fmt.Errorf("currentVolumeAttributesClassName %v, modify status %+v", cur, c.Status.ModifyVolumeStatus)
		}
		v, err := env.cloud.GetVolume(testCtx(t), id)
		if err != nil {
			return err
		}
		if v.Type != cloud.VolumeTypeSSD || v.IOPS != 3000 {
			return fmt.Errorf("cloud volume %s is %s/%d", id, v.Type, v.IOPS)
		}
		return nil
	})
	if p := waitPodRunning(t, ns, "modified", slack); p.Status.Phase != corev1.PodRunning {
		failf(t, "pod %s/modified after the modify: %s", ns, podState(p))
	}
	if after := nodeCount(t, node); after != before {
		failf(t, "CSINode %s: the modify moved the count %d -> %d; every type takes one slot", node, before, after)
	}
	t.Logf("S19: %s modified to %s in %v; count of %s stays %d", id, vacName, time.Since(start).Round(time.Second), node, before)
}

// S20: an impaired instance (fake cloud health): the node's count falls to
// the floor max(1, attached) within a period, a pod placed there waits (its
// attach is refused UNAVAILABLE, errorCode 14, never 8, so the kubelet
// rejects nothing), and when health returns the count comes back to what it
// was and the pod runs.
func TestS20ImpairedInstance(t *testing.T) {
	ns := namespace(t)
	node, before := smallestNode(t)
	attached := int32(cloudAttached(t, node))
	if _, err := env.cloud.SetInstanceHealth(testCtx(t), node, cloud.InstanceHealthImpaired, "e2e: host maintenance"); err != nil {
		failf(t, "impair %s: %v", node, err)
	}
	healed := false
	heal := func() {
		if !healed {
			if _, err := env.cloud.SetInstanceHealth(testCtx(t), node, cloud.InstanceHealthOK, ""); err != nil {
				failf(t, "heal %s: %v", node, err)
			}
			healed = true
		}
	}
	t.Cleanup(heal)
	waitCount(t, node, max(1, attached), countDeadline(false))

	podWithClaim(t, ns, "waits", node)
	eventually(t, runDeadline, fmt.Sprintf("VolumeAttachment of %s/waits shows errorCode %d", ns, codeUnavailable), func() error {
		vas, err := volumeAttachmentsFor(testCtx(t), ns)
		if err != nil {
			return err
		}
		if len(vas) != 1 {
			return fmt.Errorf("expected 1 VolumeAttachment for %s, seen %d", ns, len(vas))
		}
		return checkAttachError(t, &vas[0], codeUnavailable)
	})
	// Two of the attacher's retries (--retry-interval-max 10s): the pod keeps
	// waiting, is never failed, and nothing attaches in the cloud.
	consistently(t, 20*time.Second, fmt.Sprintf("pod %s/waits waits on impaired %s", ns, node), func() error {
		p, err := env.cs.CoreV1().Pods(ns).Get(testCtx(t), "waits", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodRunning {
			return fmt.Errorf("pod is %s", podState(p))
		}
		if got := int32(cloudAttached(t, node)); got != attached {
			return fmt.Errorf("the impaired instance holds %d volumes, %d before", got, attached)
		}
		return nil
	})
	start := time.Now()
	heal()
	waitPodRunning(t, ns, "waits", runDeadline)
	// The restored count is the one from before, capped at the fresh target
	// (the new volume takes one of its slots in the truth, not in the count).
	waitCount(t, node, before, countDeadline(false))
	t.Logf("S20: %s impaired: count %d -> %d, the pod waited; healed: Running and count %d after %v",
		node, before, max(1, attached), before, time.Since(start).Round(time.Second))
}
