package podnet

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestEnsureNodeReader(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	for i, want := range []int{2, 0} { // created, then already there
		n, err := EnsureNodeReader(ctx, client)
		if err != nil || n != want {
			t.Fatalf("call %d: created %d, %v; want %d", i, n, err, want)
		}
	}
	b, err := client.RbacV1().ClusterRoleBindings().Get(ctx, NodeReaderName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Subjects) != 1 || b.Subjects[0].Kind != "Group" || b.Subjects[0].Name != "system:nodes" || b.RoleRef.Name != NodeReaderName {
		t.Errorf("binding %+v", b)
	}
	r, err := client.RbacV1().ClusterRoles().Get(ctx, NodeReaderName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Rules; len(got) != 1 || got[0].Resources[0] != "nodes" || len(got[0].Verbs) != 3 {
		t.Errorf("rules %+v", got)
	}

	// Not yet allowed (admin.conf before kubeadm grants it): an error naming the object.
	denied := fake.NewClientset()
	denied.PrependReactor("create", "clusterroles", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.NewForbidden(schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}, NodeReaderName, nil)
	})
	if _, err := EnsureNodeReader(ctx, denied); err == nil || !errors.IsForbidden(err) {
		t.Errorf("forbidden create: err = %v", err)
	}
}
