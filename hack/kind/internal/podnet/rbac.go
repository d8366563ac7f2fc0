package podnet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// NodeReaderName names the ClusterRole and ClusterRoleBinding that let every node read all
// Nodes.
const NodeReaderName = "podnet:node-reader"

// NodeReaderRBAC returns the ClusterRole (get/list/watch nodes) and its ClusterRoleBinding to
// group system:nodes that podnet needs: it reads all Nodes with its node's own credentials,
// but the Node authorizer lets a node read only its own Node object (kubernetes
// plugin/pkg/auth/authorizer/node/node_authorizer.go, authorizeNode: "cannot read all nodes,
// only its own Node object"). That authorizer answers "no opinion", so RBAC decides next.
func NodeReaderRBAC() (*rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding) {
	meta := metav1.ObjectMeta{Name: NodeReaderName, Labels: map[string]string{"app.kubernetes.io/managed-by": "podnet"}}
	role := &rbacv1.ClusterRole{
		ObjectMeta: meta,
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: *meta.DeepCopy(),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: NodeReaderName},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:nodes"}},
	}
	return role, binding
}

// EnsureNodeReader creates the objects of NodeReaderRBAC with client (which must be allowed
// to, e.g. the control plane's admin.conf) unless they exist; existing ones are left as they
// are. It returns how many it created (0..2).
func EnsureNodeReader(ctx context.Context, client kubernetes.Interface) (int, error) {
	role, binding := NodeReaderRBAC()
	created := 0
	if _, err := client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{FieldManager: "podnet"}); err == nil {
		created++
	} else if !apierrors.IsAlreadyExists(err) {
		return created, fmt.Errorf("create ClusterRole %s: %w", NodeReaderName, err)
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{FieldManager: "podnet"}); err == nil {
		created++
	} else if !apierrors.IsAlreadyExists(err) {
		return created, fmt.Errorf("create ClusterRoleBinding %s: %w", NodeReaderName, err)
	}
	return created, nil
}

// bootstrapNodeReader runs on a control-plane node (where adminKubeconfig exists; elsewhere it
// returns at once): it retries EnsureNodeReader every interval until it succeeds or ctx ends,
// because admin.conf is written before the API server is up and before kubeadm grants it
// cluster-admin. It logs the first failure and the success, not every retry. This is what
// lets podnet work without any manifest applied from outside (the kind config disables kind's
// default CNI step, which would otherwise be the place for this RBAC).
func bootstrapNodeReader(ctx context.Context, adminKubeconfig string, interval time.Duration) {
	if _, err := os.Stat(adminKubeconfig); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			klog.ErrorS(err, "Cannot check the admin kubeconfig; not creating the node-reader RBAC", "path", adminKubeconfig)
		}
		return
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", adminKubeconfig)
	if err != nil {
		klog.ErrorS(err, "Cannot load the admin kubeconfig; not creating the node-reader RBAC", "path", adminKubeconfig)
		return
	}
	cfg.UserAgent = "podnet"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		klog.ErrorS(err, "Cannot build a client from the admin kubeconfig", "path", adminKubeconfig)
		return
	}
	logged := false
	for {
		n, err := EnsureNodeReader(ctx, client)
		if err == nil {
			klog.InfoS("Node-reader RBAC in place", "name", NodeReaderName, "created", n)
			return
		}
		if !logged {
			klog.InfoS("Cannot create the node-reader RBAC yet; retrying", "err", err.Error(), "every", interval)
			logged = true
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}
