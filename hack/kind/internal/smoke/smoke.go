// Package smoke is the short end-to-end check of a deployed driver that `make
// deploy-check-local` runs after applying deploy/base, and that docs/real-cluster.md gives as
// kubectl and curl commands: a claim and a pod on one node, attached through the fake cloud;
// the node's limit lowered in the fake cloud and its CSINode count following within the
// CSIDriver's nodeAllocatableUpdatePeriodSeconds (KEP-4876); the limit restored and the count
// back; the pod and claim deleted, and the volume gone from the fake cloud too.
package smoke

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/fakecloud/fakecloud-csi/internal/plural"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// DriverName is the CSI driver whose CSINode entry and volumes the check follows.
const DriverName = "disk.fakecloud.dev"

// maxBody bounds what the check reads of one fake-cloud answer (an instance or a volume).
const maxBody = 1 << 20

// Options say where the check runs and against what.
type Options struct {
	// Namespace holds the check's claim and pod; it must exist.
	Namespace string
	// Name names the claim and the pod; neither may exist.
	Name string
	// Node is the node the pod is placed on; "" picks the first node (by name) whose CSINode
	// lists the driver with a count of 2 or more.
	Node string
	// StorageClass is the claim's class (deploy/base: fakecloud-disk).
	StorageClass string
	// PodImage is the pod's one container image; it runs its default command.
	PodImage string
	// CloudURL is the fake cloud's base URL, e.g. http://127.0.0.1:8080.
	CloudURL string
	// AdminToken is a fake-cloud token of role admin (PATCH /v1/instances/{id}).
	AdminToken string
	// Timeout bounds each step that waits (pod running, count lowered, count restored,
	// deletion).
	Timeout time.Duration
	// Log gets one line per step, with the seconds since Run started.
	Log io.Writer
}

// Validate reports every missing or malformed option at once.
func (o Options) Validate() error {
	var errs []error
	for name, v := range map[string]string{"namespace": o.Namespace, "name": o.Name, "storage class": o.StorageClass,
		"pod image": o.PodImage, "cloud URL": o.CloudURL, "admin token": o.AdminToken} {
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is required", name))
		}
	}
	if u, err := url.Parse(o.CloudURL); o.CloudURL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		errs = append(errs, fmt.Errorf("cloud URL %q: want http(s)://host[:port]", o.CloudURL))
	}
	if o.Timeout <= 0 || o.Timeout > time.Hour {
		errs = append(errs, fmt.Errorf("timeout %s: want more than 0 and at most 1h", o.Timeout))
	}
	if o.Log == nil {
		errs = append(errs, errors.New("log writer is required"))
	}
	return errors.Join(errs...)
}

// Check runs the check against one cluster and its fake cloud.
type Check struct {
	cs    kubernetes.Interface
	hc    *http.Client
	o     Options
	start time.Time
}

// New returns a Check; it validates o and makes no request.
func New(cs kubernetes.Interface, hc *http.Client, o Options) (*Check, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Check{cs: cs, hc: hc, o: o}, nil
}

func (c *Check) logf(format string, args ...any) {
	fmt.Fprintf(c.o.Log, "[%5.1fs] %s\n", time.Since(c.start).Seconds(), fmt.Sprintf(format, args...))
}

// Run runs the check. It deletes the claim and pod it created and restores the instance's
// out-of-band slots also when a step fails, and returns the first failure.
func (c *Check) Run(ctx context.Context) (err error) {
	c.start = time.Now()
	node, count, err := c.pickNode(ctx)
	if err != nil {
		return err
	}
	inst, err := c.instance(ctx, node)
	if err != nil {
		return err
	}
	c.logf("node %s: CSINode count %d; fake cloud instance %s, type %s, limit %d, %d out-of-band slots",
		node, count, inst.ID, inst.InstanceType, inst.AttachLimit, inst.OutOfBandSlots)

	defer func() {
		if derr := c.cleanUp(context.WithoutCancel(ctx)); derr != nil && err == nil {
			err = derr
		}
	}()
	volumeID, err := c.attach(ctx, node)
	if err != nil {
		return err
	}

	// The count may be bound by the slots or by the attachment quota's headroom
	// (docs/how-it-fits.md): out-of-band slots that leave one slot fewer than the count now make
	// the slots the bound, so the count must fall by exactly one either way.
	count, err = c.currentCount(ctx, node)
	if err != nil {
		return err
	}
	lowered, err := loweredOutOfBand(inst.AttachLimit, inst.OutOfBandSlots, count)
	if err != nil {
		return fmt.Errorf("node %s: %w", node, err)
	}
	if err := c.patchOutOfBand(ctx, node, lowered); err != nil {
		return err
	}
	restored := false
	defer func() {
		if restored {
			return
		}
		if rerr := c.patchOutOfBand(context.WithoutCancel(ctx), node, inst.OutOfBandSlots); rerr != nil && err == nil {
			err = rerr
		}
	}()
	c.logf("fake cloud: %s's out-of-band slots %d -> %d (slots %d -> %d, one below the count %d)",
		node, inst.OutOfBandSlots, lowered, inst.AttachLimit-inst.OutOfBandSlots, inst.AttachLimit-lowered, count)
	if err := c.waitCount(ctx, node, count-1); err != nil {
		return err
	}
	restored = true
	if err := c.patchOutOfBand(ctx, node, inst.OutOfBandSlots); err != nil {
		return err
	}
	c.logf("fake cloud: %s's out-of-band slots back to %d", node, inst.OutOfBandSlots)
	if err := c.waitCount(ctx, node, count); err != nil {
		return err
	}

	if err := c.cleanUp(ctx); err != nil {
		return err
	}
	return c.waitVolumeGone(ctx, volumeID)
}

// pickNode returns Options.Node, or the first node whose CSINode lists the driver with a
// count of at least 2 (so that it can go down by one without reaching the floor of 1), and
// that count.
func (c *Check) pickNode(ctx context.Context) (string, int32, error) {
	list, err := c.cs.StorageV1().CSINodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", 0, fmt.Errorf("list CSINodes: %w", err)
	}
	var seen []string
	for _, n := range list.Items {
		count, ok := driverCount(&n)
		if !ok {
			continue
		}
		seen = append(seen, fmt.Sprintf("%s=%d", n.Name, count))
		if (c.o.Node == "" && count >= 2) || n.Name == c.o.Node {
			if count < 2 {
				return "", 0, fmt.Errorf("node %s: CSINode count %d; the check lowers it by one, which needs 2 or more", n.Name, count)
			}
			return n.Name, count, nil
		}
	}
	if c.o.Node != "" {
		return "", 0, fmt.Errorf("node %s: its CSINode does not list %s with a count (have %v): is the node plugin running there?", c.o.Node, DriverName, seen)
	}
	return "", 0, fmt.Errorf("no CSINode lists %s with a count of 2 or more (have %v): is the node plugin running?", DriverName, seen)
}

func driverCount(n *storagev1.CSINode) (int32, bool) {
	for _, d := range n.Spec.Drivers {
		if d.Name == DriverName && d.Allocatable != nil && d.Allocatable.Count != nil {
			return *d.Allocatable.Count, true
		}
	}
	return 0, false
}

// attach creates the claim and the pod on node, waits until the pod runs and the volume is
// attached to node both in Kubernetes (VolumeAttachment) and in the fake cloud, and returns
// the volume's ID (the PV's volumeHandle, the cloud's volume ID).
func (c *Check) attach(ctx context.Context, node string) (string, error) {
	if err := c.createClaimAndPod(ctx, node); err != nil {
		return "", err
	}
	var volumeID, state string
	err := c.poll(ctx, func(ctx context.Context) (bool, error) {
		p, err := c.cs.CoreV1().Pods(c.o.Namespace).Get(ctx, c.o.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.Phase == corev1.PodFailed {
			return false, fmt.Errorf("pod %s failed: %s", c.o.Name, p.Status.Message)
		}
		state = "pod " + string(p.Status.Phase)
		if p.Status.Phase != corev1.PodRunning {
			return false, nil
		}
		claim, err := c.cs.CoreV1().PersistentVolumeClaims(c.o.Namespace).Get(ctx, c.o.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pv, err := c.cs.CoreV1().PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
		if err != nil || pv.Spec.CSI == nil {
			state += ", PV not found"
			return false, nil //nolint:nilerr // not there yet: poll again until the timeout
		}
		volumeID = pv.Spec.CSI.VolumeHandle
		vas, err := c.cs.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		attached := false
		for _, va := range vas.Items {
			if src := va.Spec.Source.PersistentVolumeName; src != nil && *src == pv.Name && va.Spec.NodeName == node && va.Status.Attached {
				attached = true
			}
		}
		if !attached {
			state += ", VolumeAttachment not attached"
			return false, nil
		}
		var v cloud.Volume
		if code, err := c.cloud(ctx, http.MethodGet, "/v1/volumes/"+url.PathEscape(volumeID), nil, &v); err != nil || code != http.StatusOK {
			state += fmt.Sprintf(", fake cloud volume %s: %d %v", volumeID, code, err)
			return false, nil
		}
		state = fmt.Sprintf("fake cloud volume %s %s to %q", volumeID, v.State, v.AttachedTo)
		return v.State == cloud.StateAttached && v.AttachedTo == node, nil
	})
	if err != nil {
		return "", fmt.Errorf("pod %s running with its volume attached to %s: %w (last: %s)", c.o.Name, node, err, state)
	}
	c.logf("pod Running; VolumeAttachment attached; %s", state)
	return volumeID, nil
}

// createClaimAndPod creates the claim (1Gi of StorageClass) and the pod on node that mounts it.
func (c *Check) createClaimAndPod(ctx context.Context, node string) error {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: c.o.Name, Namespace: c.o.Namespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &c.o.StorageClass,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := c.cs.CoreV1().PersistentVolumeClaims(c.o.Namespace).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create claim %s/%s: %w", c.o.Namespace, c.o.Name, err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: c.o.Name, Namespace: c.o.Namespace},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: node},
			Containers: []corev1.Container{{
				Name: "check", Image: c.o.PodImage,
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.o.Name},
			}}},
		},
	}
	if _, err := c.cs.CoreV1().Pods(c.o.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create pod %s/%s: %w", c.o.Namespace, c.o.Name, err)
	}
	c.logf("created claim and pod %s/%s (class %s) on node %s", c.o.Namespace, c.o.Name, c.o.StorageClass, node)
	return nil
}

// loweredOutOfBand is the out-of-band slot count that leaves an instance of attach limit limit
// (and oob out-of-band slots now) exactly count-1 slots, so that a CSINode count of count,
// whether bound by the slots or by the quota's headroom, must fall to count-1. Errors: count below 2
// (the count never goes below 1), or a count above the instance's slots now.
func loweredOutOfBand(limit, oob int, count int32) (int, error) {
	if count < 2 {
		return 0, fmt.Errorf("CSINode count %d; lowering it by one needs 2 or more", count)
	}
	if slots := limit - oob; int(count) > slots {
		return 0, fmt.Errorf("CSINode count %d is above the instance's %s (limit %d, %d out-of-band)", count, plural.Of(slots, "slot", "slots"), limit, oob)
	}
	return limit - int(count) + 1, nil
}

// currentCount is node's CSINode count for the driver now.
func (c *Check) currentCount(ctx context.Context, node string) (int32, error) {
	n, err := c.cs.StorageV1().CSINodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("CSINode %s: %w", node, err)
	}
	count, ok := driverCount(n)
	if !ok {
		return 0, fmt.Errorf("CSINode %s no longer lists %s with a count", node, DriverName)
	}
	return count, nil
}

// waitCount waits until node's CSINode count for the driver is want.
func (c *Check) waitCount(ctx context.Context, node string, want int32) error {
	var got int32 = -1
	err := c.poll(ctx, func(ctx context.Context) (bool, error) {
		n, err := c.cs.StorageV1().CSINodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got, _ = driverCount(n)
		return got == want, nil
	})
	if err != nil {
		return fmt.Errorf("CSINode %s count %d, want %d: %w", node, got, want, err)
	}
	c.logf("CSINode %s count is %d", node, want)
	return nil
}

// cleanUp deletes the pod and the claim (if there) and waits until both are gone; the
// StorageClass's reclaim policy Delete then deletes the PV and the cloud volume.
func (c *Check) cleanUp(ctx context.Context) error {
	zero := int64(0)
	errPod := c.cs.CoreV1().Pods(c.o.Namespace).Delete(ctx, c.o.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	errPVC := c.cs.CoreV1().PersistentVolumeClaims(c.o.Namespace).Delete(ctx, c.o.Name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(errPod) && apierrors.IsNotFound(errPVC) {
		return nil
	}
	for _, err := range []error{errPod, errPVC} {
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s/%s: %w", c.o.Namespace, c.o.Name, err)
		}
	}
	err := c.poll(ctx, func(ctx context.Context) (bool, error) {
		_, errPod := c.cs.CoreV1().Pods(c.o.Namespace).Get(ctx, c.o.Name, metav1.GetOptions{})
		_, errPVC := c.cs.CoreV1().PersistentVolumeClaims(c.o.Namespace).Get(ctx, c.o.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(errPod) && apierrors.IsNotFound(errPVC), nil
	})
	if err != nil {
		return fmt.Errorf("pod and claim %s/%s deleted: %w", c.o.Namespace, c.o.Name, err)
	}
	c.logf("deleted pod and claim %s/%s", c.o.Namespace, c.o.Name)
	return nil
}

// waitVolumeGone waits until the fake cloud no longer has the volume (detached, then deleted
// by csi-provisioner once its PV is released).
func (c *Check) waitVolumeGone(ctx context.Context, volumeID string) error {
	var last int
	err := c.poll(ctx, func(ctx context.Context) (bool, error) {
		code, err := c.cloud(ctx, http.MethodGet, "/v1/volumes/"+url.PathEscape(volumeID), nil, nil)
		last = code
		return err == nil && code == http.StatusNotFound, nil
	})
	if err != nil {
		return fmt.Errorf("fake cloud volume %s deleted (last answer %d): %w", volumeID, last, err)
	}
	c.logf("fake cloud volume %s detached and deleted", volumeID)
	return nil
}

func (c *Check) patchOutOfBand(ctx context.Context, node string, slots int) error {
	body, _ := json.Marshal(map[string]int{"outOfBandSlots": slots})
	code, err := c.cloud(ctx, http.MethodPatch, "/v1/instances/"+url.PathEscape(node), body, nil)
	if err != nil {
		return fmt.Errorf("PATCH instance %s outOfBandSlots=%d: %w", node, slots, err)
	}
	if code != http.StatusOK {
		return fmt.Errorf("PATCH instance %s outOfBandSlots=%d: HTTP %d", node, slots, code)
	}
	return nil
}

func (c *Check) instance(ctx context.Context, node string) (cloud.Instance, error) {
	var inst cloud.Instance
	code, err := c.cloud(ctx, http.MethodGet, "/v1/instances/"+url.PathEscape(node), nil, &inst)
	if err != nil {
		return inst, fmt.Errorf("fake cloud instance %s: %w", node, err)
	}
	if code != http.StatusOK {
		return inst, fmt.Errorf("fake cloud instance %s: HTTP %d (the node ID is the node name: is it registered?)", node, code)
	}
	return inst, nil
}

// cloud sends one request to the fake cloud and decodes a 200 answer into out (when not nil).
// It returns the HTTP status; err is for transport and decoding failures only.
func (c *Check) cloud(ctx context.Context, method, path string, body []byte, out any) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.o.CloudURL+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.o.AdminToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// poll calls cond every second until it is true, returns an error, or Options.Timeout passes.
func (c *Check) poll(ctx context.Context, cond wait.ConditionWithContextFunc) error {
	return wait.PollUntilContextTimeout(ctx, time.Second, c.o.Timeout, true, cond)
}
