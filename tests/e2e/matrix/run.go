package matrix

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
	"github.com/fakecloud/fakecloud-csi/tests/e2e/localcluster"
)

// Options say where the clone and the pinned binaries are.
type Options struct {
	// RepoRoot is the clone; BinDir the pinned binary cache (localcluster.DefaultCacheDir).
	RepoRoot, BinDir string
	// Commit is the clone's `git describe --always --dirty`, stamped into each row.
	Commit string
	// Out receives progress.
	Out io.Writer
}

// The windows of the checks. The kubelet waits about 2 minutes for an attach before it reads
// NodeGetInfo again and fails the pod (docs/figures.md, S4).
const (
	followWindow    = 35 * time.Second // 3 periods of 10 s and slack
	errorCodeWindow = 2 * time.Minute
	rejectWindow    = 4 * time.Minute
	replaceWindow   = 2 * time.Minute
	reregWindow     = time.Minute
	poll            = 250 * time.Millisecond
)

const (
	target   = "node-1" // the node every check acts on
	spare    = "node-2" // same zone: where a rejected pod goes
	ns       = "matrix"
	zoneKey  = localcluster.ZoneLabel
	hostKey  = "kubernetes.io/hostname"
	scName   = "fakecloud-disk"
	podImage = "registry.k8s.io/pause:3.10"
)

// Versions returns the local cluster's Versions for c: the cache folders of its non-pinned
// versions and its gates and labels.
func Versions(c Cell) (localcluster.Versions, error) {
	period := c.PeriodSeconds
	v := localcluster.Versions{KubeletFeatureGates: c.KubeletGates, APIServerFeatureGates: c.APIServerGates,
		AttacherFeatureGates: c.AttacherGates, NodeLabels: c.NodeLabels, CSIDriverPeriodSeconds: &period}
	var err error
	if c.ControlPlane != localcluster.KubeVersion {
		if v.ControlPlaneBinDir, err = localcluster.VersionCacheDir(c.ControlPlane); err != nil {
			return v, err
		}
	}
	if c.Kubelet != localcluster.KubeVersion {
		if v.KubeletBinDir, err = localcluster.VersionCacheDir(c.Kubelet); err != nil {
			return v, err
		}
	}
	if c.Attacher != PinnedAttacher {
		if v.AttacherBinDir, err = localcluster.VersionCacheDir(c.Attacher); err != nil {
			return v, err
		}
	}
	return v, nil
}

// Builds lists the version builds cell c needs beyond the pinned set.
func Builds(c Cell) []localcluster.VersionBuildOptions {
	var out []localcluster.VersionBuildOptions
	if c.ControlPlane != localcluster.KubeVersion {
		out = append(out, localcluster.VersionBuildOptions{Version: c.ControlPlane,
			Components: []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}})
	}
	if c.Kubelet != localcluster.KubeVersion {
		out = append(out, localcluster.VersionBuildOptions{Version: c.Kubelet, Components: []string{"hollow-kubelet"}})
	}
	if c.Attacher != PinnedAttacher {
		out = append(out, localcluster.VersionBuildOptions{Version: c.Attacher})
	}
	return out
}

// plugins is what the checks need of the node plugins beyond the Kubernetes API: their
// debug endpoints and a restart with re-registration. The local cluster runs them as
// processes (localPlugins); on a user's cluster they are a DaemonSet's pods (kubePlugins).
type plugins interface {
	// getJSON decodes node's plugin's debug endpoint path (/debug/capacity) into v.
	getJSON(ctx context.Context, node, path string, v any) error
	// restart restarts node's plugin so that its registrar re-registers it with the kubelet,
	// and returns once the new one serves its debug endpoint.
	restart(ctx context.Context, node string) error
}

// cellRun is one cell's cluster and clients.
type cellRun struct {
	o       Options
	plugins plugins
	// kubelets restarts a node's kubelet in place; nil where the harness cannot (the
	// kubeconfig mode): the kubelet restart check is then not measured.
	kubelets kubeletRestarter
	// kubeletWindow, when set (tests), replaces kubeletRestartWindow and drops
	// pluginWatcherSettle.
	kubeletWindow time.Duration
	cs            kubernetes.Interface
	cloud         *admin.Client
	row           *Row
	// target is the node every check acts on (node-1 on the local cluster); ns the namespace
	// of the checks' claims and pods; podImage their container image.
	target, ns, podImage string
	// period is the CSIDriver's period now (0: unset).
	period int64
	// lastChange is when the harness last changed the period (zero: never).
	lastChange time.Time
	// createdNS: the rejection check created namespace ns (the kubeconfig mode deletes it).
	createdNS bool
}

func (r *cellRun) logf(format string, args ...any) {
	fmt.Fprintf(r.o.Out, "matrix %s: %s\n", r.row.Cell.Name, fmt.Sprintf(format, args...))
}

// RunCell starts the local cluster of cell c (its binaries built), runs the checks, stops it
// and returns the row, judged. A check that cannot run is recorded in Row.Errors; the later
// checks still run when they can.
func RunCell(ctx context.Context, o Options, c Cell) (row Row) {
	row = Row{Cell: c, Date: time.Now().UTC(), Commit: o.Commit,
		FollowWindowSeconds: followWindow.Seconds(), RejectWindowSeconds: rejectWindow.Seconds()}
	start := time.Now()
	defer func() { row.TotalSeconds = time.Since(start).Seconds(); row.judge() }()
	fail := func(what string, err error) { row.Errors = append(row.Errors, what+": "+err.Error()) }
	versions, err := Versions(c)
	if err != nil {
		fail("versions", err)
		return row
	}
	runDir, err := localcluster.NewRunDir()
	if err != nil {
		fail("run dir", err)
		return row
	}
	co := localcluster.DefaultOptions(o.RepoRoot, o.BinDir, runDir)
	// Two nodes in one zone: node-1 small (4 slots, 1 out of band: count 3), node-2 medium.
	small, medium := co.Nodes[1], co.Nodes[2]
	small.Name, medium.Name = target, spare
	co.Nodes = []localcluster.Node{small, medium}
	co.Versions = versions
	co.Out = o.Out
	sctx, cancel := context.WithTimeout(ctx, 6*time.Minute)
	cl, err := localcluster.Start(sctx, co)
	cancel()
	if err != nil {
		fail("start the cluster", err)
		return row
	}
	defer cl.Stop()
	r := &cellRun{o: o, plugins: localPlugins{cl}, kubelets: localPlugins{cl}, row: &row, period: c.PeriodSeconds, target: target, ns: ns, podImage: podImage}
	fmt.Fprintf(o.Out, "matrix %s: cluster up in %s (logs %s)\n", c.Name, time.Since(start).Round(time.Second), cl.LogDir)
	cfg, err := clientcmd.BuildConfigFromFlags("", cl.Kubeconfig)
	if err != nil {
		fail("kubeconfig", err)
		return row
	}
	if r.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		fail("client", err)
		return row
	}
	if r.cloud, err = admin.NewClient(cl.CloudURL, cloud.WithToken(cl.AdminToken), cloud.WithUserAgent("fakecloud-csi-matrix")); err != nil {
		fail("cloud client", err)
		return row
	}
	r.runChecks(ctx)
	return row
}

// runChecks runs the cell's checks one after the other on r.target, recording a check that
// cannot run in Row.Errors; the later checks still run unless ctx is done.
func (r *cellRun) runChecks(ctx context.Context) {
	for _, ch := range []struct {
		name string
		f    func(context.Context) error
	}{
		{"decision", r.decision}, {"count follows", r.follow}, {"period changes", r.periodChanges},
		{"re-registration", r.reregister}, {"kubelet restart", r.kubeletRestart}, {"stale count rejection", r.reject},
	} {
		r.logf("check: %s", ch.name)
		if err := ch.f(ctx); err != nil {
			r.row.Errors = append(r.row.Errors, ch.name+": "+err.Error())
			r.logf("%s: %v", ch.name, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
}

// decision reads node-1's decision from /debug/capacity and its kubelet's version.
func (r *cellRun) decision(ctx context.Context) error {
	n, err := r.cs.CoreV1().Nodes().Get(ctx, r.target, metav1.GetOptions{})
	if err != nil {
		return err
	}
	r.row.KubeletVersion = n.Status.NodeInfo.KubeletVersion
	if r.row.Decision, r.row.Reason, err = r.readDecision(ctx); err != nil {
		return err
	}
	r.logf("decision %s (%s), kubelet %s", r.row.Decision, r.row.Reason, r.row.KubeletVersion)
	return nil
}

// getJSON decodes the target's plugin's debug endpoint path into v (at most 1 MiB).
func (r *cellRun) getJSON(ctx context.Context, path string, v any) error {
	return r.plugins.getJSON(ctx, r.target, path, v)
}

// localPlugins are the local cluster's node plugins: processes serving their debug endpoint
// on 127.0.0.1.
type localPlugins struct{ c *localcluster.Cluster }

// getJSON decodes node's plugin's debug endpoint path into v (at most 1 MiB).
func (l localPlugins) getJSON(ctx context.Context, node, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.c.PluginURLs[node]+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d", path, resp.StatusCode)
	}
	return decodeDebug(resp.Body, path, v)
}

// restart restarts node's plugin process with re-registration, as a replaced DaemonSet pod's
// registrar does.
func (l localPlugins) restart(ctx context.Context, node string) error {
	return l.c.RestartNodePlugin(ctx, node, localcluster.NodePluginRestart{Reregister: true})
}

// decodeDebug decodes the JSON answer of a debug endpoint path (at most 1 MiB) into v.
func decodeDebug(body io.Reader, path string, v any) error {
	if err := json.NewDecoder(io.LimitReader(body, 1<<20)).Decode(v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// readDecision is node-1's decision and reason from /debug/capacity.
func (r *cellRun) readDecision(ctx context.Context) (decision, reason string, err error) {
	var d struct {
		Decision struct {
			Decision, Reason string
		} `json:"decision"`
	}
	if err := r.getJSON(ctx, "/debug/capacity", &d); err != nil {
		return "", "", err
	}
	if d.Decision.Decision == "" {
		return "", "", fmt.Errorf("/debug/capacity of %s has no decision (a driver older than issue 27's?)", r.target)
	}
	return d.Decision.Decision, d.Decision.Reason, nil
}

// setPeriod sets the CSIDriver's period (0: removes it).
func (r *cellRun) setPeriod(ctx context.Context, seconds int64) error {
	patch := []byte(`{"spec":{"nodeAllocatableUpdatePeriodSeconds":null}}`)
	if seconds != 0 {
		patch = fmt.Appendf(nil, `{"spec":{"nodeAllocatableUpdatePeriodSeconds":%d}}`, seconds)
	}
	if _, err := r.cs.StorageV1().CSIDrivers().Patch(ctx, localcluster.DriverName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("set the period to %s: %w", periodText(seconds), err)
	}
	r.period, r.lastChange = seconds, time.Now()
	return nil
}

// recheckWindow bounds the wait for the node plugin's 5-minute cluster re-check
// (clustercheck.Watch) after the last period change.
const recheckWindow = 6 * time.Minute

// periodChanges applies the cell's PeriodChanges one after the other, each followed by the
// count check; then, when there were any, waits for node-1's plugin to re-check the cluster
// (/debug/cluster's checkedAt after the last change) and records its answer.
func (r *cellRun) periodChanges(ctx context.Context) error {
	for _, ch := range r.row.Cell.PeriodChanges {
		if err := r.setPeriod(ctx, ch.PeriodSeconds); err != nil {
			return err
		}
		res := PeriodChangeResult{PeriodSeconds: ch.PeriodSeconds}
		ok, took, err := r.followOnce(ctx)
		if err != nil {
			return err
		}
		res.CountFollowed = ok
		if ok {
			res.CountFollowSeconds = seconds(took)
		}
		r.row.PeriodChanges = append(r.row.PeriodChanges, res)
		r.logf("period → %s: count followed %v in %s", periodText(ch.PeriodSeconds), ok, took.Round(100*time.Millisecond))
	}
	if len(r.row.Cell.PeriodChanges) == 0 {
		return nil
	}
	var dc struct {
		CheckedAt        time.Time `json:"checkedAt"`
		Supported        bool      `json:"supported"`
		SupportedAtStart bool      `json:"supportedAtStart"`
	}
	var readErr error
	_, ok := waitFor(ctx, recheckWindow, func() bool {
		if readErr = r.getJSON(ctx, "/debug/cluster", &dc); readErr != nil {
			return false
		}
		return dc.CheckedAt.After(r.lastChange)
	})
	if !ok {
		r.logf("no cluster re-check after the last period change within %s (last error: %v)", recheckWindow, readErr)
		return nil
	}
	r.row.Recheck = &Recheck{Supported: dc.Supported, SupportedAtStart: dc.SupportedAtStart,
		SecondsAfterChange: dc.CheckedAt.Sub(r.lastChange).Seconds()}
	r.logf("cluster re-check %.0f s after the last change: supported %v (at start %v)", r.row.Recheck.SecondsAfterChange, dc.Supported, dc.SupportedAtStart)
	return nil
}

// count is node-1's CSINode allocatable count for the driver; listed false when the CSINode
// does not list the driver (or does not exist).
func (r *cellRun) count(ctx context.Context) (count int32, listed bool, err error) {
	return r.countOf(ctx, r.target)
}

// countOf is node's CSINode allocatable count for the driver, as count.
func (r *cellRun) countOf(ctx context.Context, node string) (count int32, listed bool, err error) {
	// A CSINode that cannot be read lists nothing: that is what the gap measures.
	count, listed, _ = countOn(ctx, r.cs, node)
	return count, listed, nil
}

// waitFor polls f every poll until it answers true or d passed; it returns how long it took
// and whether it answered true.
func waitFor(ctx context.Context, d time.Duration, f func() bool) (time.Duration, bool) {
	start := time.Now()
	for time.Since(start) < d && ctx.Err() == nil {
		if f() {
			return time.Since(start), true
		}
		time.Sleep(poll)
	}
	return time.Since(start), false
}

func seconds(d time.Duration) *float64 { s := d.Seconds(); return &s }

// setOOB sets node-1's out-of-band slots.
func (r *cellRun) setOOB(ctx context.Context, oob int) error {
	_, err := r.cloud.PatchInstance(ctx, r.target, cloud.InstancePatch{OutOfBandSlots: &oob})
	return err
}

// follow takes one more slot out of band and measures whether and when CSINode follows.
func (r *cellRun) follow(ctx context.Context) error {
	ok, took, err := r.followOnce(ctx)
	if err != nil {
		return err
	}
	r.row.CountFollowed = ok
	if ok {
		r.row.CountFollowSeconds = seconds(took)
	}
	return nil
}

// followOnce takes one more slot out of band, waits up to followWindow for node-1's CSINode
// count to drop by one, and gives the slot back (waiting for the count to come back when it
// followed).
func (r *cellRun) followOnce(ctx context.Context) (ok bool, took time.Duration, err error) {
	var before int32
	if _, ok := waitFor(ctx, time.Minute, func() bool {
		c, listed, _ := r.count(ctx)
		before = c
		return listed && c > 1
	}); !ok {
		return false, 0, fmt.Errorf("CSINode %s lists no count above 1 (seen %d)", r.target, before)
	}
	in, err := r.cloud.GetInstance(ctx, r.target)
	if err != nil {
		return false, 0, err
	}
	if err := r.setOOB(ctx, in.OutOfBandSlots+1); err != nil {
		return false, 0, err
	}
	want := before - 1
	took, ok = waitFor(ctx, followWindow, func() bool { c, _, _ := r.count(ctx); return c == want })
	r.logf("count %d → want %d after one slot out of band: followed %v in %s", before, want, ok, took.Round(100*time.Millisecond))
	if err := r.setOOB(ctx, in.OutOfBandSlots); err != nil {
		return ok, took, err
	}
	if ok {
		waitFor(ctx, followWindow, func() bool { c, _, _ := r.count(ctx); return c == before })
	}
	return ok, took, nil
}

// reregister restarts node-1's plugin with re-registration and measures how long CSINode did
// not list the driver and when it was back with a count.
func (r *cellRun) reregister(ctx context.Context) error {
	w := r.watchCSINode(ctx, -1)
	start := time.Now()
	err := r.plugins.restart(ctx, r.target)
	if err == nil {
		waitFor(ctx, reregWindow, func() bool {
			s := w.now()
			return s.goneAt.IsZero() || !s.backAt.IsZero()
		})
	}
	s := w.end()
	goneAt, backAt, vanished := s.goneAt, s.backAt, !s.goneAt.IsZero()
	r.row.DriverVanished = vanished
	if vanished && !backAt.IsZero() {
		r.row.ReregistrationGapSeconds = seconds(backAt.Sub(goneAt))
		r.row.ReregisteredSeconds = seconds(backAt.Sub(start))
	}
	r.logf("re-registration: vanished %v, gap %s", vanished, secs(r.row.ReregistrationGapSeconds))
	if err != nil {
		return err
	}
	// The restarted plugin decided again, from what it reads now.
	if r.row.DecisionAfterRestart, r.row.ReasonAfterRestart, err = r.readDecision(ctx); err != nil {
		return err
	}
	r.logf("decision after the restart: %s (%s)", r.row.DecisionAfterRestart, r.row.ReasonAfterRestart)
	return nil
}

// claim is a 1 GiB claim name in namespace of the driver's StorageClass.
func claim(namespace, name string) *corev1.PersistentVolumeClaim {
	sc := scName
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &sc,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

func running(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// reject is S4 of the e2e suite, measured: node-1 holds one volume, its count goes stale (a
// 600 s period) while the cloud fills it; a StatefulSet pod preferring node-1 gets scheduled
// there; the attach fails with RESOURCE_EXHAUSTED. Measured: errorCode 8 on the
// VolumeAttachment, the kubelet failing the pod (VolumeAttachmentLimitExceeded), its
// replacement running on node-2, or the pod stuck in ContainerCreating.
func (r *cellRun) reject(ctx context.Context) error {
	if err := r.startHolder(ctx); err != nil {
		return err
	}
	// A set period goes to 600 s so that the count stays stale; an unset one stays unset (the
	// count is never refreshed, and the kubelet does not fail the pod without a period).
	if r.period != 0 {
		if err := r.setPeriod(ctx, 600); err != nil {
			return err
		}
	}
	in, err := r.cloud.GetInstance(ctx, r.target)
	if err != nil {
		return err
	}
	if err := r.setOOB(ctx, in.AttachLimit-len(in.Attachments)); err != nil {
		return err
	}
	// The StatefulSet controller replaces a failed pod within milliseconds: a watch sees the
	// failure that polling would miss.
	fw, err := r.watchLimitFailures(ctx)
	if err != nil {
		return err
	}
	defer fw.stop()
	created := time.Now()
	if _, err := r.cs.AppsV1().StatefulSets(r.ns).Create(ctx, r.staleStatefulSet(in.Zone), metav1.CreateOptions{}); err != nil {
		return err
	}
	firstUID, onTarget, took, ok := r.waitErrorCode8(ctx)
	if !onTarget {
		return fmt.Errorf("pod stale-0 was not scheduled to %s (the count was not stale?)", r.target)
	}
	if ok {
		r.row.ErrorCode8Seconds = seconds(took)
	}
	r.logf("errorCode 8 on the VolumeAttachment: %v after %s", ok, took.Round(100*time.Millisecond))
	attachFailed := time.Now()
	if _, failed := waitFor(ctx, rejectWindow, func() bool { return !fw.failedAt().IsZero() }); failed {
		r.measureReplacement(ctx, fw.failedAt().Sub(attachFailed), attachFailed, firstUID)
		return nil
	}
	p, err := r.cs.CoreV1().Pods(r.ns).Get(ctx, "stale-0", metav1.GetOptions{})
	if err != nil {
		return err
	}
	r.row.StuckContainerCreating = p.UID == firstUID && p.Spec.NodeName == r.target && p.Status.Phase == corev1.PodPending
	r.logf("pod not failed within %s; stuck in ContainerCreating: %v (phase %s, created %s ago)", rejectWindow, r.row.StuckContainerCreating, p.Status.Phase, time.Since(created).Round(time.Second))
	return nil
}

// startHolder creates the namespace and the pod "holder" with one volume on the r.target node,
// and waits up to 2 minutes for it to run.
func (r *cellRun) startHolder(ctx context.Context) error {
	if _, err := r.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	r.createdNS = true
	zero := int64(0)
	if _, err := r.cs.CoreV1().PersistentVolumeClaims(r.ns).Create(ctx, claim(r.ns, "holder"), metav1.CreateOptions{}); err != nil {
		return err
	}
	holder := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "holder", Namespace: r.ns}, Spec: corev1.PodSpec{
		TerminationGracePeriodSeconds: &zero, NodeSelector: map[string]string{hostKey: r.target},
		Containers: []corev1.Container{{Name: "app", Image: r.podImage, VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "/data"}}}},
		Volumes:    []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "holder"}}}},
	}}
	if _, err := r.cs.CoreV1().Pods(r.ns).Create(ctx, holder, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, ok := waitFor(ctx, 2*time.Minute, func() bool {
		p, err := r.cs.CoreV1().Pods(r.ns).Get(ctx, "holder", metav1.GetOptions{})
		return err == nil && running(p)
	}); !ok {
		return fmt.Errorf("pod holder not running on %s within 2 min", r.target)
	}
	return nil
}

// staleStatefulSet is the StatefulSet "stale": one replica with one volume, required in zone
// and preferring the r.target node.
func (r *cellRun) staleStatefulSet(zone string) *appsv1.StatefulSet {
	zero := int64(0)
	labels := map[string]string{"app": "stale"}
	replicas := int32(1)
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "stale", Namespace: r.ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &replicas, PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: &zero,
				Containers:                    []corev1.Container{{Name: "app", Image: r.podImage, VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
				Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: zoneKey, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}},
					}}},
					PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 100, Preference: corev1.NodeSelectorTerm{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: hostKey, Operator: corev1.NodeSelectorOpIn, Values: []string{r.target}}},
					}}},
				}},
			}},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{*claim(r.ns, "data")},
		},
	}
}

// limitFailureWatch watches the pods of "stale" for the first that the kubelet failed with
// VolumeAttachmentLimitExceeded.
type limitFailureWatch struct {
	w  watch.Interface
	mu sync.Mutex
	at time.Time // when the first such failure was seen; zero: none yet
}

// watchLimitFailures starts watching; stop ends the watch.
func (r *cellRun) watchLimitFailures(ctx context.Context) (*limitFailureWatch, error) {
	w, err := r.cs.CoreV1().Pods(r.ns).Watch(ctx, metav1.ListOptions{LabelSelector: "app=stale"})
	if err != nil {
		return nil, err
	}
	fw := &limitFailureWatch{w: w}
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && p.Status.Phase == corev1.PodFailed && p.Status.Reason == "VolumeAttachmentLimitExceeded" {
				fw.mu.Lock()
				if fw.at.IsZero() {
					fw.at = time.Now()
				}
				fw.mu.Unlock()
			}
		}
	}()
	return fw, nil
}

// failedAt is when the first failure was seen (zero: none yet).
func (fw *limitFailureWatch) failedAt() time.Time {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.at
}

func (fw *limitFailureWatch) stop() { fw.w.Stop() }

// waitErrorCode8 waits up to errorCodeWindow for pod stale-0 to be scheduled and a
// VolumeAttachment on the r.target node to carry attach error code 8 (RESOURCE_EXHAUSTED),
// noting the first code seen in the row. It returns the pod's UID and whether it was
// scheduled to the r.target, as last seen, and how long the wait took and whether code 8 came.
func (r *cellRun) waitErrorCode8(ctx context.Context) (firstUID types.UID, onTarget bool, took time.Duration, ok bool) {
	took, ok = waitFor(ctx, errorCodeWindow, func() bool {
		p, err := r.cs.CoreV1().Pods(r.ns).Get(ctx, "stale-0", metav1.GetOptions{})
		if err != nil || p.Spec.NodeName == "" {
			return false
		}
		firstUID, onTarget = p.UID, p.Spec.NodeName == r.target
		// The claim's volume: on a user's cluster other VolumeAttachments may carry errors.
		pvc, err := r.cs.CoreV1().PersistentVolumeClaims(r.ns).Get(ctx, "data-stale-0", metav1.GetOptions{})
		if err != nil || pvc.Spec.VolumeName == "" {
			return false
		}
		vas, err := r.cs.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for i := range vas.Items {
			va := &vas.Items[i]
			pv := va.Spec.Source.PersistentVolumeName
			if va.Spec.NodeName != r.target || pv == nil || *pv != pvc.Spec.VolumeName || va.Status.AttachError == nil {
				continue
			}
			if code := va.Status.AttachError.ErrorCode; code != nil {
				r.row.ErrorCodeSeen = code
				return *code == 8
			}
		}
		return false
	})
	return firstUID, onTarget, took, ok
}

// measureReplacement records a pod the kubelet failed after failedAfter (from attachFailed,
// when errorCode 8 was seen) and waits up to replaceWindow for its replacement (another UID)
// to run on another node.
func (r *cellRun) measureReplacement(ctx context.Context, failedAfter time.Duration, attachFailed time.Time, firstUID types.UID) {
	r.row.PodFailedSeconds = seconds(failedAfter)
	_, ok := waitFor(ctx, replaceWindow, func() bool {
		p, err := r.cs.CoreV1().Pods(r.ns).Get(ctx, "stale-0", metav1.GetOptions{})
		return err == nil && p.UID != firstUID && p.Spec.NodeName != r.target && running(p)
	})
	if ok {
		r.row.ReplacedSeconds = seconds(time.Since(attachFailed))
	}
	r.logf("pod failed %s after errorCode 8; replacement running elsewhere: %v", secs(r.row.PodFailedSeconds), ok)
}
