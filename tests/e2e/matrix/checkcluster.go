package matrix

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
	"github.com/fakecloud/fakecloud-csi/tests/e2e/localcluster"
)

// kubePlugins are the node plugins of a DaemonSet (deploy/base's fakecloud-csi-node): their
// debug endpoint read through the API server's pod proxy, a restart by deleting the node's
// pod (its registrar removes the registration socket; the replacement registers again).
type kubePlugins struct {
	cs                  kubernetes.Interface
	namespace, selector string
}

// pluginRestartWindow bounds the wait for a replaced plugin pod to serve its debug endpoint.
const pluginRestartWindow = 2 * time.Minute

// pod is node's plugin pod: the newest not being deleted that matches the selector and runs
// on node, with the port of its container port named "http" (the driver's --http-addr,
// default 9809). Errors: none there.
func (k kubePlugins) pod(ctx context.Context, node string) (*corev1.Pod, string, error) {
	pl, err := k.cs.CoreV1().Pods(k.namespace).List(ctx, metav1.ListOptions{LabelSelector: k.selector,
		FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, "", fmt.Errorf("list the node plugin's pods: %w", err)
	}
	var best *corev1.Pod
	for i := range pl.Items {
		p := &pl.Items[i]
		if p.Spec.NodeName != node || p.DeletionTimestamp != nil {
			continue
		}
		if best == nil || p.CreationTimestamp.After(best.CreationTimestamp.Time) {
			best = p
		}
	}
	if best == nil {
		return nil, "", fmt.Errorf("no node plugin pod (%s in %s) on %s", k.selector, k.namespace, node)
	}
	port := "9809"
	for _, c := range best.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == "http" {
				port = strconv.Itoa(int(cp.ContainerPort))
			}
		}
	}
	return best, port, nil
}

// getJSON decodes node's plugin's debug endpoint path into v (at most 1 MiB).
func (k kubePlugins) getJSON(ctx context.Context, node, path string, v any) error {
	p, port, err := k.pod(ctx, node)
	if err != nil {
		return err
	}
	body, err := k.cs.CoreV1().Pods(k.namespace).ProxyGet("http", p.Name, port, path, nil).Stream(ctx)
	if err != nil {
		return fmt.Errorf("%s of pod %s: %w", path, p.Name, err)
	}
	defer body.Close()
	return decodeDebug(body, path, v)
}

// restart deletes node's plugin pod and waits (pluginRestartWindow) until its replacement
// serves /debug/capacity.
func (k kubePlugins) restart(ctx context.Context, node string) error {
	old, _, err := k.pod(ctx, node)
	if err != nil {
		return err
	}
	uid := old.UID
	if err := k.cs.CoreV1().Pods(k.namespace).Delete(ctx, old.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
		return fmt.Errorf("delete the node plugin pod %s: %w", old.Name, err)
	}
	var last error
	if _, ok := waitFor(ctx, pluginRestartWindow, func() bool {
		p, _, err := k.pod(ctx, node)
		if err != nil || p.UID == uid {
			last = err
			return false
		}
		var d struct{}
		last = k.getJSON(ctx, node, "/debug/capacity", &d)
		return last == nil
	}); !ok {
		msg := fmt.Sprintf("the node plugin pod replacing %s on %s did not serve /debug/capacity within %s", old.Name, node, pluginRestartWindow)
		if last == nil {
			return errors.New(msg + " (the old pod still listed)")
		}
		return fmt.Errorf("%s: %w", msg, last)
	}
	return nil
}

// checkState is what the checks change and RunCheck puts back.
type checkState struct {
	// period is the CSIDriver's nodeAllocatableUpdatePeriodSeconds (nil: unset).
	period *int64
	// outOfBandSlots is the target instance's.
	outOfBandSlots int
}

// periodValue is the period as cellRun keeps it (0: unset).
func (s checkState) periodValue() int64 {
	if s.period == nil {
		return 0
	}
	return *s.period
}

// saveState reads the CSIDriver's period and the target instance's out-of-band slots.
func saveState(ctx context.Context, cs kubernetes.Interface, cc *admin.Client, target string) (checkState, error) {
	var s checkState
	d, err := cs.StorageV1().CSIDrivers().Get(ctx, localcluster.DriverName, metav1.GetOptions{})
	if err != nil {
		return s, fmt.Errorf("read CSIDriver %s: %w", localcluster.DriverName, err)
	}
	if p := d.Spec.NodeAllocatableUpdatePeriodSeconds; p != nil {
		v := *p
		s.period = &v
	}
	in, err := cc.GetInstance(ctx, target)
	if err != nil {
		return s, fmt.Errorf("read the fake cloud's instance %s: %w", target, err)
	}
	s.outOfBandSlots = in.OutOfBandSlots
	return s, nil
}

// restore puts back s (the target's out-of-band slots, the CSIDriver's period) and, when the
// rejection check created it, deletes the checks' namespace and waits until it and the
// volumes of its claims (their PVs: the provisioner deletes the cloud's volumes) are gone.
// It tries every step and returns what failed.
func (r *cellRun) restore(ctx context.Context, s checkState) []error {
	var errs []error
	oob := s.outOfBandSlots
	if _, err := r.cloud.PatchInstance(ctx, r.target, cloud.InstancePatch{OutOfBandSlots: &oob}); err != nil {
		errs = append(errs, fmt.Errorf("put back %s's out-of-band slots (%d): %w", r.target, oob, err))
	}
	if d, err := r.cs.StorageV1().CSIDrivers().Get(ctx, localcluster.DriverName, metav1.GetOptions{}); err != nil {
		errs = append(errs, fmt.Errorf("read CSIDriver %s: %w", localcluster.DriverName, err))
	} else if now := d.Spec.NodeAllocatableUpdatePeriodSeconds; (now == nil) != (s.period == nil) || (now != nil && *now != *s.period) {
		if err := r.setPeriod(ctx, s.periodValue()); err != nil {
			errs = append(errs, fmt.Errorf("put back the period: %w", err))
		}
	}
	if !r.createdNS {
		return errs
	}
	if err := r.cs.CoreV1().Namespaces().Delete(ctx, r.ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return append(errs, fmt.Errorf("delete namespace %s: %w", r.ns, err))
	}
	var left string
	if _, ok := waitFor(ctx, time.Hour, func() bool {
		left = r.leftOf(ctx)
		return left == ""
	}); !ok {
		errs = append(errs, fmt.Errorf("namespace %s not gone: %s", r.ns, left))
	}
	return errs
}

// leftOf says what of the checks' namespace is left: the namespace itself, or PVs whose claim
// was in it; "" when nothing is.
func (r *cellRun) leftOf(ctx context.Context) string {
	if _, err := r.cs.CoreV1().Namespaces().Get(ctx, r.ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return "the namespace (terminating)"
	}
	pvs, err := r.cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "the PVs cannot be listed: " + err.Error()
	}
	var names []string
	for _, pv := range pvs.Items {
		if ref := pv.Spec.ClaimRef; ref != nil && ref.Namespace == r.ns {
			names = append(names, pv.Name)
		}
	}
	if len(names) > 0 {
		return fmt.Sprintf("PVs of its claims not deleted yet: %v", names)
	}
	return ""
}
