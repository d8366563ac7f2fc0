package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
)

// DriverNamespace is where deploy/base puts the driver's namespaced objects.
const DriverNamespace = "fakecloud-csi"

// deployFiles are the deploy/base files the local cluster applies: the
// cluster-level objects of the driver, with the RBAC of every sidecar
// (provisioner, attacher, resizer, snapshotter) and of the node plugin, and the
// VolumeAttributesClass (S19 modifies a claim to it). The
// driver's own processes run outside the cluster, so its Deployment and
// DaemonSet are not among them; the VolumeSnapshotClass needs the snapshot
// CRDs first (applySnapshotSupport).
func deployFiles(dir string) ([]string, error) {
	var rbac []string
	for _, pattern := range []string{"rbac-*.yaml", "resizer-*.yaml", "snapshotter-*.yaml"} {
		m, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return nil, err
		}
		rbac = append(rbac, m...)
	}
	sort.Strings(rbac)
	return append(rbac, filepath.Join(dir, "csidriver.yaml"), filepath.Join(dir, "storageclass.yaml"),
		filepath.Join(dir, "volumeattributesclass.yaml")), nil
}

// applyDeploy creates the namespace and every object of deployFiles (one
// object per file); objects that exist are left alone. period, when not nil,
// replaces the CSIDriver's nodeAllocatableUpdatePeriodSeconds (0: removed;
// Versions.CSIDriverPeriodSeconds).
func applyDeploy(ctx context.Context, cs kubernetes.Interface, dir string, period *int64) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: DriverNamespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", DriverNamespace, err)
	}
	files, err := deployFiles(dir)
	if err != nil {
		return err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("read %s: %w", f, err)
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
		if err != nil {
			return fmt.Errorf("decode %s: %w", f, err)
		}
		if d, ok := obj.(*storagev1.CSIDriver); ok && period != nil {
			setPeriod(d, *period)
		}
		if err := create(ctx, cs, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s: %w", f, err)
		}
	}
	return nil
}

func create(ctx context.Context, cs kubernetes.Interface, obj runtime.Object) error {
	opts := metav1.CreateOptions{}
	var err error
	switch o := obj.(type) {
	case *corev1.ServiceAccount:
		_, err = cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, opts)
	case *rbacv1.ClusterRole:
		_, err = cs.RbacV1().ClusterRoles().Create(ctx, o, opts)
	case *rbacv1.ClusterRoleBinding:
		_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, o, opts)
	case *rbacv1.Role:
		_, err = cs.RbacV1().Roles(o.Namespace).Create(ctx, o, opts)
	case *rbacv1.RoleBinding:
		_, err = cs.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, opts)
	case *storagev1.CSIDriver:
		_, err = cs.StorageV1().CSIDrivers().Create(ctx, o, opts)
	case *storagev1.StorageClass:
		_, err = cs.StorageV1().StorageClasses().Create(ctx, o, opts)
	case *storagev1.VolumeAttributesClass:
		_, err = cs.StorageV1().VolumeAttributesClasses().Create(ctx, o, opts)
	default:
		err = fmt.Errorf("kind %T is not one the local cluster applies", obj)
	}
	return err
}

// waitNodes waits until every node is Ready and its CSINode lists the driver
// with an allocatable count.
// waitRegistered waits until every node's Node object exists (its kubelet registered).
func waitRegistered(ctx context.Context, cs kubernetes.Interface, nodes []Node, timeout time.Duration) error {
	return poll(ctx, timeout, func() (bool, error) {
		for _, n := range nodes {
			if _, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err != nil {
				return false, fmt.Errorf("node %s: %w", n.Name, err)
			}
		}
		return true, nil
	})
}

func waitNodes(ctx context.Context, cs kubernetes.Interface, nodes []Node, timeout time.Duration) error {
	return poll(ctx, timeout, func() (bool, error) {
		for _, n := range nodes {
			node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return false, fmt.Errorf("node %s: %w", n.Name, err)
			}
			ready := false
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready = true
				}
			}
			if !ready {
				return false, fmt.Errorf("node %s not Ready", n.Name)
			}
			csiNode, err := cs.StorageV1().CSINodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return false, fmt.Errorf("csinode %s: %w", n.Name, err)
			}
			found := false
			for _, d := range csiNode.Spec.Drivers {
				if d.Name == DriverName && d.Allocatable != nil && d.Allocatable.Count != nil {
					found = true
				}
			}
			if !found {
				return false, fmt.Errorf("csinode %s has no %s with allocatable.count", n.Name, DriverName)
			}
		}
		return true, nil
	})
}

// setPeriod sets d's nodeAllocatableUpdatePeriodSeconds to seconds, or removes
// it when seconds is 0.
func setPeriod(d *storagev1.CSIDriver, seconds int64) {
	if seconds == 0 {
		d.Spec.NodeAllocatableUpdatePeriodSeconds = nil
		return
	}
	d.Spec.NodeAllocatableUpdatePeriodSeconds = &seconds
}
