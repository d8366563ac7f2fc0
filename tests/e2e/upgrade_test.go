package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/fakecloud/fakecloud-csi/tests/e2e/capacityplot"
	"github.com/fakecloud/fakecloud-csi/tests/e2e/localcluster"
)

// upgradeVersion is what the upgraded node plugin of S13 reports in
// GetPluginInfo.
const upgradeVersion = "v0.0.0-e2e-upgrade"

// reregisterDeadline bounds how long a node's CSINode entry may be missing
// when its node plugin's DaemonSet pod is replaced (S13 phase B).
const reregisterDeadline = 60 * time.Second

// S13: roll the node plugin to a new version with volumes attached, node by
// node, first as a driver container upgrade (the registrar keeps its
// socket: CSINode keeps the driver and its count throughout), then as a
// DaemonSet pod replacement (the registrar removes its socket on SIGTERM,
// the kubelet deregisters the plugin and its CSINode entry goes until the
// new pod registers; that gap is what a real rolling update of the
// DaemonSet does, so it is bounded and measured, not forbidden). Throughout,
// no pod fails or is rejected, the pods keep running without restarts, every
// VolumeAttachment stays attached and the cloud's attachments stay the
// same; afterwards a new pod with a new volume runs on every node.
func TestS13NodePluginUpgrade(t *testing.T) {
	ctx := testCtx(t)
	ns := namespace(t)
	nodes := e2eNodes(t)
	lc := env.local
	var original, upgraded string
	if lc != nil {
		original = lc.DriverBinary()
		buildStart := time.Now()
		var err error
		upgraded, err = lc.BuildDriver(ctx, upgradeVersion)
		if err != nil {
			failf(t, "build the upgraded driver: %v", err)
		}
		t.Logf("built %s (%s) in %s", upgraded, upgradeVersion, time.Since(buildStart).Round(100*time.Millisecond))
	}

	// Nodes whose plugin is not back on the original binary; the cleanup,
	// which runs before the namespace's (the kubelets need registered
	// plugins to unmount), restores them for the scenarios after this one.
	var dirtyMu sync.Mutex
	dirty := map[string]bool{}
	t.Cleanup(func() {
		dirtyMu.Lock()
		defer dirtyMu.Unlock()
		for _, node := range slices.Sorted(maps.Keys(dirty)) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			if err := lc.RestartNodePlugin(ctx, node, localcluster.NodePluginRestart{Binary: original}); err != nil {
				t.Errorf("restore the node plugin of %s: %v (component logs: %s)", node, err, env.logDir)
			}
			cancel()
		}
	})
	restart := func(node string, r localcluster.NodePluginRestart) time.Duration {
		t.Helper()
		dirtyMu.Lock()
		dirty[node] = true
		dirtyMu.Unlock()
		start := time.Now()
		if err := lc.RestartNodePlugin(ctx, node, r); err != nil {
			failf(t, "restart the node plugin of %s: %v", node, err)
		}
		if r.Binary == original {
			dirtyMu.Lock()
			delete(dirty, node)
			dirtyMu.Unlock()
		}
		return time.Since(start)
	}

	// Setup: several volumes on every node, below its count, so that one
	// more pod per node fits after the roll.
	counts := map[string]int32{}
	var held []string
	for _, n := range nodes {
		counts[n.Name] = nodeCount(t, n.Name)
		for j := range max(1, min(3, int(counts[n.Name])-1)) {
			name := fmt.Sprintf("%s-v%d", n.Name, j)
			podWithClaim(t, ns, name, n.Name)
			held = append(held, name)
		}
	}
	uids := map[string]types.UID{}
	for _, name := range held {
		uids[name] = waitPodRunning(t, ns, name, runDeadline).UID
	}
	vas, err := volumeAttachmentsFor(ctx, ns)
	if err != nil {
		failf(t, "VolumeAttachments of %s: %v", ns, err)
	}
	vaNames := map[string]bool{}
	for _, va := range vas {
		if !va.Status.Attached {
			failf(t, "VolumeAttachment %s: expected attached before the roll, seen %+v", va.Name, va.Status)
		}
		vaNames[va.Name] = true
	}
	if len(vaNames) != len(held) {
		failf(t, "expected %d VolumeAttachments in %s before the roll, seen %d", len(held), ns, len(vaNames))
	}
	cloudBefore := cloudAttachments(t)
	oldVersion := map[string]string{}
	for _, n := range nodes {
		v, err := pluginVersion(ctx, n.Name)
		if err != nil {
			failf(t, "GetPluginInfo of the node plugin of %s: %v", n.Name, err)
		}
		if v == upgradeVersion {
			failf(t, "node plugin of %s: reports %s before the upgrade", n.Name, v)
		}
		oldVersion[n.Name] = v
	}
	w := startRollWatch(t, ns, uids, vaNames)
	t.Logf("setup: %d pods with %d volumes on %d nodes, cloud holds %d attachments", len(held), len(vaNames), len(nodes), len(cloudBefore))

	// Phase A: the driver container of each node plugin pod is upgraded;
	// node-driver-registrar keeps its socket and the kubelet its
	// registration. Only the harness can swap one container's binary in
	// place; on a real cluster a new image replaces the whole pod, which is
	// phase B.
	if lc == nil {
		t.Log("phase A (driver container upgrade in place) needs the local cluster's harness; on this cluster the DaemonSet roll (phase B) is the upgrade")
	} else {
		markA := len(w.csinodes.Result().Changes)
		for _, n := range nodes {
			took := restart(n.Name, localcluster.NodePluginRestart{Binary: upgraded})
			if v, err := pluginVersion(ctx, n.Name); err != nil || v != upgradeVersion {
				failf(t, "node plugin of %s after the upgrade: expected GetPluginInfo vendor_version %s, seen %q (err %v)", n.Name, upgradeVersion, v, err)
			}
			dc, err := pluginDebugCapacity(ctx, n.Name)
			if err != nil {
				failf(t, "node plugin of %s after the upgrade: /debug/capacity: %v", n.Name, err)
			}
			if dc.Mode == "static" || dc.Reported != int64(counts[n.Name]) {
				failf(t, "node plugin of %s after the upgrade: expected the dynamic policy reporting %d, /debug/capacity says mode %q reported %d", n.Name, counts[n.Name], dc.Mode, dc.Reported)
			}
			// The kubelet's periodic CSINode update must have asked the new
			// process, so that an unchanged count means it answered the same.
			waited := time.Now()
			eventually(t, countDeadline(false), fmt.Sprintf("the kubelet of %s calls NodeGetInfo on the upgraded plugin", n.Name), func() error {
				return nodeGetInfoServed(ctx, n.Name)
			})
			if c := nodeCount(t, n.Name); c != counts[n.Name] {
				failf(t, "CSINode %s after the upgrade: expected count %d, seen %d", n.Name, counts[n.Name], c)
			}
			w.check(t)
			t.Logf("phase A %s: upgraded in %s; the kubelet asked it after %s more", n.Name, took.Round(100*time.Millisecond), time.Since(waited).Round(100*time.Millisecond))
		}
		for _, c := range w.csinodes.Result().Changes[markA:] {
			failf(t, "phase A (driver container upgrade, registrar kept): CSINode %s changed at %s from %s to %s; the entry and its count must stay",
				c.Node, c.At.Format(time.TimeOnly), fmtCount64(c.Old), fmtCount64(c.New))
		}
	}

	// Phase B: the DaemonSet replaces each node plugin pod: the registrar
	// removes its socket, the kubelet deregisters the plugin and removes its
	// CSINode entry, the new pod (here the previous version again: a
	// rollback, which also restores the normal build) registers anew.
	if lc == nil {
		rollDaemonSet(t, w, nodes, counts, oldVersion)
	} else {
		for _, n := range nodes {
			mark := len(w.csinodes.Result().Changes)
			start := time.Now()
			took := restart(n.Name, localcluster.NodePluginRestart{Binary: original, Reregister: true})
			gone, back := waitReregistered(t, w, n.Name, mark, counts[n.Name], reregisterDeadline-time.Since(start))
			waitCount(t, n.Name, counts[n.Name], 10*time.Second)
			if v, err := pluginVersion(ctx, n.Name); err != nil || v != oldVersion[n.Name] {
				failf(t, "node plugin of %s after the pod replacement: expected vendor_version %s, seen %q (err %v)", n.Name, oldVersion[n.Name], v, err)
			}
			w.check(t)
			t.Logf("phase B %s: replaced in %s; CSINode entry missing for %s (removed %s after the start, back with count %d)",
				n.Name, took.Round(100*time.Millisecond), back.At.Sub(gone.At).Round(100*time.Millisecond), gone.At.Sub(start).Round(100*time.Millisecond), *back.New)
		}
	}

	// Nothing lost or duplicated, in the cluster or in the cloud.
	w.check(t)
	if after := cloudAttachments(t); !maps.Equal(after, cloudBefore) {
		failf(t, "cloud attachments changed by the roll:\nbefore %v\nafter  %v", cloudBefore, after)
	}
	vas, err = volumeAttachmentsFor(ctx, ns)
	if err != nil {
		failf(t, "VolumeAttachments of %s: %v", ns, err)
	}
	for _, va := range vas {
		if !vaNames[va.Name] || !va.Status.Attached {
			failf(t, "VolumeAttachment %s after the roll: expected one of the %d attached before, seen attached=%v", va.Name, len(vaNames), va.Status.Attached)
		}
	}
	if len(vas) != len(vaNames) {
		failf(t, "expected %d VolumeAttachments in %s after the roll, seen %d", len(vaNames), ns, len(vas))
	}

	// The rolled plugins work: one more pod with a new volume on every node.
	for _, n := range nodes {
		podWithClaim(t, ns, "after-"+n.Name, n.Name)
	}
	for _, n := range nodes {
		waitPodRunning(t, ns, "after-"+n.Name, runDeadline)
	}
	w.check(t)
}

// waitReregistered waits up to deadline until the CSINode watch of w, from
// change number mark on, saw node's driver entry removed (the kubelet
// deregistered the replaced plugin) and back with count, and returns those two
// changes. An entry back with another count fails t.
func waitReregistered(t *testing.T, w *rollWatch, node string, mark int, count int32, deadline time.Duration) (gone, back *capacityplot.CountChange) {
	t.Helper()
	eventually(t, deadline, fmt.Sprintf("CSINode %s: the driver entry removed (deregistration) and back with count %d", node, count), func() error {
		gone, back = nil, nil
		for _, c := range w.csinodes.Result().Changes[mark:] {
			if c.Node != node {
				continue
			}
			switch {
			case c.New == nil && gone == nil:
				gone = &c
			case c.New != nil && *c.New != int64(count):
				failf(t, "CSINode %s came back with count %d at %s, expected %d", node, *c.New, c.At.Format(time.TimeOnly), count)
			case c.New != nil && gone != nil && back == nil:
				back = &c
			}
		}
		if gone == nil || back == nil {
			return fmt.Errorf("CSINode %s: expected the driver entry removed (deregistration) and added back, watch saw removed=%v back=%v", node, gone != nil, back != nil)
		}
		return nil
	})
	return gone, back
}

// rollDaemonSet is phase B of S13 on a real cluster: a rolling update of the
// node plugin DaemonSet (a new pod template, as an image upgrade makes; here
// a restart annotation, so the version stays) that the DaemonSet controller
// carries out node by node (maxUnavailable 1). Each node's CSINode entry may
// go while its pod is replaced, for at most reregisterDeadline, and must come
// back with its count; the roll completes within one deadline per node.
func rollDaemonSet(t *testing.T, w *rollWatch, nodes []corev1.Node, counts map[string]int32, version map[string]string) {
	t.Helper()
	ctx := testCtx(t)
	dsClient := env.cs.AppsV1().DaemonSets(pluginNamespace)
	mark := len(w.csinodes.Result().Changes)
	start := time.Now()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"fakecloud.dev/e2e-rolled-at":%q}}}}}`, start.UTC().Format(time.RFC3339Nano))
	ds, err := dsClient.Patch(ctx, pluginDaemonSet, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		failf(t, "roll DaemonSet %s/%s: %v", pluginNamespace, pluginDaemonSet, err)
	}
	gen := ds.Generation
	eventually(t, time.Duration(len(nodes))*reregisterDeadline, fmt.Sprintf("DaemonSet %s/%s rolled out (generation %d)", pluginNamespace, pluginDaemonSet, gen), func() error {
		ds, err := dsClient.Get(ctx, pluginDaemonSet, metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := ds.Status
		if st.ObservedGeneration < gen || st.UpdatedNumberScheduled != st.DesiredNumberScheduled || st.NumberAvailable != st.DesiredNumberScheduled || st.NumberUnavailable != 0 {
			return fmt.Errorf("DaemonSet %s: observed generation %d of %d, %d updated, %d available of %d desired", pluginDaemonSet, st.ObservedGeneration, gen, st.UpdatedNumberScheduled, st.NumberAvailable, st.DesiredNumberScheduled)
		}
		return nil
	})
	rolled := time.Since(start)
	for _, n := range nodes {
		gone, back := waitReregistered(t, w, n.Name, mark, counts[n.Name], reregisterDeadline)
		if gap := back.At.Sub(gone.At); gap > reregisterDeadline {
			failf(t, "phase B: CSINode %s entry missing for %s, more than %s", n.Name, gap, reregisterDeadline)
		}
		waitCount(t, n.Name, counts[n.Name], 10*time.Second)
		if v, err := pluginVersion(ctx, n.Name); err != nil || v != version[n.Name] {
			failf(t, "node plugin of %s after the roll: expected version %s, seen %q (err %v)", n.Name, version[n.Name], v, err)
		}
		t.Logf("phase B %s: CSINode entry missing for %s (removed %s after the roll started, back with count %d)",
			n.Name, back.At.Sub(gone.At).Round(100*time.Millisecond), gone.At.Sub(start).Round(100*time.Millisecond), *back.New)
	}
	w.check(t)
	t.Logf("phase B: DaemonSet %s rolled over %d nodes in %s", pluginDaemonSet, len(nodes), rolled.Round(100*time.Millisecond))
}

// pluginDaemonSet is deploy/kind's node plugin DaemonSet (in pluginNamespace).
const pluginDaemonSet = "fakecloud-csi-node"

// replaceNodePlugin gives node a new node plugin process that registers anew
// with the kubelet: through the harness on the local cluster, else by deleting
// the DaemonSet's pod on node and waiting until its replacement is ready.
func replaceNodePlugin(ctx context.Context, node string) error {
	if env.local != nil {
		return env.local.RestartNodePlugin(ctx, node, localcluster.NodePluginRestart{Reregister: true})
	}
	old, err := nodePluginPod(ctx, node)
	if err != nil {
		return err
	}
	if err := env.cs.CoreV1().Pods(pluginNamespace).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete node plugin pod %s/%s: %w", pluginNamespace, old.Name, err)
	}
	return waitFor(ctx, reregisterDeadline, func() error {
		p, err := nodePluginPod(ctx, node)
		if err != nil {
			return err
		}
		if p.UID == old.UID {
			return fmt.Errorf("node plugin pod %s on %s not replaced yet", old.Name, node)
		}
		return nil
	})
}

// S14: the node plugin's start-up cluster check (KEP-4876 needs the
// CSIDriver's nodeAllocatableUpdatePeriodSeconds, or the kubelet never
// refreshes CSINode). Without the period a restarted node plugin falls back
// to the static count: /debug/capacity mode "static", /debug/cluster
// supported false, fakecloud_csi_cluster_dynamic_capacity_supported 0 and a Warning Event
// DynamicCapacityUnsupported regarding the CSIDriver. With the period back
// and another restart it runs the dynamic policy again (supported 1). Then
// the canary switch: the Node label fakecloud.dev/dynamic-capacity=false
// makes the restarted plugin static (no supported gauge: it decided
// nothing), and without the label it is dynamic again.
func TestS14ClusterCheckFallback(t *testing.T) {
	ctx := testCtx(t)
	node := e2eNodes(t)[0].Name
	in, err := env.cloud.GetInstance(ctx, node)
	if err != nil {
		failf(t, "instance %s: %v", node, err)
	}
	// With nothing attached the policy's count and the static count (read
	// once at start) are both limit − out-of-band slots.
	if len(in.Attachments) != 0 {
		failf(t, "instance %s: expected no attachments at the start, seen %v", node, in.Attachments)
	}
	count := int32(max(1, in.AttachLimit-in.OutOfBandSlots))
	waitCount(t, node, count, countDeadline(false))
	// The plugin's pod is replaced (same binary): the cluster check runs at
	// start, and the kubelet registers the new plugin and asks NodeGetInfo,
	// which the static count needs for its one lookup (without the period
	// the kubelet asks nothing else).
	restart := func(what string) {
		t.Helper()
		start := time.Now()
		if err := replaceNodePlugin(ctx, node); err != nil {
			failf(t, "restart the node plugin of %s (%s): %v", node, what, err)
		}
		t.Logf("restarted the node plugin of %s (%s) in %s", node, what, time.Since(start).Round(100*time.Millisecond))
	}
	// wantSupported -1: the plugin exports no such gauge (it did not want
	// dynamic capacity, so the check's verdict decided nothing).
	checkMode := func(wantStatic bool, wantSupported float64, wantReason string) {
		t.Helper()
		eventually(t, countDeadline(false), fmt.Sprintf("node plugin of %s static=%v reporting %d", node, wantStatic, count), func() error {
			dc, err := pluginDebugCapacity(ctx, node)
			if err != nil {
				return err
			}
			if (dc.Mode == "static") != wantStatic || dc.Reported != int64(count) || !strings.Contains(dc.Reason, wantReason) {
				return fmt.Errorf("node plugin of %s: expected static=%v reporting %d (reason %q), /debug/capacity says mode %q reported %d reason %q",
					node, wantStatic, count, wantReason, dc.Mode, dc.Reported, dc.Reason)
			}
			return nil
		})
		got, err := pluginGauge(ctx, node, "fakecloud_csi_cluster_dynamic_capacity_supported")
		cc, ccErr := pluginDebugCluster(ctx, node)
		if wantSupported == -1 {
			if err == nil {
				failf(t, "node plugin of %s: expected no fakecloud_csi_cluster_dynamic_capacity_supported, seen %v", node, got)
			}
			if ccErr == nil || !strings.Contains(ccErr.Error(), "404") {
				failf(t, "node plugin of %s: expected /debug/cluster 404 (no check), seen %+v (err %v)", node, cc, ccErr)
			}
			return
		}
		if err != nil || got != wantSupported {
			failf(t, "node plugin of %s: expected fakecloud_csi_cluster_dynamic_capacity_supported %v, seen %v (err %v)", node, wantSupported, got, err)
		}
		want := wantSupported == 1
		if ccErr != nil || cc.Supported != want || cc.SupportedAtStart != want || (!want && len(cc.Problems) == 0) {
			failf(t, "node plugin of %s: expected /debug/cluster supported=%v at start and now (with problems when not), seen %+v (err %v)", node, want, cc, ccErr)
		}
	}
	checkMode(false, 1, "")

	// Registered before the period is cleared, so it runs after the period
	// is restored: a plugin left static is restarted into the dynamic policy.
	t.Cleanup(func() {
		dc, err := pluginDebugCapacity(context.Background(), node)
		if err == nil && dc.Mode != "static" {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := replaceNodePlugin(ctx, node); err != nil {
			t.Errorf("restore the node plugin of %s: %v (component logs: %s)", node, err, env.logDir)
		}
	})
	restorePeriod := clearPeriod(t)
	since := time.Now()
	restart("period cleared")
	checkMode(true, 0, "nodeAllocatableUpdatePeriodSeconds")
	eventually(t, 30*time.Second, fmt.Sprintf("Warning Event %s regarding CSIDriver %s from node %s", "DynamicCapacityUnsupported", driverName, node), func() error {
		return checkUnsupportedEvent(ctx, node, since)
	})
	// The replaced plugin's entry is gone until the kubelet has registered
	// it again (about a second, S13); then it carries the static count.
	waitCount(t, node, count, reregisterDeadline)

	restorePeriod()
	restart("period restored")
	checkMode(false, 1, "")
	waitCount(t, node, count, countDeadline(false))

	// The per-node switch of docs/upgrade.md ("Canary"): the Node label
	// overrides --dynamic-capacity at the plugin's next start. Its cleanup
	// runs before the restart cleanup above (LIFO).
	setModeLabel := func(value string) {
		t.Helper()
		v := "null"
		if value != "" {
			v = `"` + value + `"`
		}
		body := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, dynamicCapacityLabel, v)
		if _, err := env.cs.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
			failf(t, "label node %s %s=%s: %v", node, dynamicCapacityLabel, value, err)
		}
	}
	t.Cleanup(func() { setModeLabel("") })
	setModeLabel("false")
	restart("node label false")
	checkMode(true, -1, "node label "+dynamicCapacityLabel+"=false")
	// The replaced plugin's entry is gone until the kubelet has registered
	// it again (about a second, S13); then it carries the static count.
	waitCount(t, node, count, reregisterDeadline)
	setModeLabel("")
	restart("node label removed")
	checkMode(false, 1, "")
	waitCount(t, node, count, countDeadline(false))
}

// dynamicCapacityLabel is the Node label that switches one node's plugin
// between dynamic capacity and the static count (pkg/csi
// DynamicCapacityNodeLabel).
const dynamicCapacityLabel = "fakecloud.dev/dynamic-capacity"

// clearPeriod removes the CSIDriver's nodeAllocatableUpdatePeriodSeconds
// (the field is mutable) and returns a function that puts env.period back;
// the cleanup puts it back too.
func clearPeriod(t *testing.T) func() {
	t.Helper()
	patch := func(body string) error {
		_, err := env.cs.StorageV1().CSIDrivers().Patch(context.Background(), driverName, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	if err := patch(`{"spec":{"nodeAllocatableUpdatePeriodSeconds":null}}`); err != nil {
		failf(t, "clear CSIDriver %s nodeAllocatableUpdatePeriodSeconds: %v", driverName, err)
	}
	restore := func() error {
		return patch(fmt.Sprintf(`{"spec":{"nodeAllocatableUpdatePeriodSeconds":%d}}`, int64(env.period/time.Second)))
	}
	t.Cleanup(func() {
		if err := restore(); err != nil {
			t.Errorf("restore CSIDriver period %s: %v", env.period, err)
		}
	})
	return func() {
		t.Helper()
		if err := restore(); err != nil {
			failf(t, "restore CSIDriver period %s: %v", env.period, err)
		}
	}
}

// checkUnsupportedEvent is nil when namespace "default" holds a Warning
// Event (events.k8s.io/v1) with reason DynamicCapacityUnsupported regarding
// the CSIDriver, from node's plugin, newer than since.
func checkUnsupportedEvent(ctx context.Context, node string, since time.Time) error {
	list, err := env.cs.EventsV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list events in %s: %w", metav1.NamespaceDefault, err)
	}
	var seen []string
	for _, ev := range list.Items {
		if ev.Reason != "DynamicCapacityUnsupported" {
			continue
		}
		at := ev.EventTime.Time
		if ev.Series != nil {
			at = ev.Series.LastObservedTime.Time
		}
		seen = append(seen, fmt.Sprintf("%s %s regarding %s/%s at %s: %q", ev.Name, ev.Type, ev.Regarding.Kind, ev.Regarding.Name, at.Format(time.TimeOnly), ev.Note))
		// One second of slack for the MicroTime round trip.
		if ev.Type == corev1.EventTypeWarning && ev.Regarding.Kind == "CSIDriver" && ev.Regarding.Name == driverName &&
			strings.Contains(ev.Note, node) && !at.Before(since.Add(-time.Second)) {
			return nil
		}
	}
	return fmt.Errorf("no Warning Event DynamicCapacityUnsupported regarding CSIDriver %s from node %s since %s; seen: %v", driverName, node, since.Format(time.TimeOnly), seen)
}

// rollWatch records from informers what a rolling update of the node
// plugin must not do: change a CSINode (capacityplot.Watcher keeps every
// count change and entry removal), fail or reject a pod of the namespace,
// replace, restart or stop one of the pods that ran before, or detach or
// delete one of the VolumeAttachments that were attached.
type rollWatch struct {
	csinodes *capacityplot.Watcher

	mu         sync.Mutex
	violations []string
}

// startRollWatch starts the informers and returns once their caches have
// synced; they stop with the test.
func startRollWatch(t *testing.T, ns string, pods map[string]types.UID, vas map[string]bool) *rollWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &rollWatch{csinodes: capacityplot.NewWatcher(driverName, nil)}
	nsf := informers.NewSharedInformerFactoryWithOptions(env.cs, 0, informers.WithNamespace(ns))
	f := informers.NewSharedInformerFactory(env.cs, 0)
	t.Cleanup(func() { cancel(); nsf.Shutdown(); f.Shutdown() })
	onPod := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			w.checkPod(p, pods)
		}
	}
	onVA := func(obj any) {
		if va, ok := obj.(*storagev1.VolumeAttachment); ok && vas[va.Name] {
			if !va.Status.Attached || va.Status.DetachError != nil || va.DeletionTimestamp != nil {
				w.add("VolumeAttachment %s: expected attached, seen attached=%v detachError=%v deleting=%v", va.Name, va.Status.Attached, va.Status.DetachError, va.DeletionTimestamp != nil)
			}
		}
	}
	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{nsf.Core().V1().Pods().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: onPod, UpdateFunc: func(_, obj any) { onPod(obj) },
			DeleteFunc: func(obj any) {
				if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				if p, ok := obj.(*corev1.Pod); ok && pods[p.Name] != "" {
					w.add("pod %s/%s was deleted", p.Namespace, p.Name)
				}
			},
		}},
		{f.Storage().V1().VolumeAttachments().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: onVA, UpdateFunc: func(_, obj any) { onVA(obj) },
			DeleteFunc: func(obj any) {
				if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				if va, ok := obj.(*storagev1.VolumeAttachment); ok && vas[va.Name] {
					w.add("VolumeAttachment %s was deleted", va.Name)
				}
			},
		}},
		{f.Storage().V1().CSINodes().Informer(), w.csinodes.Handler()},
	}
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			failf(t, "watch: %v", err)
		}
	}
	nsf.Start(ctx.Done())
	f.Start(ctx.Done())
	syncCtx, syncCancel := context.WithTimeout(ctx, time.Minute)
	defer syncCancel()
	for _, h := range handlers {
		if !cache.WaitForCacheSync(syncCtx.Done(), h.inf.HasSynced) {
			failf(t, "watch: informer caches did not sync within a minute")
		}
	}
	w.check(t)
	return w
}

// checkPod records a failed or rejected pod, and a pod of before (name to
// UID) that is not the same pod Running without container restarts.
func (w *rollWatch) checkPod(p *corev1.Pod, before map[string]types.UID) {
	if p.Status.Phase == corev1.PodFailed || p.Status.Reason != "" {
		w.add("pod %s/%s failed or was rejected: %s %q", p.Namespace, p.Name, podState(p), p.Status.Message)
	}
	uid, held := before[p.Name]
	if !held {
		return
	}
	if p.UID != uid || !isRunning(p) || p.DeletionTimestamp != nil {
		w.add("pod %s/%s: expected uid %s Running, seen uid %s %s deleting=%v", p.Namespace, p.Name, uid, p.UID, podState(p), p.DeletionTimestamp != nil)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.RestartCount > 0 {
			w.add("pod %s/%s: container %s restarted %d times", p.Namespace, p.Name, cs.Name, cs.RestartCount)
		}
	}
}

func (w *rollWatch) add(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.violations = append(w.violations, time.Now().Format(time.TimeOnly)+" "+fmt.Sprintf(format, args...))
}

// check fails t with every violation seen so far.
func (w *rollWatch) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	v := slices.Clone(w.violations)
	w.mu.Unlock()
	if len(v) > 0 {
		failf(t, "during the node plugin roll:\n%s", strings.Join(v, "\n"))
	}
}

func fmtCount64(c *int64) string {
	if c == nil {
		return "<no entry or allocatable>"
	}
	return fmt.Sprint(*c)
}

// cloudAttachments is the cloud's attachment set, volume ID to instance ID,
// from the instances' attachment lists. It fails t when a volume is on two
// instances or a volume's attachedTo disagrees with the instances.
func cloudAttachments(t *testing.T) map[string]string {
	t.Helper()
	ctx := testCtx(t)
	instances, err := env.cloud.ListInstances(ctx)
	if err != nil {
		failf(t, "cloud instances: %v", err)
	}
	set := map[string]string{}
	for _, in := range instances {
		for _, vol := range in.Attachments {
			if other, dup := set[vol]; dup {
				failf(t, "cloud: volume %s is attached to both %s and %s", vol, other, in.ID)
			}
			set[vol] = in.ID
		}
	}
	token := ""
	for {
		page, err := env.cloud.ListVolumes(ctx, 100, token)
		if err != nil {
			failf(t, "cloud volumes: %v", err)
		}
		for _, v := range page.Volumes {
			if v.AttachedTo != set[v.ID] {
				failf(t, "cloud: volume %s says attachedTo %q, the instances say %q", v.ID, v.AttachedTo, set[v.ID])
			}
		}
		if token = page.NextPageToken; token == "" {
			return set
		}
	}
}

// pluginVersion is the vendor_version node's plugin returns from
// GetPluginInfo: on its CSI socket where the suite can reach it (the local
// cluster), else from fakecloud_csi_build_info on its /metrics, which carries
// the same version (docs/metrics.md).
func pluginVersion(ctx context.Context, node string) (string, error) {
	sock := env.pluginSockets[node]
	if sock == "" {
		return pluginBuildVersion(ctx, node)
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", fmt.Errorf("dial %s: %w", sock, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	info, err := csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil {
		return "", fmt.Errorf("GetPluginInfo on %s: %w", sock, err)
	}
	if info.GetName() != driverName {
		return "", fmt.Errorf("GetPluginInfo on %s: expected name %s, seen %q", sock, driverName, info.GetName())
	}
	return info.GetVendorVersion(), nil
}

// pluginBuildVersion is the version label of node's plugin's
// fakecloud_csi_build_info.
func pluginBuildVersion(ctx context.Context, node string) (string, error) {
	mf, err := pluginMetrics(ctx, node)
	if err != nil {
		return "", err
	}
	f := mf["fakecloud_csi_build_info"]
	if f == nil || len(f.GetMetric()) != 1 {
		return "", fmt.Errorf("node plugin of %s: expected one fakecloud_csi_build_info on /metrics", node)
	}
	for _, l := range f.GetMetric()[0].GetLabel() {
		if l.GetName() == "version" {
			return l.GetValue(), nil
		}
	}
	return "", fmt.Errorf("node plugin of %s: fakecloud_csi_build_info has no version label", node)
}

// pluginCapacity is the part of a node plugin's /debug/capacity the
// scenarios read.
type pluginCapacity struct {
	// Mode is "static" for the fallback, a policy mode (fresh,
	// last-known-good, floor, ramping) otherwise.
	Mode     string `json:"mode"`
	Reported int64  `json:"reported"`
	// Reason says why a count is static.
	Reason string `json:"reason"`
}

// pluginGet GETs path from node's plugin HTTP server and decodes the body:
// directly where the suite knows the plugin's URL (the local cluster), else
// through the API server's proxy to the node plugin pod on node (kind or any
// cluster with deploy/kind), which needs nothing but the kubeconfig. A status
// other than 200 is an error that names it ("GET ...: 404 ...").
func pluginGet(ctx context.Context, node, path string, decode func(io.Reader) error) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if base := env.pluginURLs[node]; base != "" {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", req.URL, resp.Status)
		}
		if err := decode(resp.Body); err != nil {
			return fmt.Errorf("GET %s: %w", req.URL, err)
		}
		return nil
	}
	pod, err := nodePluginPod(ctx, node)
	if err != nil {
		return err
	}
	body, err := env.cs.CoreV1().RESTClient().Get().Namespace(pluginNamespace).Resource("pods").
		Name(pod.Name + ":" + pluginHTTPPort).SubResource("proxy").Suffix(path).DoRaw(ctx)
	where := fmt.Sprintf("GET %s via the API server proxy to pod %s/%s", path, pluginNamespace, pod.Name)
	// The proxy passes the plugin's status on; client-go turns a non-2xx one into an
	// APIStatus error that carries it.
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Code != 0 {
		code := int(st.Status().Code)
		return fmt.Errorf("%s: %d %s", where, code, http.StatusText(code))
	}
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if err := decode(bytes.NewReader(body)); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	return nil
}

// Where deploy/kind runs the node plugin: its namespace, the pods' label and
// the driver container's --http-addr port.
const (
	pluginNamespace = "fakecloud-csi"
	pluginSelector  = "app.kubernetes.io/name=fakecloud-csi-node"
	pluginHTTPPort  = "9809"
)

// nodePluginPod is the running, ready node plugin pod on node (deploy/kind's
// DaemonSet), the newest when a replaced one is still terminating.
func nodePluginPod(ctx context.Context, node string) (*corev1.Pod, error) {
	list, err := env.cs.CoreV1().Pods(pluginNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: pluginSelector, FieldSelector: "spec.nodeName=" + node,
	})
	if err != nil {
		return nil, fmt.Errorf("node plugin pods on %s: %w", node, err)
	}
	var best *corev1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || !podReady(p) {
			continue
		}
		if best == nil || p.CreationTimestamp.After(best.CreationTimestamp.Time) {
			best = p
		}
	}
	if best == nil {
		return nil, fmt.Errorf("no running, ready node plugin pod (%s in %s) on %s among %d", pluginSelector, pluginNamespace, node, len(list.Items))
	}
	return best, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func pluginDebugCapacity(ctx context.Context, node string) (pluginCapacity, error) {
	var c pluginCapacity
	err := pluginGet(ctx, node, "/debug/capacity", func(r io.Reader) error { return json.NewDecoder(r).Decode(&c) })
	return c, err
}

// pluginCluster is the part of a node plugin's /debug/cluster (the newest
// cluster check) the scenarios read.
type pluginCluster struct {
	Supported        bool     `json:"supported"`
	SupportedAtStart bool     `json:"supportedAtStart"`
	Problems         []string `json:"problems"`
}

func pluginDebugCluster(ctx context.Context, node string) (pluginCluster, error) {
	var c pluginCluster
	err := pluginGet(ctx, node, "/debug/cluster", func(r io.Reader) error { return json.NewDecoder(r).Decode(&c) })
	return c, err
}

func pluginMetrics(ctx context.Context, node string) (map[string]*dto.MetricFamily, error) {
	var mf map[string]*dto.MetricFamily
	err := pluginGet(ctx, node, "/metrics", func(r io.Reader) error {
		p := expfmt.NewTextParser(model.UTF8Validation)
		var err error
		mf, err = p.TextToMetricFamilies(r)
		return err
	})
	return mf, err
}

// pluginGauge is the value of the unlabelled gauge name on node's plugin.
func pluginGauge(ctx context.Context, node, name string) (float64, error) {
	mf, err := pluginMetrics(ctx, node)
	if err != nil {
		return 0, err
	}
	f := mf[name]
	if f == nil || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetGauge() == nil {
		return 0, fmt.Errorf("node plugin of %s: no gauge %s on /metrics", node, name)
	}
	return f.GetMetric()[0].GetGauge().GetValue(), nil
}

// nodeGetInfoServed is nil once node's plugin process has answered
// NodeGetInfo with OK (fakecloud_csi_grpc_requests_total).
func nodeGetInfoServed(ctx context.Context, node string) error {
	mf, err := pluginMetrics(ctx, node)
	if err != nil {
		return err
	}
	for _, m := range mf["fakecloud_csi_grpc_requests_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["method"] == "/csi.v1.Node/NodeGetInfo" && labels["code"] == "OK" && m.GetCounter().GetValue() > 0 {
			return nil
		}
	}
	return fmt.Errorf("node plugin of %s: no successful NodeGetInfo on /metrics yet", node)
}
