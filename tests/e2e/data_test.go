package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
)

// S15: data follows the volume. A pod writes a token into its volume and
// fsyncs it; the pod is deleted, the volume detached from its node and
// attached to another node of the same zone, where a second pod reads the
// token back. Only real containers write anything, so the scenario skips on
// hollow kubelets (a fake runtime) and without -volumecheck-image.
func TestS15DataFollowsVolume(t *testing.T) {
	if cfg.VolumeCheckImage == "" {
		t.Skip("needs -volumecheck-image (tests/e2e/cmd/volumecheck, built by hack/images.sh and loaded by make kind-up)")
	}
	nodes := e2eNodes(t)
	for _, n := range nodes {
		if rt := n.Status.NodeInfo.ContainerRuntimeVersion; strings.Contains(rt, "fake") {
			t.Skipf("node %s runs no real containers (%s): nothing is written", n.Name, rt)
		}
	}
	from, to := twoNodesOfOneZone(t, nodes)
	ns := namespace(t)
	ctx := testCtx(t)
	if _, err := env.cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc(ns, "data"), metav1.CreateOptions{}); err != nil {
		failf(t, "create PVC %s/data: %v", ns, err)
	}
	token := "token-" + rand.String(16)
	const file = "/data/v0/token"

	start := time.Now()
	writer := volumeCheckPod(ns, "writer", from, "write", file, token)
	if _, err := env.cs.CoreV1().Pods(ns).Create(ctx, writer, metav1.CreateOptions{}); err != nil {
		failf(t, "create pod %s/writer: %v", ns, err)
	}
	waitPodLog(t, ns, "writer", "volumecheck: wrote "+token+" to "+file, runDeadline)
	t.Logf("writer on %s wrote the token %s after %s", from, token, time.Since(start).Round(100*time.Millisecond))
	vol := volumeHandle(t, ns, "data")

	moved := time.Now()
	if err := env.cs.CoreV1().Pods(ns).Delete(ctx, "writer", metav1.DeleteOptions{}); err != nil {
		failf(t, "delete pod %s/writer: %v", ns, err)
	}
	eventually(t, runDeadline, fmt.Sprintf("volume %s detached from %s in the cloud", vol, from), func() error {
		v, err := env.cloud.GetVolume(ctx, vol)
		if err != nil {
			return err
		}
		if v.AttachedTo != "" {
			return fmt.Errorf("cloud volume %s: expected detached, attached to %s", vol, v.AttachedTo)
		}
		return nil
	})
	reader := volumeCheckPod(ns, "reader", to, "read", file)
	if _, err := env.cs.CoreV1().Pods(ns).Create(ctx, reader, metav1.CreateOptions{}); err != nil {
		failf(t, "create pod %s/reader: %v", ns, err)
	}
	waitPodLog(t, ns, "reader", "volumecheck: read "+token+" from "+file, runDeadline)
	v, err := env.cloud.GetVolume(ctx, vol)
	if err != nil || v.AttachedTo != to {
		failf(t, "cloud volume %s: expected attached to %s, seen %+v (err %v)", vol, to, v, err)
	}
	t.Logf("reader on %s read the token back %s after the writer was deleted", to, time.Since(moved).Round(100*time.Millisecond))
}

// twoNodesOfOneZone returns two different nodes whose driver topology zone is
// the same, so that a volume can move between them.
func twoNodesOfOneZone(t *testing.T, nodes []corev1.Node) (string, string) {
	t.Helper()
	byZone := map[string][]string{}
	for _, n := range nodes {
		z := n.Labels["topology.disk.fakecloud.dev/zone"]
		if z == "" {
			continue
		}
		byZone[z] = append(byZone[z], n.Name)
		if len(byZone[z]) == 2 {
			return byZone[z][0], byZone[z][1]
		}
	}
	failf(t, "no two nodes share a topology.disk.fakecloud.dev/zone: %v", byZone)
	return "", ""
}

// volumeCheckPod runs volumecheck with args on node, with claim "data" at /data/v0.
func volumeCheckPod(ns, name, node string, args ...string) *corev1.Pod {
	spec := podSpec(node, "data")
	spec.Containers[0].Image = cfg.VolumeCheckImage
	spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
	spec.Containers[0].Args = args
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "e2e"}}, Spec: spec}
}

// waitPodLog waits until the log of pod ns/name holds a line equal to want,
// and fails early on a volumecheck error line.
func waitPodLog(t *testing.T, ns, name, want string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("pod %s/%s logs %q", ns, name, want), func() error {
		p, err := env.cs.CoreV1().Pods(ns).Get(testCtx(t), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !isRunning(p) && p.Status.Phase != corev1.PodFailed {
			return fmt.Errorf("pod %s/%s: %s", ns, name, podState(p))
		}
		raw, err := env.cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(testCtx(t))
		if err != nil {
			return fmt.Errorf("logs of %s/%s: %w", ns, name, err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			if line == want {
				return nil
			}
			if strings.HasPrefix(line, "volumecheck: error:") {
				failf(t, "pod %s/%s on %s: %s", ns, name, p.Spec.NodeName, line)
			}
		}
		return fmt.Errorf("pod %s/%s (%s): log %q", ns, name, podState(p), strings.TrimSpace(string(raw)))
	})
}
