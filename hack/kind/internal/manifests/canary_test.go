package manifests_test

import (
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
)

// TestCanaryOverlay: deploy/canary is deploy/kind plus one DaemonSet. The stable node
// DaemonSet keeps its name and selector (immutable on a running cluster) and reports the
// static count off the canary nodes; the canary is the same pod on the labelled nodes with
// dynamic capacity; the two never select each other's pods or share a node.
func TestCanaryOverlay(t *testing.T) {
	base := render(t)
	canary := renderDir(t, filepath.Join(repoRoot(t), "deploy", "canary"))

	stableID, canaryID := "DaemonSet "+namespace+"/fakecloud-csi-node", "DaemonSet "+namespace+"/fakecloud-csi-node-canary"
	if want := append(ids(base), canaryID); !equalSets(ids(canary), want) {
		t.Errorf("deploy/canary renders %v, want deploy/kind's objects and %s", ids(canary), canaryID)
	}
	baseDS := get[*appsv1.DaemonSet](t, base, stableID)
	stable := get[*appsv1.DaemonSet](t, canary, stableID)
	canaryDS := get[*appsv1.DaemonSet](t, canary, canaryID)

	if !equality.Semantic.DeepEqual(stable.Spec.Selector, baseDS.Spec.Selector) {
		t.Errorf("the overlay changes the stable selector %v to %v (immutable)", baseDS.Spec.Selector, stable.Spec.Selector)
	}
	for _, p := range []struct {
		a, b *appsv1.DaemonSet
	}{{stable, canaryDS}, {canaryDS, stable}} {
		sel := labels.SelectorFromSet(p.a.Spec.Selector.MatchLabels)
		if !sel.Matches(labels.Set(p.a.Spec.Template.Labels)) {
			t.Errorf("%s does not select its own pods", p.a.Name)
		}
		if sel.Matches(labels.Set(p.b.Spec.Template.Labels)) {
			t.Errorf("%s selects the pods of %s", p.a.Name, p.b.Name)
		}
	}

	for _, tc := range []struct {
		ds       *appsv1.DaemonSet
		operator corev1.NodeSelectorOperator
		arg      string
	}{
		{stable, corev1.NodeSelectorOpNotIn, "--dynamic-capacity=false"},
		{canaryDS, corev1.NodeSelectorOpIn, "--dynamic-capacity=true"},
	} {
		spec := tc.ds.Spec.Template.Spec
		if got := nodeTerm(spec); got == nil || got.Key != "fakecloud.dev/dynamic-capacity" ||
			got.Operator != tc.operator || !slices.Equal(got.Values, []string{"true"}) {
			t.Errorf("%s node affinity %+v, want fakecloud.dev/dynamic-capacity %s [true]", tc.ds.Name, got, tc.operator)
		}
		if args := spec.Containers[0].Args; spec.Containers[0].Name != "driver" || args[len(args)-1] != tc.arg ||
			slices.Contains(args, map[string]string{"--dynamic-capacity=false": "--dynamic-capacity=true", "--dynamic-capacity=true": "--dynamic-capacity=false"}[tc.arg]) {
			t.Errorf("%s driver args %v, want %s last and not its opposite", tc.ds.Name, args, tc.arg)
		}
	}

	// Apart from the affinity, the flag and the selector label, the pods are deploy/kind's:
	// same sockets, state dir and node ID, so the kubelet sees one driver whichever runs.
	for _, ds := range []*appsv1.DaemonSet{stable, canaryDS} {
		spec := ds.Spec.Template.Spec.DeepCopy()
		spec.Affinity = nil
		spec.Containers[0].Args = spec.Containers[0].Args[:len(spec.Containers[0].Args)-1]
		if !equality.Semantic.DeepEqual(*spec, baseDS.Spec.Template.Spec) {
			t.Errorf("%s pod spec differs from deploy/kind's beyond affinity and --dynamic-capacity", ds.Name)
		}
	}
}

// nodeTerm is the single required node affinity expression of spec, nil when there is not
// exactly one.
func nodeTerm(spec corev1.PodSpec) *corev1.NodeSelectorRequirement {
	if spec.Affinity == nil || spec.Affinity.NodeAffinity == nil || spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	terms := spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 {
		return nil
	}
	return &terms[0].MatchExpressions[0]
}

func equalSets(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
