package manifests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// FieldManager is the server-side apply field manager of everything kindctl applies.
const FieldManager = "fakecloud-csi-kindctl"

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Applier applies rendered objects to one cluster with server-side apply.
type Applier struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	log    io.Writer
}

// NewApplier returns an Applier for the cluster of cfg; it logs one line per object to log.
// It makes no request until used.
func NewApplier(cfg *rest.Config, log io.Writer) (*Applier, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), log: log}, nil
}

// ApplyOptions choose how Apply writes.
type ApplyOptions struct {
	// DryRun sends every object with dryRun=All: the API server validates schema, admission
	// and RBAC and stores nothing.
	DryRun bool
	// RealPrerequisites, with DryRun, really applies Namespaces and CustomResourceDefinitions
	// (and waits for the CRDs to be established), because the server cannot dry-run an object
	// whose namespace or kind does not exist yet. Without DryRun it has no effect.
	RealPrerequisites bool
}

// isPrerequisite reports whether o must exist before other objects can be checked or created.
func isPrerequisite(o *unstructured.Unstructured) bool {
	gk := o.GroupVersionKind().GroupKind()
	return gk == schema.GroupKind{Kind: "Namespace"} ||
		gk == schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
}

// Apply server-side-applies objs: Namespaces and CRDs first (waiting until the CRDs are
// established when they are really applied), then the rest in order. It tries every object
// and returns all failures at once (errors.Join).
func (a *Applier) Apply(ctx context.Context, objs []*unstructured.Unstructured, o ApplyOptions) error {
	var first, rest []*unstructured.Unstructured
	for _, obj := range objs {
		if isPrerequisite(obj) {
			first = append(first, obj)
		} else {
			rest = append(rest, obj)
		}
	}
	var errs []error
	var crds []string
	for _, obj := range first {
		dry := o.DryRun && !o.RealPrerequisites
		if err := a.applyOne(ctx, obj, dry); err != nil {
			errs = append(errs, err)
			continue
		}
		if obj.GetKind() == "CustomResourceDefinition" && !dry {
			crds = append(crds, obj.GetName())
		}
	}
	if len(crds) > 0 {
		if err := a.waitEstablished(ctx, crds, 2*time.Minute); err != nil {
			errs = append(errs, err)
		}
		a.mapper.Reset()
	}
	for _, obj := range rest {
		if err := a.applyOne(ctx, obj, o.DryRun); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (a *Applier) applyOne(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) error {
	gvk := obj.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return fmt.Errorf("%s: the server does not serve %s (CRD not installed?): %w", ID(obj), gvk, err)
		}
		return fmt.Errorf("%s: %w", ID(obj), err)
	}
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return fmt.Errorf("%s: %w", ID(obj), err)
	}
	var ri dynamic.ResourceInterface = a.dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == "namespace" {
		if obj.GetNamespace() == "" {
			return fmt.Errorf("%s: namespaced object without a namespace", ID(obj))
		}
		ri = a.dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	}
	force := true
	opts := metav1.PatchOptions{FieldManager: FieldManager, Force: &force}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if _, err := ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, opts); err != nil {
		return fmt.Errorf("apply %s: %w", ID(obj), err)
	}
	mode := "applied"
	if dryRun {
		mode = "valid (server dry run)"
	}
	fmt.Fprintf(a.log, "%s %s\n", ID(obj), mode)
	return nil
}

func (a *Applier) waitEstablished(ctx context.Context, names []string, timeout time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			crd, err := a.dyn.Resource(crdGVR).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // not there yet: poll again until the timeout
			}
			if !hasCondition(crd, "Established", "True") {
				return false, nil
			}
		}
		return true, nil
	})
}

func hasCondition(o *unstructured.Unstructured, typ, status string) bool {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	return slices.ContainsFunc(conds, func(c any) bool {
		m, ok := c.(map[string]any)
		return ok && m["type"] == typ && m["status"] == status
	})
}

// WaitRolledOut waits until every Deployment and DaemonSet in objs has rolled out its current
// generation: all replicas (scheduled pods for a DaemonSet) updated and available. On timeout
// it names the workloads that are not.
func (a *Applier) WaitRolledOut(ctx context.Context, objs []*unstructured.Unstructured, timeout time.Duration) error {
	var pending []*unstructured.Unstructured
	for _, o := range objs {
		if k := o.GetKind(); o.GroupVersionKind().Group == "apps" && (k == "Deployment" || k == "DaemonSet") {
			pending = append(pending, o)
		}
	}
	var last map[string]string
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		last = map[string]string{}
		for _, o := range pending {
			gvr := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: map[string]string{"Deployment": "deployments", "DaemonSet": "daemonsets"}[o.GetKind()]}
			cur, err := a.dyn.Resource(gvr).Namespace(o.GetNamespace()).Get(ctx, o.GetName(), metav1.GetOptions{})
			if err != nil {
				last[ID(o)] = err.Error()
				continue
			}
			if msg := rolloutState(cur); msg != "" {
				last[ID(o)] = msg
			}
		}
		return len(last) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("not rolled out within %s: %v: %w", timeout, last, err)
	}
	return nil
}

// rolloutState is "" when o (a Deployment or DaemonSet as the server returns it) has rolled
// out, else what it waits for.
func rolloutState(o *unstructured.Unstructured) string {
	n := func(f ...string) int64 { v, _, _ := unstructured.NestedInt64(o.Object, f...); return v }
	if n("status", "observedGeneration") < o.GetGeneration() {
		return "generation not observed yet"
	}
	var want, updated, available int64
	switch o.GetKind() {
	case "Deployment":
		want = 1
		if r, found, _ := unstructured.NestedInt64(o.Object, "spec", "replicas"); found {
			want = r
		}
		updated, available = n("status", "updatedReplicas"), n("status", "availableReplicas")
	case "DaemonSet":
		want = n("status", "desiredNumberScheduled")
		updated, available = n("status", "updatedNumberScheduled"), n("status", "numberAvailable")
	}
	if updated < want || available < want {
		return fmt.Sprintf("%d/%d updated, %d/%d available", updated, want, available, want)
	}
	return ""
}
