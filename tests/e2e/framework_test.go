package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
	"github.com/fakecloud/fakecloud-csi/tests/e2e/localcluster"
)

const (
	driverName   = "disk.fakecloud.dev"
	storageClass = "fakecloud-disk"
	hostnameKey  = "kubernetes.io/hostname"
	e2eNodeLabel = "fakecloud.dev/e2e"
	// slack covers one kubelet sync, a scheduler retry and a loaded 2-core CI
	// machine on top of the CSIDriver period.
	slack = 20 * time.Second
)

// suiteEnv holds the clients every scenario uses.
type suiteEnv struct {
	cs     *kubernetes.Clientset
	cloud  *admin.Client
	logDir string
	pidDir string
	// period is the CSIDriver's nodeAllocatableUpdatePeriodSeconds.
	period time.Duration
	// pluginURLs and pluginSockets map node name to its node plugin's HTTP
	// base URL and CSI socket; empty when the cluster does not say (kind).
	pluginURLs, pluginSockets map[string]string
	// local is the cluster this run started (-local); nil for a given
	// kubeconfig, including a cluster from `localcluster up`, whose
	// supervisor runs in another process. S13 and S14 restart node plugins
	// through it.
	local *localcluster.Cluster
}

func newSuiteEnv(c config) (*suiteEnv, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", c.Kubeconfig, err)
	}
	rc.QPS, rc.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	if c.CloudURL == "" || c.CloudToken == "" {
		return nil, errors.New("the fake cloud URL and admin token are required (-cloud-url, -cloud-token[-file])")
	}
	if err := cloud.CheckBaseURL(c.CloudURL); err != nil {
		return nil, fmt.Errorf("-cloud-url (env FAKECLOUD_E2E_CLOUD_URL): %w", err)
	}
	cc, err := admin.NewClient(c.CloudURL, cloud.WithToken(c.CloudToken), cloud.WithUserAgent("fakecloud-csi-e2e"))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	drv, err := cs.StorageV1().CSIDrivers().Get(ctx, driverName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("CSIDriver %s: %w", driverName, err)
	}
	e := &suiteEnv{cs: cs, cloud: cc, logDir: c.LogDir, pidDir: c.PidDir, period: 10 * time.Second,
		pluginURLs: c.PluginURLs, pluginSockets: c.PluginSockets}
	if p := drv.Spec.NodeAllocatableUpdatePeriodSeconds; p != nil {
		e.period = time.Duration(*p) * time.Second
	}
	return e, nil
}

func stopOnSignal(stop func()) func() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-ch:
			stop()
			os.Exit(1)
		case <-done:
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}

// ctx returns a context that ends with the test.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// failf fails t with the log folder appended, so every failure says where
// to look.
func failf(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Fatalf("%s\n(component logs: %s)", fmt.Sprintf(format, args...), env.logDir)
}

// eventually polls check every second until it returns nil or timeout
// passes, then fails t with what was expected and the last value seen.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	if err := waitFor(testCtx(t), timeout, check); err != nil {
		failf(t, "%s: not reached within %s: %v", what, timeout, err)
	}
}

func waitFor(ctx context.Context, timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err) //nolint:errorlint // the deadline is the cause; the last error is context
		case <-time.After(time.Second):
		}
	}
}

// consistently checks every second for d that check holds.
func consistently(t *testing.T, d time.Duration, what string, check func() error) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if err := check(); err != nil {
			failf(t, "%s: broken: %v", what, err)
		}
		time.Sleep(time.Second)
	}
}

// countDeadline is how long the kubelet may take to show a new
// max_volumes_per_node in CSINode: one period plus slack (and the driver's
// stability window for increases).
func countDeadline(rising bool) time.Duration {
	d := env.period + slack
	if rising {
		d += cfg.RiseAllowance
	}
	return d
}

// e2eNodes are the cluster's schedulable nodes, sorted by name.
func e2eNodes(t *testing.T) []corev1.Node {
	t.Helper()
	list, err := env.cs.CoreV1().Nodes().List(testCtx(t), metav1.ListOptions{})
	if err != nil {
		failf(t, "list nodes: %v", err)
	}
	var out []corev1.Node
	for _, n := range list.Items {
		if n.Spec.Unschedulable {
			continue
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		failf(t, "no schedulable nodes")
	}
	return out
}

// csiNodeCount is the driver's allocatable.count on node's CSINode; nil when
// the driver or its allocatable is missing.
func csiNodeCount(ctx context.Context, node string) (*int32, string, error) {
	cn, err := env.cs.StorageV1().CSINodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("get CSINode %s: %w", node, err)
	}
	for _, d := range cn.Spec.Drivers {
		if d.Name == driverName {
			if d.Allocatable == nil {
				return nil, cn.ResourceVersion, nil
			}
			return d.Allocatable.Count, cn.ResourceVersion, nil
		}
	}
	return nil, cn.ResourceVersion, fmt.Errorf("CSINode %s does not list %s", node, driverName)
}

func fmtCount(c *int32) string {
	if c == nil {
		return "<no allocatable>"
	}
	return fmt.Sprint(*c)
}

// waitCount waits until node's CSINode count is want.
func waitCount(t *testing.T, node string, want int32, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("CSINode %s %s allocatable.count = %d", node, driverName, want), func() error {
		got, _, err := csiNodeCount(testCtx(t), node)
		if err != nil {
			return err
		}
		if got == nil || *got != want {
			return fmt.Errorf("CSINode %s: expected count %d, seen %s", node, want, fmtCount(got))
		}
		return nil
	})
}

// truthCount is what the driver must report for instance from the cloud's
// facts (docs/design.md, capacity model with quota share "none"):
// max(1, min(limit − out-of-band, attached + quota headroom)).
func truthCount(t *testing.T, instance string) int32 {
	t.Helper()
	c, err := env.cloud.GetCapacity(testCtx(t), instance)
	if err != nil {
		failf(t, "cloud capacity of %s: %v", instance, err)
	}
	raw := min(int64(c.AttachLimit-c.OutOfBandSlots), int64(c.Attached)+c.QuotaHeadroom)
	return int32(max(1, raw))
}

// patchInstance changes an instance and restores its out-of-band slots and
// attach-limit override when the test ends.
func patchInstance(t *testing.T, id string, p cloud.InstancePatch) *cloud.Instance {
	t.Helper()
	ctx := testCtx(t)
	before, err := env.cloud.GetInstance(ctx, id)
	if err != nil {
		failf(t, "get instance %s: %v", id, err)
	}
	after, err := env.cloud.PatchInstance(ctx, id, p)
	if err != nil {
		failf(t, "patch instance %s with %+v: %v", id, p, err)
	}
	t.Cleanup(func() {
		restore := cloud.InstancePatch{OutOfBandSlots: &before.OutOfBandSlots}
		if before.AttachLimitOverride != nil {
			restore.AttachLimit = before.AttachLimitOverride
		} else {
			restore.ClearAttachLimit = true
		}
		if _, err := env.cloud.PatchInstance(context.Background(), id, restore); err != nil {
			t.Errorf("restore instance %s: %v", id, err)
		}
	})
	return after
}

// setAttachmentQuota sets the account attachment quota and restores it when
// the test ends.
func setAttachmentQuota(t *testing.T, limit int64) {
	t.Helper()
	q, err := env.cloud.GetQuotas(testCtx(t))
	if err != nil {
		failf(t, "get quotas: %v", err)
	}
	if _, err := env.cloud.PatchQuotas(testCtx(t), cloud.QuotasPatch{Attachments: &limit}); err != nil {
		failf(t, "set attachment quota %d: %v", limit, err)
	}
	old := q.Attachments.Limit
	t.Cleanup(func() {
		if _, err := env.cloud.PatchQuotas(context.Background(), cloud.QuotasPatch{Attachments: &old}); err != nil {
			t.Errorf("restore attachment quota %d: %v", old, err)
		}
	})
}

// addFault installs a fault rule and deletes it when the test ends.
func addFault(t *testing.T, r cloud.FaultRule) string {
	t.Helper()
	f, err := env.cloud.CreateFault(testCtx(t), r)
	if err != nil {
		failf(t, "create fault %+v: %v", r, err)
	}
	t.Cleanup(func() { _ = env.cloud.DeleteFault(context.Background(), f.ID) })
	return f.ID
}

// namespace creates a namespace for one scenario. At the end it deletes the
// pods and claims and waits until the cloud has detached and deleted their
// volumes, so the next scenario starts from the seeded capacity.
func namespace(t *testing.T) string {
	t.Helper()
	name := "e2e-" + strings.ToLower(strings.NewReplacer("_", "-", "/", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.TrimRight(name, "-") + "-" + rand.String(4)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := env.cs.CoreV1().Namespaces().Create(testCtx(t), ns, metav1.CreateOptions{}); err != nil {
		failf(t, "create namespace %s: %v", name, err)
	}
	t.Cleanup(func() { cleanupNamespace(t, name) })
	return name
}

func cleanupNamespace(t *testing.T, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs := env.cs
	bg := metav1.DeletePropagationBackground
	zero := int64(0)
	_ = cs.AppsV1().StatefulSets(ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, metav1.ListOptions{})
	_ = cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	_ = cs.CoreV1().PersistentVolumeClaims(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	err := waitFor(ctx, 3*time.Minute, func() error {
		pvs, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, pv := range pvs.Items {
			if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == ns {
				return fmt.Errorf("PV %s of %s/%s still exists (phase %s)", pv.Name, ns, pv.Spec.ClaimRef.Name, pv.Status.Phase)
			}
		}
		return nil
	})
	if err != nil {
		t.Errorf("cleanup of %s: %v (component logs: %s)", ns, err, env.logDir)
	}
	_ = cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
}

// pvc is a claim of the driver's StorageClass.
func pvc(ns, name string) *corev1.PersistentVolumeClaim {
	sc := storageClass
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &sc,
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			},
		},
	}
}

func podSpec(node string, claims ...string) corev1.PodSpec {
	zero := int64(0)
	spec := corev1.PodSpec{
		TerminationGracePeriodSeconds: &zero,
		Containers: []corev1.Container{{
			Name: "app", Image: cfg.PodImage,
		}},
	}
	if node != "" {
		spec.NodeSelector = map[string]string{hostnameKey: node}
	}
	for i, c := range claims {
		vol := fmt.Sprintf("v%d", i)
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c},
		}})
		spec.Containers[0].VolumeMounts = append(spec.Containers[0].VolumeMounts,
			corev1.VolumeMount{Name: vol, MountPath: "/data/" + vol})
	}
	return spec
}

// podWithClaim creates a claim and a pod using it, pinned to node when node
// is not empty.
func podWithClaim(t *testing.T, ns, name, node string) *corev1.Pod {
	t.Helper()
	ctx := testCtx(t)
	if _, err := env.cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc(ns, name), metav1.CreateOptions{}); err != nil {
		failf(t, "create PVC %s/%s: %v", ns, name, err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "e2e"}}, Spec: podSpec(node, name)}
	p, err := env.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		failf(t, "create pod %s/%s: %v", ns, name, err)
	}
	return p
}

// statefulSet creates a Parallel StatefulSet of replicas pods with spec,
// each with one claim "data" from the driver's StorageClass.
func statefulSet(t *testing.T, ns, name string, spec corev1.PodSpec, replicas int32) {
	t.Helper()
	labels := map[string]string{"app": name}
	claim := pvc(ns, "data")
	// The claim template "data" provides the volume of the same name.
	spec.Volumes = nil
	spec.Containers = append([]corev1.Container(nil), spec.Containers...)
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	ss := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas:             &replicas,
			PodManagementPolicy:  appsv1.ParallelPodManagement,
			Selector:             &metav1.LabelSelector{MatchLabels: labels},
			Template:             corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{*claim},
		},
	}
	if _, err := env.cs.AppsV1().StatefulSets(ns).Create(testCtx(t), ss, metav1.CreateOptions{}); err != nil {
		failf(t, "create StatefulSet %s/%s: %v", ns, name, err)
	}
}

func listPods(t *testing.T, ns string) []corev1.Pod {
	t.Helper()
	pods, err := env.cs.CoreV1().Pods(ns).List(testCtx(t), metav1.ListOptions{})
	if err != nil {
		failf(t, "list pods in %s: %v", ns, err)
	}
	return pods.Items
}

// podState summarises a pod for failure messages and checks.
func podState(p *corev1.Pod) string {
	s := string(p.Status.Phase)
	if p.Spec.NodeName != "" {
		s += " on " + p.Spec.NodeName
	}
	if p.Status.Reason != "" {
		s += " reason=" + p.Status.Reason
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
			s += fmt.Sprintf(" unschedulable=%q", c.Message)
		}
	}
	return s
}

func isRunning(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }

// unschedulableForVolumes reports whether the scheduler keeps p Pending
// because of the volume limit.
func unschedulableForVolumes(p *corev1.Pod) bool {
	if p.Spec.NodeName != "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse &&
			strings.Contains(c.Message, "max volume count") {
			return true
		}
	}
	return false
}

// waitPodRunning waits until ns/name runs.
func waitPodRunning(t *testing.T, ns, name string, timeout time.Duration) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	eventually(t, timeout, fmt.Sprintf("pod %s/%s Running", ns, name), func() error {
		p, err := env.cs.CoreV1().Pods(ns).Get(testCtx(t), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod = p
		if !isRunning(p) {
			return fmt.Errorf("pod %s/%s: expected Running, seen %s", ns, name, podState(p))
		}
		return nil
	})
	return pod
}

// volumeAttachmentsFor lists the driver's VolumeAttachments of PVs bound to
// claims in ns.
func volumeAttachmentsFor(ctx context.Context, ns string) ([]storagev1.VolumeAttachment, error) {
	pvs, err := env.cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	mine := map[string]bool{}
	for _, pv := range pvs.Items {
		if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == ns {
			mine[pv.Name] = true
		}
	}
	vas, err := env.cs.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []storagev1.VolumeAttachment
	for _, va := range vas.Items {
		if va.Spec.Attacher == driverName && va.Spec.Source.PersistentVolumeName != nil && mine[*va.Spec.Source.PersistentVolumeName] {
			out = append(out, va)
		}
	}
	return out, nil
}

// pvName is the name of the PV bound to ns/claim.
func pvName(t *testing.T, ns, claim string) string {
	t.Helper()
	c, err := env.cs.CoreV1().PersistentVolumeClaims(ns).Get(testCtx(t), claim, metav1.GetOptions{})
	if err != nil {
		failf(t, "get PVC %s/%s: %v", ns, claim, err)
	}
	return c.Spec.VolumeName
}

// volumeHandle is the cloud volume ID of the PV bound to ns/claim.
func volumeHandle(t *testing.T, ns, claim string) string {
	t.Helper()
	c, err := env.cs.CoreV1().PersistentVolumeClaims(ns).Get(testCtx(t), claim, metav1.GetOptions{})
	if err != nil {
		failf(t, "get PVC %s/%s: %v", ns, claim, err)
	}
	pv, err := env.cs.CoreV1().PersistentVolumes().Get(testCtx(t), c.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		failf(t, "get PV %q of %s/%s: %v", c.Spec.VolumeName, ns, claim, err)
	}
	if pv.Spec.CSI == nil {
		failf(t, "PV %s is not a CSI volume", pv.Name)
	}
	return pv.Spec.CSI.VolumeHandle
}

// cloudAttached is the number of volumes the cloud has attached to instance.
func cloudAttached(t *testing.T, instance string) int {
	t.Helper()
	in, err := env.cloud.GetInstance(testCtx(t), instance)
	if err != nil {
		failf(t, "cloud instance %s: %v", instance, err)
	}
	return len(in.Attachments)
}

// nodeCount is the count the node reports now, failing t if it has none.
func nodeCount(t *testing.T, node string) int32 {
	t.Helper()
	c, _, err := csiNodeCount(testCtx(t), node)
	if err != nil {
		failf(t, "%v", err)
	}
	if c == nil {
		failf(t, "CSINode %s: %s has no allocatable.count", node, driverName)
	}
	return *c
}

// smallestNode picks the node with the smallest reported count.
func smallestNode(t *testing.T) (string, int32) {
	t.Helper()
	best, bestCount := "", int32(1<<30)
	for _, n := range e2eNodes(t) {
		if c := nodeCount(t, n.Name); c < bestCount {
			best, bestCount = n.Name, c
		}
	}
	return best, bestCount
}
