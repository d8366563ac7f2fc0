package manifests_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fakecloud/fakecloud-csi/hack/kind/internal/manifests"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

// kindOnlyDriverArgs are the flags deploy/kind adds to the driver containers of deploy/base:
// the e2e suite's timings (those of the local-cluster harness), keyed by workload ID.
var kindOnlyDriverArgs = map[string][]string{
	"Deployment " + namespace + "/fakecloud-csi-controller": {
		"--publish-backoff-initial=2s", "--publish-backoff-max=10s",
	},
	"DaemonSet " + namespace + "/fakecloud-csi-node": {
		"--capacity-stability-window=0s", "--capacity-max-stability-window=0s", "--capacity-max-step=0",
		"--capacity-min-interval=1s", "--capacity-stale-after=40s",
	},
}

// TestKindOverlayScope: deploy/kind is deploy/base with the kind-only parts changed and
// nothing else: the same objects, the fake cloud's seed (kind's node names), its Service
// (the NodePort kind-config.yaml maps) and the driver containers' args, which must be
// deploy/base's args plus kindOnlyDriverArgs in the same order (the overlay replaces args
// whole, so a flag added to deploy/base but not to deploy/kind's patch fails here).
func TestKindOverlayScope(t *testing.T) {
	base, kind := renderDir(t, baseDir(t)), render(t)
	if got, want := ids(kind), ids(base); !slices.Equal(got, want) {
		t.Fatalf("deploy/kind renders %v, deploy/base %v: want the same objects in the same order", got, want)
	}
	for i, k := range kind.objs {
		b := base.objs[i].DeepCopy()
		k = k.DeepCopy()
		id := manifests.ID(k)
		switch id {
		case "ConfigMap " + namespace + "/fakecloud-seed":
			unstructured.RemoveNestedField(b.Object, "data", "seed.yaml")
			unstructured.RemoveNestedField(k.Object, "data", "seed.yaml")
		case "Service " + namespace + "/fakecloud":
			checkKindService(t, b, k)
			unstructured.RemoveNestedField(b.Object, "spec")
			unstructured.RemoveNestedField(k.Object, "spec")
		}
		if extra, ok := kindOnlyDriverArgs[id]; ok {
			baseArgs := driverArgs(t, b)
			kindArgs := driverArgs(t, k)
			if got := slices.DeleteFunc(slices.Clone(kindArgs), func(a string) bool { return slices.Contains(extra, a) }); !slices.Equal(got, baseArgs) {
				t.Errorf("%s: deploy/kind's driver args without %v are %v, want deploy/base's %v", id, extra, got, baseArgs)
			}
			for _, a := range extra {
				if !slices.Contains(kindArgs, a) {
					t.Errorf("%s: deploy/kind's driver lacks %s (the e2e suite's timing)", id, a)
				}
			}
			setDriverArgs(t, b, nil)
			setDriverArgs(t, k, nil)
		}
		if !equality.Semantic.DeepEqual(b.Object, k.Object) {
			t.Errorf("%s differs between deploy/base and deploy/kind beyond the kind-only parts", id)
		}
	}
}

// checkKindService: deploy/base's fake cloud Service is in-cluster only (ClusterIP; reached
// with kubectl port-forward), deploy/kind's is the NodePort that kind-config.yaml maps.
func checkKindService(t *testing.T, base, kind *unstructured.Unstructured) {
	t.Helper()
	if typ, _, _ := unstructured.NestedString(base.Object, "spec", "type"); typ != string(corev1.ServiceTypeClusterIP) {
		t.Errorf("deploy/base's fake cloud Service is %q, want ClusterIP (a real cluster's nodes need not expose it)", typ)
	}
	if typ, _, _ := unstructured.NestedString(kind.Object, "spec", "type"); typ != string(corev1.ServiceTypeNodePort) {
		t.Errorf("deploy/kind's fake cloud Service is %q, want NodePort", typ)
	}
}

func driverContainer(t *testing.T, o *unstructured.Unstructured) (containers []any, i int) {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	for i, c := range cs {
		if m, ok := c.(map[string]any); ok && m["name"] == "driver" {
			return cs, i
		}
	}
	t.Fatalf("%s has no driver container", manifests.ID(o))
	return nil, 0
}

func driverArgs(t *testing.T, o *unstructured.Unstructured) []string {
	t.Helper()
	cs, i := driverContainer(t, o)
	args, _, _ := unstructured.NestedStringSlice(cs[i].(map[string]any), "args")
	return args
}

func setDriverArgs(t *testing.T, o *unstructured.Unstructured, args []string) {
	t.Helper()
	cs, i := driverContainer(t, o)
	m := cs[i].(map[string]any)
	if args == nil {
		delete(m, "args")
	} else {
		if err := unstructured.SetNestedStringSlice(m, args, "args"); err != nil {
			t.Fatal(err)
		}
	}
	if err := unstructured.SetNestedSlice(o.Object, cs, "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
}

// TestBaseSeedRegistersAnyNode: deploy/base's fake cloud knows no node name: its seed (as the
// fake cloud parses it) has instance types and no instance, and the fake cloud runs with
// --auto-register and a default instance type the seed defines, so every node of any cluster
// gets an instance the first time its node plugin asks.
func TestBaseSeedRegistersAnyNode(t *testing.T) {
	r := renderDir(t, baseDir(t))
	cm := get[*corev1.ConfigMap](t, r, "ConfigMap "+namespace+"/fakecloud-seed")
	f := filepath.Join(t.TempDir(), "seed.yaml")
	if err := os.WriteFile(f, []byte(cm.Data["seed.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	seed, err := server.LoadSeed(f)
	if err != nil {
		t.Fatalf("deploy/base's seed: %v", err)
	}
	if len(seed.Instances) != 0 {
		t.Errorf("deploy/base's seed names %d instances; it cannot know a cluster's node names", len(seed.Instances))
	}
	d := get[*appsv1.Deployment](t, r, "Deployment "+namespace+"/fakecloud")
	args := d.Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--auto-register") {
		t.Errorf("fake cloud args %v: want --auto-register", args)
	}
	var defType string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--default-instance-type="); ok {
			defType = v
		}
	}
	if !slices.ContainsFunc(seed.InstanceTypes, func(it cloud.InstanceType) bool { return it.Name == defType }) {
		t.Errorf("--default-instance-type=%q is not an instance type of the seed", defType)
	}
}

// TestNodeClusterRoleRules pins what the node plugin's ServiceAccount may do in both
// overlays: read what the cluster check (pkg/csi/clustercheck) reads, including list on
// VolumeAttachments (the attacher's errorCode evidence; without it the evidence is "unknown"
// on every cluster), and create its Warning Event; nothing else, and no write on any object
// it reads.
func TestNodeClusterRoleRules(t *testing.T) {
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"csidrivers"}, ResourceNames: []string{driverName}, Verbs: []string{"get"}},
		{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"volumeattachments"}, Verbs: []string{"list"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create"}},
	}
	for _, dir := range []string{baseDir(t), deployDir(t)} {
		cr := get[*rbacv1.ClusterRole](t, renderDir(t, dir), "ClusterRole fakecloud-csi-node")
		if !equality.Semantic.DeepEqual(cr.Rules, want) {
			t.Errorf("%s: the node ClusterRole's rules are %+v, want %+v", dir, cr.Rules, want)
		}
	}
}
