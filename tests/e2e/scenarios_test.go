package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/tests/e2e/capacityplot"
)

// runDeadline bounds provisioning, scheduling, attach and mount of a pod.
const runDeadline = 2 * time.Minute

// gRPC codes as the external-attacher records them in
// VolumeAttachment.status.attachError.errorCode.
const (
	codePermissionDenied   = 7
	codeResourceExhausted  = 8
	codeFailedPrecondition = 9
	codeUnavailable        = 14
)

// S1: every node's CSINode lists the driver with count = type limit −
// out-of-band slots.
func TestS01Registration(t *testing.T) {
	for _, n := range e2eNodes(t) {
		in, err := env.cloud.GetInstance(testCtx(t), n.Name)
		if err != nil {
			failf(t, "node %s has no cloud instance: %v", n.Name, err)
		}
		want := int32(max(1, in.AttachLimit-in.OutOfBandSlots))
		if len(in.Attachments) != 0 {
			failf(t, "instance %s: expected no attachments at the start, seen %v", n.Name, in.Attachments)
		}
		if truth := truthCount(t, n.Name); truth != want {
			failf(t, "instance %s: expected capacity %d (limit %d − out-of-band %d), the cloud's facts give %d", n.Name, want, in.AttachLimit, in.OutOfBandSlots, truth)
		}
		waitCount(t, n.Name, want, countDeadline(false))
		if z := n.Labels["topology.disk.fakecloud.dev/zone"]; z != in.Zone {
			failf(t, "node %s: expected zone label %q (the instance's zone), seen %q", n.Name, in.Zone, z)
		}
	}
}

// S2: CSINode follows PATCHes of out-of-band slots, the attach limit and the
// quota, down and up, within P + slack; nothing is written when nothing
// changes.
func TestS02PeriodicConvergence(t *testing.T) {
	nodes := e2eNodes(t)
	node := nodes[len(nodes)-1].Name
	in, err := env.cloud.GetInstance(testCtx(t), node)
	if err != nil {
		failf(t, "instance %s: %v", node, err)
	}
	slots := int32(in.AttachLimit - in.OutOfBandSlots)
	waitCount(t, node, slots, countDeadline(false))

	t.Run("out-of-band down and up", func(t *testing.T) {
		oob := in.OutOfBandSlots + 2
		patchInstance(t, node, cloud.InstancePatch{OutOfBandSlots: &oob})
		waitCount(t, node, slots-2, countDeadline(false))
		back := in.OutOfBandSlots
		patchInstance(t, node, cloud.InstancePatch{OutOfBandSlots: &back})
		waitCount(t, node, slots, countDeadline(true))
	})
	t.Run("attach limit override down and clear", func(t *testing.T) {
		limit := in.AttachLimit - 3
		patchInstance(t, node, cloud.InstancePatch{AttachLimit: &limit})
		waitCount(t, node, slots-3, countDeadline(false))
		patchInstance(t, node, cloud.InstancePatch{ClearAttachLimit: true})
		waitCount(t, node, slots, countDeadline(true))
	})
	t.Run("attachment quota down and up", func(t *testing.T) {
		q, err := env.cloud.GetQuotas(testCtx(t))
		if err != nil {
			failf(t, "quotas: %v", err)
		}
		setAttachmentQuota(t, q.Attachments.Used+2)
		want := truthCount(t, node)
		if want != min(slots, int32(cloudAttached(t, node))+2) {
			failf(t, "quota headroom 2: expected capacity %d from the cloud, computed %d", min(slots, int32(cloudAttached(t, node))+2), want)
		}
		waitCount(t, node, want, countDeadline(false))
		setAttachmentQuota(t, q.Attachments.Limit)
		waitCount(t, node, slots, countDeadline(true))
	})
	t.Run("no write when nothing changed", func(t *testing.T) {
		// The quota is shared: the subtest above moved every node's count, and the
		// kubelets copy the restored values at their own period ticks. Start
		// counting writes once every node shows its truth.
		for _, n := range nodes {
			waitCount(t, n.Name, truthCount(t, n.Name), countDeadline(true))
		}
		rvs := map[string]string{}
		for _, n := range nodes {
			_, rv, err := csiNodeCount(testCtx(t), n.Name)
			if err != nil {
				failf(t, "%v", err)
			}
			rvs[n.Name] = rv
		}
		consistently(t, 2*env.period+5*time.Second, "CSINode resourceVersion unchanged without cloud changes", func() error {
			for _, n := range nodes {
				_, rv, err := csiNodeCount(testCtx(t), n.Name)
				if err != nil {
					return err
				}
				if rv != rvs[n.Name] {
					return fmt.Errorf("CSINode %s: expected resourceVersion %s (no write), seen %s", n.Name, rvs[n.Name], rv)
				}
			}
			return nil
		})
	})
}

// S3: a StatefulSet needing more volumes than a node has: the extra pods stay
// Pending with "exceed max volume count"; none is stuck in ContainerCreating.
func TestS03ExhaustionPending(t *testing.T) {
	ns := namespace(t)
	node, count := smallestNode(t)
	statefulSet(t, ns, "fill", podSpec(node, "data"), count+2)
	eventually(t, runDeadline+slack, fmt.Sprintf("%d pods Running on %s and 2 Pending for the volume limit", count, node), func() error {
		return checkFilled(t, ns, node, int(count), 2)
	})
	consistently(t, env.period+5*time.Second, "the split holds", func() error {
		return checkFilled(t, ns, node, int(count), 2)
	})
	if got := cloudAttached(t, node); got != int(count) {
		failf(t, "cloud instance %s: expected %d attachments, seen %d", node, count, got)
	}
}

// checkFilled is nil when exactly running pods of ns run on node and pending
// pods wait for the volume limit, and no pod is scheduled but not running
// or failed.
func checkFilled(t *testing.T, ns, node string, running, pending int) error {
	var r, p int
	var states []string
	for _, pod := range listPods(t, ns) {
		states = append(states, pod.Name+": "+podState(&pod))
		switch {
		case pod.Status.Phase == corev1.PodFailed:
			return fmt.Errorf("pod %s/%s failed: %s", ns, pod.Name, podState(&pod))
		case isRunning(&pod) && pod.Spec.NodeName == node:
			r++
		case unschedulableForVolumes(&pod):
			p++
		}
	}
	if r != running || p != pending {
		return fmt.Errorf("expected %d Running on %s and %d Pending (max volume count), seen %d and %d: %s",
			running, node, pending, r, p, strings.Join(states, "; "))
	}
	return nil
}

// S5: AccessDenied, ZoneMismatch, Throttled and Unavailable on AttachVolume
// give errorCode 7, 9, 14, 14 and never 8; the count does not move and no
// pod is rejected; without the fault the attach succeeds.
func TestS05NonCapacityFaults(t *testing.T) {
	ns := namespace(t)
	node := e2eNodes(t)[0].Name
	before := nodeCount(t, node)
	faults := []struct {
		code cloud.Code
		want int32
	}{
		{cloud.CodeAccessDenied, codePermissionDenied},
		{cloud.CodeZoneMismatch, codeFailedPrecondition},
		{cloud.CodeThrottled, codeUnavailable},
		{cloud.CodeUnavailable, codeUnavailable},
	}
	id := addFault(t, cloud.FaultRule{Operation: cloud.OperationAttachVolume, InstanceID: node, Error: faults[0].code})
	podWithClaim(t, ns, "faulty", node)
	for i, f := range faults {
		if i > 0 {
			if err := env.cloud.DeleteFault(testCtx(t), id); err != nil {
				failf(t, "delete fault %s: %v", id, err)
			}
			id = addFault(t, cloud.FaultRule{Operation: cloud.OperationAttachVolume, InstanceID: node, Error: f.code})
		}
		eventually(t, runDeadline, fmt.Sprintf("VolumeAttachment of %s/faulty shows errorCode %d for cloud %s", ns, f.want, f.code), func() error {
			vas, err := volumeAttachmentsFor(testCtx(t), ns)
			if err != nil {
				return err
			}
			if len(vas) != 1 {
				return fmt.Errorf("expected 1 VolumeAttachment for %s, seen %d", ns, len(vas))
			}
			return checkAttachError(t, &vas[0], f.want)
		})
		if got := nodeCount(t, node); got != before {
			failf(t, "CSINode %s after %s: expected the count to stay %d, seen %d", node, f.code, before, got)
		}
		pod, err := env.cs.CoreV1().Pods(ns).Get(testCtx(t), "faulty", metav1.GetOptions{})
		if err != nil {
			failf(t, "get pod: %v", err)
		}
		if pod.Status.Phase == corev1.PodFailed {
			failf(t, "pod %s/faulty: expected to wait, seen %s", ns, podState(pod))
		}
	}
	if err := env.cloud.DeleteFault(testCtx(t), id); err != nil {
		failf(t, "delete fault %s: %v", id, err)
	}
	waitPodRunning(t, ns, "faulty", runDeadline)
	vol := volumeHandle(t, ns, "faulty")
	v, err := env.cloud.GetVolume(testCtx(t), vol)
	if err != nil || v.AttachedTo != node {
		failf(t, "cloud volume %s: expected attached to %s, seen %+v (err %v)", vol, node, v, err)
	}
}

// checkAttachError is nil when va's attach error carries want; it fails t
// at once if it ever shows RESOURCE_EXHAUSTED for a non-capacity fault.
func checkAttachError(t *testing.T, va *storagev1.VolumeAttachment, want int32) error {
	ae := va.Status.AttachError
	if ae == nil || ae.ErrorCode == nil {
		return fmt.Errorf("VolumeAttachment %s: expected errorCode %d, seen attached=%v error=%v", va.Name, want, va.Status.Attached, ae)
	}
	if *ae.ErrorCode == codeResourceExhausted && want != codeResourceExhausted {
		failf(t, "VolumeAttachment %s: errorCode 8 (RESOURCE_EXHAUSTED) for a non-capacity fault: %q", va.Name, ae.Message)
	}
	if *ae.ErrorCode != want {
		return fmt.Errorf("VolumeAttachment %s: expected errorCode %d, seen %d (%q)", va.Name, want, *ae.ErrorCode, ae.Message)
	}
	return nil
}

// S11: out-of-band slots = the whole limit: the count is 1, never 0, and
// CSINode keeps an allocatable.
func TestS11NeverZero(t *testing.T) {
	node := e2eNodes(t)[0].Name
	in, err := env.cloud.GetInstance(testCtx(t), node)
	if err != nil {
		failf(t, "instance %s: %v", node, err)
	}
	before := nodeCount(t, node)
	all := in.AttachLimit
	patchInstance(t, node, cloud.InstancePatch{OutOfBandSlots: &all})
	waitCount(t, node, 1, countDeadline(false))
	consistently(t, env.period+2*time.Second, "count stays 1 with allocatable", func() error {
		c, _, err := csiNodeCount(testCtx(t), node)
		if err != nil {
			return err
		}
		if c == nil || *c != 1 {
			return fmt.Errorf("CSINode %s: expected allocatable.count 1, seen %s", node, fmtCount(c))
		}
		return nil
	})
	back := in.OutOfBandSlots
	patchInstance(t, node, cloud.InstancePatch{OutOfBandSlots: &back})
	waitCount(t, node, before, countDeadline(true))
}

// S10: deleting pods that hold volumes removes their VolumeAttachments, the
// cloud detaches, and the Pending pod schedules.
func TestS10DetachFreesCapacity(t *testing.T) {
	ns := namespace(t)
	node, count := smallestNode(t)
	for i := range int(count) + 1 {
		podWithClaim(t, ns, "p"+strconv.Itoa(i), node)
	}
	eventually(t, runDeadline+slack, fmt.Sprintf("%d pods Running on %s and 1 Pending", count, node), func() error {
		return checkFilled(t, ns, node, int(count), 1)
	})
	if got := cloudAttached(t, node); got != int(count) {
		failf(t, "cloud instance %s: expected %d attachments, seen %d", node, count, got)
	}
	var victim, waiting string
	for _, p := range listPods(t, ns) {
		if isRunning(&p) && victim == "" {
			victim = p.Name
		} else if !isRunning(&p) {
			waiting = p.Name
		}
	}
	victimVol := volumeHandle(t, ns, victim)
	victimPV := pvName(t, ns, victim)
	if err := env.cs.CoreV1().Pods(ns).Delete(testCtx(t), victim, metav1.DeleteOptions{}); err != nil {
		failf(t, "delete pod %s/%s: %v", ns, victim, err)
	}
	eventually(t, runDeadline, fmt.Sprintf("cloud detaches %s of deleted pod %s/%s", victimVol, ns, victim), func() error {
		v, err := env.cloud.GetVolume(testCtx(t), victimVol)
		if err != nil {
			return err
		}
		if v.AttachedTo != "" {
			return fmt.Errorf("volume %s: expected detached, seen attached to %s", victimVol, v.AttachedTo)
		}
		vas, err := volumeAttachmentsFor(testCtx(t), ns)
		if err != nil {
			return err
		}
		for _, va := range vas {
			if *va.Spec.Source.PersistentVolumeName == victimPV {
				return fmt.Errorf("VolumeAttachment %s of PV %s still exists (attached=%v)", va.Name, victimPV, va.Status.Attached)
			}
		}
		return nil
	})
	waitPodRunning(t, ns, waiting, runDeadline)
	if got := cloudAttached(t, node); got != int(count) {
		failf(t, "cloud instance %s: expected %d attachments after the swap, seen %d", node, count, got)
	}
}

// S7: the attachment quota set to what is in use: counts fall to current
// use on all nodes and new pods stay Pending; raised again, they run.
func TestS07AttachmentQuota(t *testing.T) {
	ns := namespace(t)
	nodes := e2eNodes(t)
	for i, n := range nodes {
		podWithClaim(t, ns, "hold"+strconv.Itoa(i), n.Name)
	}
	for i := range nodes {
		waitPodRunning(t, ns, "hold"+strconv.Itoa(i), runDeadline)
	}
	q, err := env.cloud.GetQuotas(testCtx(t))
	if err != nil {
		failf(t, "quotas: %v", err)
	}
	setAttachmentQuota(t, q.Attachments.Used)
	for _, n := range nodes {
		want := int32(max(1, cloudAttached(t, n.Name)))
		if truth := truthCount(t, n.Name); truth != want {
			failf(t, "instance %s at a full quota: expected capacity %d (its attachments), the cloud's facts give %d", n.Name, want, truth)
		}
		waitCount(t, n.Name, want, countDeadline(false))
	}
	podWithClaim(t, ns, "late", "")
	consistently(t, env.period+5*time.Second, "pod late Pending for the volume limit", func() error {
		p, err := env.cs.CoreV1().Pods(ns).Get(testCtx(t), "late", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Spec.NodeName != "" {
			return fmt.Errorf("pod %s/late: expected Pending, seen %s", ns, podState(p))
		}
		return nil
	})
	setAttachmentQuota(t, q.Attachments.Limit)
	waitPodRunning(t, ns, "late", runDeadline+cfg.RiseAllowance)
}

// S8: many pods at once for a node with k free slots: exactly k attach, the
// rest stay Pending, and the cloud never holds more than the limit at any
// revision.
func TestS08RaceForLastSlots(t *testing.T) {
	ns := namespace(t)
	nodes := e2eNodes(t)
	node := nodes[0].Name
	k := int(nodeCount(t, node)) - cloudAttached(t, node)
	start, err := env.cloud.ListEvents(testCtx(t), 0)
	if err != nil {
		failf(t, "events: %v", err)
	}
	var since uint64
	if len(start) > 0 {
		since = start[len(start)-1].Revision
	}
	extra := 3
	for i := range k + extra {
		podWithClaim(t, ns, "r"+strconv.Itoa(i), node)
	}
	eventually(t, runDeadline+slack, fmt.Sprintf("%d pods Running on %s and %d Pending", k, node, extra), func() error {
		return checkFilled(t, ns, node, k, extra)
	})
	events, err := env.cloud.ListEvents(testCtx(t), since)
	if err != nil {
		failf(t, "events since %d: %v", since, err)
	}
	attaches := 0
	for _, e := range events {
		if e.InstanceID != node || e.Attached == nil || e.Limit == nil {
			continue
		}
		if *e.Attached > *e.Limit {
			failf(t, "cloud event %d (%s %s): instance %s holds %d attachments, over its limit %d", e.Seq, e.Type, e.VolumeID, node, *e.Attached, *e.Limit)
		}
		if e.Type == "VolumeAttached" {
			attaches++
		}
	}
	if attaches != k {
		failf(t, "cloud events: expected exactly %d attaches to %s, seen %d", k, node, attaches)
	}
}

// S6: capacity lookups fail: the count holds its last known good value until
// it expires, then falls to max(1, attached here), never 0 and never up; a
// new pod stays Pending; after recovery the count returns to the truth and
// the pod runs.
func TestS06CloudOutage(t *testing.T) {
	ns := namespace(t)
	node := e2eNodes(t)[0].Name
	for i := range 2 {
		podWithClaim(t, ns, "held"+strconv.Itoa(i), node)
	}
	for i := range 2 {
		waitPodRunning(t, ns, "held"+strconv.Itoa(i), runDeadline)
	}
	good := nodeCount(t, node)
	floor := int32(max(1, cloudAttached(t, node)))
	addFault(t, cloud.FaultRule{Operation: cloud.OperationGetCapacity, InstanceID: node, Error: cloud.CodeUnavailable})
	outage := time.Now()
	// Before expiry: last known good.
	holdFor := cfg.StaleAfter - env.period - 5*time.Second
	if holdFor > 0 {
		consistently(t, holdFor, fmt.Sprintf("CSINode %s holds %d during the outage", node, good), func() error {
			c, _, err := csiNodeCount(testCtx(t), node)
			if err != nil {
				return err
			}
			if c == nil || *c != good {
				return fmt.Errorf("CSINode %s: expected last known good %d, seen %s", node, good, fmtCount(c))
			}
			return nil
		})
	}
	eventually(t, cfg.StaleAfter-time.Since(outage)+countDeadline(false), fmt.Sprintf("CSINode %s falls to the floor %d", node, floor), func() error {
		c, _, err := csiNodeCount(testCtx(t), node)
		if err != nil {
			return err
		}
		if c == nil || *c == 0 {
			failf(t, "CSINode %s: count %s during an outage; never 0 or unlimited", node, fmtCount(c))
		}
		if *c > good {
			failf(t, "CSINode %s: count rose to %d during an outage (was %d)", node, *c, good)
		}
		if *c != floor {
			return fmt.Errorf("CSINode %s: expected floor %d, seen %d", node, floor, *c)
		}
		return nil
	})
	podWithClaim(t, ns, "late", node)
	consistently(t, 5*time.Second, "pod late Pending during the outage", func() error {
		p, err := env.cs.CoreV1().Pods(ns).Get(testCtx(t), "late", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Spec.NodeName != "" {
			return fmt.Errorf("pod %s/late: expected Pending, seen %s", ns, podState(p))
		}
		return nil
	})
	if err := env.cloud.ClearFaults(testCtx(t)); err != nil {
		failf(t, "clear faults: %v", err)
	}
	waitPodRunning(t, ns, "late", runDeadline+cfg.RiseAllowance)
	waitCount(t, node, truthCount(t, node), countDeadline(true))
}

// S9: the controller plugin dies while attaches are in flight: after its
// restart no attachment is lost or duplicated.
func TestS09ControllerRestart(t *testing.T) {
	ns := namespace(t)
	addFault(t, cloud.FaultRule{Operation: cloud.OperationAttachVolume, LatencyMS: 3000})
	nodes := e2eNodes(t)
	const pods = 4
	for i := range pods {
		podWithClaim(t, ns, "m"+strconv.Itoa(i), nodes[i%len(nodes)].Name)
	}
	eventually(t, runDeadline, "attaches in flight", func() error {
		vas, err := volumeAttachmentsFor(testCtx(t), ns)
		if err != nil {
			return err
		}
		if len(vas) < 2 {
			return fmt.Errorf("expected ≥ 2 VolumeAttachments in %s, seen %d", ns, len(vas))
		}
		return nil
	})
	killController(t)
	for i := range pods {
		waitPodRunning(t, ns, "m"+strconv.Itoa(i), runDeadline+slack)
	}
	// Cloud truth: each volume attached once, to its pod's node.
	seen := map[string]string{}
	for i := range pods {
		name := "m" + strconv.Itoa(i)
		p, err := env.cs.CoreV1().Pods(ns).Get(testCtx(t), name, metav1.GetOptions{})
		if err != nil {
			failf(t, "get pod %s: %v", name, err)
		}
		vol := volumeHandle(t, ns, name)
		v, err := env.cloud.GetVolume(testCtx(t), vol)
		if err != nil {
			failf(t, "cloud volume %s: %v", vol, err)
		}
		if v.AttachedTo != p.Spec.NodeName {
			failf(t, "cloud volume %s of pod %s/%s: expected attached to %s, seen %q", vol, ns, name, p.Spec.NodeName, v.AttachedTo)
		}
		seen[vol] = p.Spec.NodeName
	}
	instances, err := env.cloud.ListInstances(testCtx(t))
	if err != nil {
		failf(t, "instances: %v", err)
	}
	count := map[string]int{}
	for _, in := range instances {
		for _, a := range in.Attachments {
			if _, ok := seen[a]; ok {
				count[a]++
			}
		}
	}
	for vol := range seen {
		if count[vol] != 1 {
			failf(t, "cloud: volume %s appears in %d instances' attachments, expected 1", vol, count[vol])
		}
	}
}

// killController ends the controller plugin at once, attaches in flight: on
// the local cluster SIGKILL to its process (pid folder), elsewhere a
// zero-grace delete of deploy/kind's controller pod, whose Deployment starts
// a new one (the kubelet kills the containers; nothing runs their shutdown).
func killController(t *testing.T) {
	t.Helper()
	if env.pidDir != "" {
		pidPath := filepath.Join(env.pidDir, "driver-controller.pid")
		data, err := os.ReadFile(pidPath)
		if err != nil {
			failf(t, "read %s: %v", pidPath, err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			failf(t, "pid in %s: %v", pidPath, err)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			failf(t, "kill controller plugin %d: %v", pid, err)
		}
		t.Logf("killed the controller plugin (pid %d) with attaches in flight", pid)
		return
	}
	ctx := testCtx(t)
	pods, err := env.cs.CoreV1().Pods(pluginNamespace).List(ctx, metav1.ListOptions{LabelSelector: controllerSelector})
	if err != nil {
		failf(t, "controller pods (%s): %v", controllerSelector, err)
	}
	if len(pods.Items) == 0 {
		failf(t, "no controller pod (%s) in %s", controllerSelector, pluginNamespace)
	}
	zero := int64(0)
	for _, p := range pods.Items {
		if err := env.cs.CoreV1().Pods(pluginNamespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			failf(t, "delete controller pod %s: %v", p.Name, err)
		}
		t.Logf("deleted the controller pod %s (grace 0) with attaches in flight", p.Name)
	}
}

// controllerSelector selects deploy/kind's controller plugin pods.
const controllerSelector = "app.kubernetes.io/name=fakecloud-csi-controller"

// S4: with a long period, slots are taken out of band after the count was
// reported; the next attach gets RESOURCE_EXHAUSTED (errorCode 8); the
// kubelet lowers the count and fails the pod with
// VolumeAttachmentLimitExceeded; the StatefulSet recreates it and it runs on
// a node with room.
func TestS04StaleCountRejection(t *testing.T) {
	ctx := testCtx(t)
	ns := namespace(t)
	nodes := e2eNodes(t)
	// node-2 shape: the smallest node that shares its zone with another.
	zoneOf := map[string]string{}
	byZone := map[string][]string{}
	for _, n := range nodes {
		z := n.Labels["topology.disk.fakecloud.dev/zone"]
		zoneOf[n.Name] = z
		byZone[z] = append(byZone[z], n.Name)
	}
	target := ""
	for _, n := range nodes {
		if len(byZone[zoneOf[n.Name]]) > 1 && (target == "" || nodeCount(t, n.Name) < nodeCount(t, target)) {
			target = n.Name
		}
	}
	if target == "" {
		t.Skip("needs two nodes in one zone")
	}
	// One volume held on the target, so "full" is 1 attached of 1 slot.
	podWithClaim(t, ns, "holder", target)
	waitPodRunning(t, ns, "holder", runDeadline)
	reported := nodeCount(t, target)

	setPeriod(t, 600)
	in, err := env.cloud.GetInstance(ctx, target)
	if err != nil {
		failf(t, "instance %s: %v", target, err)
	}
	oob := in.AttachLimit - len(in.Attachments)
	patchInstance(t, target, cloud.InstancePatch{OutOfBandSlots: &oob})
	if got := nodeCount(t, target); got != reported {
		failf(t, "CSINode %s: expected the stale count %d to stay with a 600 s period, seen %d", target, reported, got)
	}

	// A StatefulSet pod that prefers the target, in the target's zone.
	spec := podSpec("", "data")
	spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.disk.fakecloud.dev/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{zoneOf[target]}}},
		}}},
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 100, Preference: corev1.NodeSelectorTerm{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: hostnameKey, Operator: corev1.NodeSelectorOpIn, Values: []string{target}}},
		}}},
	}}
	// The StatefulSet controller replaces a failed pod within milliseconds, so
	// the rejection is caught by a watch rather than by polling.
	podW, err := env.cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		failf(t, "watch pods in %s: %v", ns, err)
	}
	defer podW.Stop()
	var mu sync.Mutex
	var rejected *corev1.Pod
	go func() {
		for ev := range podW.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && p.Status.Phase == corev1.PodFailed && p.Status.Reason == "VolumeAttachmentLimitExceeded" {
				mu.Lock()
				rejected = p
				mu.Unlock()
			}
		}
	}()
	statefulSet(t, ns, "stale", spec, 1)

	var firstUID types.UID
	created := time.Now()
	eventually(t, runDeadline, fmt.Sprintf("pod stale-0 scheduled to %s with errorCode 8 on its VolumeAttachment", target), func() error {
		p, err := env.cs.CoreV1().Pods(ns).Get(ctx, "stale-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Spec.NodeName != target {
			return fmt.Errorf("pod %s/stale-0: expected on %s, seen %s", ns, target, podState(p))
		}
		firstUID = p.UID
		vas, err := volumeAttachmentsFor(ctx, ns)
		if err != nil {
			return err
		}
		for _, va := range vas {
			if va.Spec.NodeName == target && !va.Status.Attached && va.Status.AttachError != nil {
				return checkAttachError(t, &va, codeResourceExhausted)
			}
		}
		return fmt.Errorf("no failing VolumeAttachment on %s yet", target)
	})
	attachFailed := time.Now()
	// The kubelet waits ~2 min for the attach, then re-reads NodeGetInfo and
	// fails the pod.
	eventually(t, 3*time.Minute+slack, fmt.Sprintf("kubelet lowers CSINode %s and fails pod stale-0 (VolumeAttachmentLimitExceeded)", target), func() error {
		c, _, err := csiNodeCount(ctx, target)
		if err != nil {
			return err
		}
		want := truthCount(t, target)
		if c == nil || *c != want {
			return fmt.Errorf("CSINode %s: expected count %d after the rejection, seen %s", target, want, fmtCount(c))
		}
		mu.Lock()
		r := rejected
		mu.Unlock()
		if r == nil {
			p, err := env.cs.CoreV1().Pods(ns).Get(ctx, "stale-0", metav1.GetOptions{})
			if err != nil {
				return err
			}
			return fmt.Errorf("pod %s/stale-0: expected Failed with reason VolumeAttachmentLimitExceeded, seen %s", ns, podState(p))
		}
		if r.UID != firstUID || r.Spec.NodeName != target {
			failf(t, "pod %s/stale-0 (uid %s on %s) rejected, expected the first one (uid %s) on %s", ns, r.UID, r.Spec.NodeName, firstUID, target)
		}
		return nil
	})
	rejectedAt := time.Now()
	defer func() {
		// Real component timings, for docs/figures.md: how long the kubelet waits for the attach
		// before it fails the pod, and how long the StatefulSet takes to run it elsewhere.
		t.Logf("S4 timings: errorCode 8 seen %s after the StatefulSet was created; pod failed (VolumeAttachmentLimitExceeded) and CSINode lowered %s later; recreated pod Running %s after that",
			attachFailed.Sub(created).Round(100*time.Millisecond), rejectedAt.Sub(attachFailed).Round(100*time.Millisecond), time.Since(rejectedAt).Round(100*time.Millisecond))
	}()
	eventually(t, runDeadline, "the recreated stale-0 runs on a node with room", func() error {
		p, err := env.cs.CoreV1().Pods(ns).Get(ctx, "stale-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.UID == firstUID || !isRunning(p) || p.Spec.NodeName == target {
			return fmt.Errorf("pod %s/stale-0: expected a new pod Running off %s, seen %s", ns, target, podState(p))
		}
		return nil
	})
}

// setPeriod sets the CSIDriver's nodeAllocatableUpdatePeriodSeconds and
// restores it when the test ends.
func setPeriod(t *testing.T, seconds int64) {
	t.Helper()
	patch := func(s int64) error {
		body := fmt.Sprintf(`{"spec":{"nodeAllocatableUpdatePeriodSeconds":%d}}`, s)
		_, err := env.cs.StorageV1().CSIDrivers().Patch(context.Background(), driverName, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	old := int64(env.period / time.Second)
	if err := patch(seconds); err != nil {
		failf(t, "set CSIDriver %s period to %d s: %v", driverName, seconds, err)
	}
	t.Cleanup(func() {
		if err := patch(old); err != nil {
			t.Errorf("restore CSIDriver period %d s: %v", old, err)
		}
	})
}

// S12: a scripted minute of quota and out-of-band changes under a steady
// stream of pods. It reports attach failures caused by stale capacity
// (errorCode 8) and CSINode writes, the numbers the policy comparison uses;
// it asserts the cloud never went over a limit and every pod ends Running
// once the cloud is back to its seeded shape.
func TestS12Churn(t *testing.T) {
	ctx := testCtx(t)
	ns := namespace(t)
	nodes := e2eNodes(t)
	start, err := env.cloud.ListEvents(ctx, 0)
	if err != nil {
		failf(t, "events: %v", err)
	}
	var since uint64
	if len(start) > 0 {
		since = start[len(start)-1].Revision
	}

	// The capacity plot of the run: written even when the scenario fails.
	plot := startCapacityPlot(t, "S12 churn")
	defer plot()

	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	csiWrites, exhausted := 0, map[string]bool{}
	csiW, err := env.cs.StorageV1().CSINodes().Watch(watchCtx, metav1.ListOptions{})
	if err != nil {
		failf(t, "watch CSINodes: %v", err)
	}
	vaW, err := env.cs.StorageV1().VolumeAttachments().Watch(watchCtx, metav1.ListOptions{})
	if err != nil {
		failf(t, "watch VolumeAttachments: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case ev, ok := <-csiW.ResultChan():
				if !ok {
					return
				}
				if ev.Type == "MODIFIED" {
					csiWrites++
				}
			case ev, ok := <-vaW.ResultChan():
				if !ok {
					return
				}
				if va, isVA := ev.Object.(*storagev1.VolumeAttachment); isVA && va.Status.AttachError != nil &&
					va.Status.AttachError.ErrorCode != nil && *va.Status.AttachError.ErrorCode == codeResourceExhausted {
					exhausted[va.Name] = true
				}
			case <-watchCtx.Done():
				return
			}
		}
	}()

	// The script: out-of-band slots and the quota move every 6 s, a pod
	// arrives every 3 s and the oldest leaves once 8 exist.
	q, err := env.cloud.GetQuotas(ctx)
	if err != nil {
		failf(t, "quotas: %v", err)
	}
	baseQuota := q.Attachments.Limit
	seeded := map[string]int{}
	for _, n := range nodes {
		in, err := env.cloud.GetInstance(ctx, n.Name)
		if err != nil {
			failf(t, "instance %s: %v", n.Name, err)
		}
		oob := in.OutOfBandSlots
		seeded[n.Name] = oob
		patchInstance(t, n.Name, cloud.InstancePatch{OutOfBandSlots: &oob}) // restores at the end
	}
	setAttachmentQuota(t, baseQuota)
	oobScript := []int{2, 0, 3, 1, 2, 1, 0, 2, 1, 1}
	quotaScript := []int64{6, 12, 8, 40, 7, 10, 40, 9, 11, 40}
	var created []string
	tick := time.NewTicker(3 * time.Second)
	defer tick.Stop()
	for i := range 20 {
		<-tick.C
		if i%2 == 0 {
			step := i / 2
			n := nodes[step%len(nodes)].Name
			oob := oobScript[step%len(oobScript)]
			if _, err := env.cloud.PatchInstance(ctx, n, cloud.InstancePatch{OutOfBandSlots: &oob}); err != nil {
				failf(t, "churn: patch %s: %v", n, err)
			}
			quota := min(quotaScript[step%len(quotaScript)], baseQuota)
			if _, err := env.cloud.PatchQuotas(ctx, cloud.QuotasPatch{Attachments: &quota}); err != nil {
				failf(t, "churn: quota: %v", err)
			}
		}
		name := "c" + strconv.Itoa(i)
		podWithClaim(t, ns, name, "")
		created = append(created, name)
		if len(created) > 8 {
			old := created[0]
			created = created[1:]
			if err := env.cs.CoreV1().Pods(ns).Delete(ctx, old, metav1.DeleteOptions{}); err != nil {
				failf(t, "churn: delete pod %s: %v", old, err)
			}
		}
	}
	// Back to the starting shape: every remaining pod must run.
	restoreAll(t, seeded, baseQuota)
	for _, name := range created {
		waitPodRunning(t, ns, name, runDeadline+cfg.RiseAllowance+slack)
	}
	stopWatch()
	<-done
	events, err := env.cloud.ListEvents(ctx, since)
	if err != nil {
		failf(t, "events: %v", err)
	}
	for _, e := range events {
		// The events where an attach takes a slot (at VolumeAttaching, asynchronously; the
		// VolumeAttached that ends it): neither may ever exceed the limit. An InstancePatched
		// that lowers the limit under the held slots is the churn itself, not an over-attach.
		if takesSlot(e.Type) && e.Attached != nil && e.Limit != nil && *e.Attached > *e.Limit {
			failf(t, "cloud event %d (%s): instance %s holds %d attachments over its limit %d", e.Seq, e.Type, e.InstanceID, *e.Attached, *e.Limit)
		}
	}
	t.Logf("S12 churn: %d pods, %d CSINode writes, %d VolumeAttachments failed with RESOURCE_EXHAUSTED (stale capacity), %d cloud events",
		20, csiWrites, len(exhausted), len(events))
}

// takesSlot reports whether a cloud event of type typ is one where an attach takes a slot
// (docs/attach.md): the check "never over the limit" applies to these, not to an admin's
// InstancePatched that lowers the limit under the slots already held.
func takesSlot(typ string) bool { return typ == "VolumeAttaching" || typ == "VolumeAttached" }

// restoreAll puts the seeded out-of-band slots back at once (the deferred
// restores of patchInstance run only at the end of the test).
func restoreAll(t *testing.T, oob map[string]int, quota int64) {
	t.Helper()
	ctx := testCtx(t)
	if _, err := env.cloud.PatchQuotas(ctx, cloud.QuotasPatch{Attachments: &quota}); err != nil {
		failf(t, "restore quota: %v", err)
	}
	for node, slots := range oob {
		if _, err := env.cloud.PatchInstance(ctx, node, cloud.InstancePatch{OutOfBandSlots: &slots}); err != nil {
			failf(t, "restore %s: %v", node, err)
		}
	}
}

// startCapacityPlot starts watching CSINode and sampling the nodes and the
// cloud; the returned function stops and writes capacityplot.PlotFile and
// capacityplot.SummaryFile into the component log folder (a new temp folder
// without one) and prints where.
func startCapacityPlot(t *testing.T, title string) func() {
	t.Helper()
	rec, err := capacityplot.NewRecorder(env.cs, env.cloud, capacityplot.Options{Driver: driverName, Interval: 2 * time.Second, Title: title, PluginURLs: env.pluginURLs})
	if err != nil {
		failf(t, "capacity plot: %v", err)
	}
	if err := rec.Start(testCtx(t)); err != nil {
		failf(t, "capacity plot: %v", err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r := rec.Stop(ctx)
		if len(env.pluginURLs) > 0 && !slices.ContainsFunc(r.Samples, func(s capacityplot.Sample) bool { return s.Plugin != nil }) {
			t.Errorf("capacity plot: node plugin URLs %v are known but no sample read a reported value from /debug/capacity", env.pluginURLs)
		}
		dir := env.logDir
		if dir == "" {
			if dir, err = os.MkdirTemp("", "fakecloud-e2e-plot-"); err != nil {
				t.Errorf("capacity plot: %v", err)
				return
			}
		}
		html, summary, err := capacityplot.WriteFiles(dir, r)
		if err != nil {
			t.Errorf("capacity plot: %v", err)
			return
		}
		var writes []string
		for _, s := range r.Stats() {
			writes = append(writes, fmt.Sprintf("%s %d writes (%d count changes, lag median %s max %s)", s.Node, s.Writes, s.CountChanges, s.LagMedian.Round(100*time.Millisecond), s.LagMax.Round(100*time.Millisecond)))
		}
		t.Logf("%s: %s", title, strings.Join(writes, "; "))
		fmt.Printf("e2e: %s capacity plot: %s (summary %s)\n", title, html, summary)
	}
}
