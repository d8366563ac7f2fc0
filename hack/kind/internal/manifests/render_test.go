package manifests_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	kinddefaults "sigs.k8s.io/kind/pkg/apis/config/defaults"
	kindv1alpha4 "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	"github.com/fakecloud/fakecloud-csi/hack/kind/internal/manifests"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
)

const (
	namespace  = "fakecloud-csi"
	driverName = "disk.fakecloud.dev"
	zoneLabel  = "topology.kubernetes.io/zone"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "deploy", "base", "kustomization.yaml")); err != nil {
		t.Fatalf("not the repository root: %s: %v", root, err)
	}
	return root
}

// deployDir is deploy/kind, the overlay kind clusters apply.
func deployDir(t *testing.T) string { return filepath.Join(repoRoot(t), "deploy", "kind") }

// baseDir is deploy/base, what any cluster applies (deploy/kind's base).
func baseDir(t *testing.T) string { return filepath.Join(repoRoot(t), "deploy", "base") }

// rendered is a kustomization rendered, decoded into typed objects where the kind is built
// in (strictly: an unknown field is an error), keyed by manifests.ID.
type rendered struct {
	objs  []*unstructured.Unstructured
	typed map[string]runtime.Object
}

// render renders deploy/kind.
func render(t *testing.T) rendered { t.Helper(); return renderDir(t, deployDir(t)) }

func renderDir(t *testing.T, dir string) rendered {
	t.Helper()
	objs, err := manifests.Render(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := rendered{objs: objs, typed: map[string]runtime.Object{}}
	for _, o := range objs {
		typed, err := scheme.Scheme.New(o.GroupVersionKind())
		if err != nil {
			continue // a custom resource (VolumeSnapshotClass)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, typed, true); err != nil {
			t.Errorf("%s: %v", manifests.ID(o), err)
			continue
		}
		r.typed[manifests.ID(o)] = typed
	}
	return r
}

func get[T runtime.Object](t *testing.T, r rendered, id string) T {
	t.Helper()
	o, ok := r.typed[id].(T)
	if !ok {
		t.Fatalf("rendering has no %s (have %v)", id, ids(r))
	}
	return o
}

func ids(r rendered) []string {
	var out []string
	for _, o := range r.objs {
		out = append(out, manifests.ID(o))
	}
	return out
}

// TestOneResourcePerFile: every YAML file of deploy/base is one object and is listed in its
// kustomization's resources, and every YAML file of deploy/kind (kind-config.yaml, the
// cluster config, excepted) is one patch listed in its patches, so nothing is forgotten.
func TestOneResourcePerFile(t *testing.T) {
	for _, tc := range []struct {
		dir   string
		field string
	}{
		{baseDir(t), "resources"},
		{deployDir(t), "patches"},
	} {
		var k struct {
			Resources []string `json:"resources"`
			Patches   []struct {
				Path string `json:"path"`
			} `json:"patches"`
		}
		data, err := os.ReadFile(filepath.Join(tc.dir, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, &k); err != nil {
			t.Fatal(err)
		}
		listed := k.Resources
		if tc.field == "patches" {
			listed = nil
			for _, p := range k.Patches {
				listed = append(listed, p.Path)
			}
		}
		files, err := filepath.Glob(filepath.Join(tc.dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			base := filepath.Base(f)
			if base == "kustomization.yaml" || base == "kind-config.yaml" {
				continue
			}
			if !slices.Contains(listed, base) {
				t.Errorf("%s is not among the %s of %s/kustomization.yaml", base, tc.field, tc.dir)
			}
			if n := countDocs(t, f); n != 1 {
				t.Errorf("%s/%s holds %d objects, want exactly 1", tc.dir, base, n)
			}
		}
	}
}

func countDocs(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	n := 0
	for {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(m) > 0 {
			n++
		}
	}
}

// TestRenderedObjects checks what the cluster would get from deploy/base and from
// deploy/kind: namespaces, references between objects, the CSIDriver and StorageClass fields
// KEP-4876 depends on, and privileges.
func TestRenderedObjects(t *testing.T) {
	for name, dir := range map[string]string{"base": baseDir(t), "kind": deployDir(t)} {
		t.Run(name, func(t *testing.T) { checkRenderedObjects(t, renderDir(t, dir)) })
	}
}

func checkRenderedObjects(t *testing.T, r rendered) {
	clusterScoped := map[string]bool{"Namespace": true, "CSIDriver": true, "StorageClass": true, "ClusterRole": true,
		"ClusterRoleBinding": true, "VolumeSnapshotClass": true, "VolumeAttributesClass": true}
	for _, o := range r.objs {
		switch {
		case clusterScoped[o.GetKind()] && o.GetNamespace() != "":
			t.Errorf("%s: cluster-scoped object with a namespace", manifests.ID(o))
		case !clusterScoped[o.GetKind()] && o.GetNamespace() != namespace:
			t.Errorf("%s: namespace %q, want %q", manifests.ID(o), o.GetNamespace(), namespace)
		}
	}

	csiDriver := get[*storagev1.CSIDriver](t, r, "CSIDriver "+driverName)
	if a := csiDriver.Spec.AttachRequired; a == nil || !*a {
		t.Error("CSIDriver: attachRequired must be true (ControllerPublishVolume is the authority on capacity)")
	}
	if p := csiDriver.Spec.NodeAllocatableUpdatePeriodSeconds; p == nil || *p < 10 {
		t.Errorf("CSIDriver: nodeAllocatableUpdatePeriodSeconds must be set and >= 10, got %v", p)
	}
	vac := get[*storagev1.VolumeAttributesClass](t, r, "VolumeAttributesClass fakecloud-fast")
	if vac.DriverName != driverName || vac.Parameters["type"] != "ssd" || vac.Parameters["iops"] != "3000" {
		t.Errorf("VolumeAttributesClass: want driver %s with type ssd, iops 3000; got %s %v", driverName, vac.DriverName, vac.Parameters)
	}
	sc := get[*storagev1.StorageClass](t, r, "StorageClass fakecloud-disk")
	if sc.Provisioner != driverName || sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer ||
		sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion {
		t.Errorf("StorageClass: want provisioner %s, WaitForFirstConsumer, allowVolumeExpansion; got %s %v %v", driverName, sc.Provisioner, sc.VolumeBindingMode, sc.AllowVolumeExpansion)
	}

	// Every ServiceAccount, Secret, ConfigMap and ClusterRole/Role a workload or binding
	// names is rendered too.
	have := map[string]bool{}
	for _, id := range ids(r) {
		have[id] = true
	}
	for id, o := range r.typed {
		var refs []string
		switch o := o.(type) {
		case *appsv1.Deployment:
			refs = podRefs(o.Spec.Template.Spec)
		case *appsv1.DaemonSet:
			refs = podRefs(o.Spec.Template.Spec)
		}
		for _, ref := range refs {
			if !have[ref] {
				t.Errorf("%s refers to %s, which is not rendered", id, ref)
			}
		}
	}
	for _, o := range r.objs {
		if k := o.GetKind(); k == "ClusterRoleBinding" || k == "RoleBinding" {
			kind, _, _ := unstructured.NestedString(o.Object, "roleRef", "kind")
			name, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
			ref := kind + " " + name
			if kind == "Role" {
				ref = kind + " " + o.GetNamespace() + "/" + name
			}
			if !have[ref] {
				t.Errorf("%s binds %s, which is not rendered", manifests.ID(o), ref)
			}
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			for _, s := range subjects {
				m := s.(map[string]any)
				if ref := fmt.Sprintf("ServiceAccount %s/%s", m["namespace"], m["name"]); m["kind"] == "ServiceAccount" && !have[ref] {
					t.Errorf("%s binds %s, which is not rendered", manifests.ID(o), ref)
				}
			}
		}
	}

	// The node plugin: only the driver is privileged, the kubelet dir is Bidirectional there
	// and nowhere else, the node ID is the node name, it runs on every node.
	ds := get[*appsv1.DaemonSet](t, r, "DaemonSet "+namespace+"/fakecloud-csi-node")
	if !slices.ContainsFunc(ds.Spec.Template.Spec.Tolerations, func(tol corev1.Toleration) bool {
		return tol.Operator == corev1.TolerationOpExists && tol.Key == ""
	}) {
		t.Error("node DaemonSet must tolerate every taint (the e2e suite expects the driver on every node)")
	}
	for _, c := range ds.Spec.Template.Spec.Containers {
		privileged := c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
		bidi := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.MountPropagation != nil && *m.MountPropagation == corev1.MountPropagationBidirectional
		})
		if c.Name == "driver" {
			if !privileged || !bidi {
				t.Errorf("node driver container: privileged=%v bidirectional=%v, want both", privileged, bidi)
			}
			if !slices.Contains(c.Args, "--node-id=$(NODE_NAME)") || !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
				return e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
			}) {
				t.Error("node driver: --node-id must be the node name (spec.nodeName through NODE_NAME)")
			}
			continue
		}
		if privileged || bidi {
			t.Errorf("node container %s: privileged=%v bidirectional=%v, want neither", c.Name, privileged, bidi)
		}
	}
	for _, id := range []string{"Deployment " + namespace + "/fakecloud-csi-controller", "Deployment " + namespace + "/fakecloud"} {
		d := get[*appsv1.Deployment](t, r, id)
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.SecurityContext == nil || c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation ||
				(c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged) {
				t.Errorf("%s container %s: must not be privileged nor allow privilege escalation", id, c.Name)
			}
		}
	}
}

// podRefs are the IDs of the objects a pod spec in namespace fakecloud-csi needs.
func podRefs(p corev1.PodSpec) []string {
	refs := []string{"ServiceAccount " + namespace + "/" + p.ServiceAccountName}
	for _, v := range p.Volumes {
		switch {
		case v.Secret != nil:
			refs = append(refs, "Secret "+namespace+"/"+v.Secret.SecretName)
		case v.ConfigMap != nil:
			refs = append(refs, "ConfigMap "+namespace+"/"+v.ConfigMap.Name)
		}
	}
	return refs
}

// TestImages: sidecars pinned to released tags (csi-attacher new enough to record
// errorCode), our images named as hack/images.sh builds them, in deploy/base and deploy/kind.
func TestImages(t *testing.T) {
	for name, dir := range map[string]string{"base": baseDir(t), "kind": deployDir(t)} {
		t.Run(name, func(t *testing.T) { checkImages(t, renderDir(t, dir)) })
	}
}

func checkImages(t *testing.T, r rendered) {
	images := manifests.Images(r.objs)
	for where, image := range images {
		if !strings.Contains(image, ":") || strings.HasSuffix(image, ":latest") {
			t.Errorf("%s: image %q is not pinned to a tag", where, image)
		}
	}
	want := map[string]string{
		"csi-provisioner": "", "csi-attacher": "", "csi-resizer": "", "csi-snapshotter": "",
		"livenessprobe": "", "csi-node-driver-registrar": "",
	}
	for repo := range want {
		tag, err := manifests.ImageTag(r.objs, repo)
		if err != nil {
			t.Errorf("no registry.k8s.io/sig-storage/%s sidecar: %v", repo, err)
			continue
		}
		want[repo] = tag
	}
	if tag := want["csi-attacher"]; tag != "" && !atLeast(tag, 4, 12) {
		t.Errorf("csi-attacher %s: want >= v4.12 (records errorCode of failed attaches, KEP-4876)", tag)
	}
	for where, image := range images {
		if strings.Contains(image, "fakecloud-csi/") {
			bin := where[strings.LastIndex(where, "/")+1:]
			if bin == "driver" || bin == "fakecloud" {
				if w := "localhost/fakecloud-csi/" + bin + ":dev"; image != w {
					t.Errorf("%s: image %q, want %q (what hack/images.sh builds and kind loads)", where, image, w)
				}
			}
		}
	}
}

func atLeast(tag string, major, minor int) bool {
	parts := strings.SplitN(strings.TrimPrefix(tag, "v"), ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	return err1 == nil && err2 == nil && (ma > major || (ma == major && mi >= minor))
}

// TestSecretsMatchExamples: the fake cloud's tokens on kind are examples/tokens.yaml, and
// the driver's token is the driver-role one among them.
func TestSecretsMatchExamples(t *testing.T) {
	r := render(t)
	tokensSecret := get[*corev1.Secret](t, r, "Secret "+namespace+"/fakecloud-tokens")
	dir := t.TempDir()
	onKind := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(onKind, []byte(tokensSecret.StringData["tokens.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	kindTokens, err := server.LoadTokens(onKind)
	if err != nil {
		t.Fatalf("tokens on kind: %v", err)
	}
	exampleTokens, err := server.LoadTokens(filepath.Join(repoRoot(t), "examples", "tokens.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kindTokens, exampleTokens) {
		t.Errorf("tokens on kind %v differ from examples/tokens.yaml %v", kindTokens, exampleTokens)
	}
	driverToken := get[*corev1.Secret](t, r, "Secret "+namespace+"/fakecloud-csi-cloud-token").StringData["token"]
	if !slices.ContainsFunc(kindTokens, func(tok server.Token) bool { return tok.Token == driverToken && tok.Role == "driver" }) {
		t.Errorf("driver token %q is not a driver-role token of the fake cloud", driverToken)
	}
}

// TestKindConfig: the kind config is strictly valid v1alpha4, pins the node image kind
// v0.33.0 was released with, has a control plane and two or more workers, all labelled with
// a zone that the seed gives the node's cloud instance, and maps the fake cloud's NodePort to
// the host's loopback.
func TestKindConfig(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(deployDir(t), "kind-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg kindv1alpha4.Cluster
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		t.Fatalf("kind-config.yaml: %v", err)
	}
	if cfg.Kind != "Cluster" || cfg.APIVersion != "kind.x-k8s.io/v1alpha4" {
		t.Errorf("kind-config.yaml: %s %s, want kind.x-k8s.io/v1alpha4 Cluster", cfg.APIVersion, cfg.Kind)
	}
	r := render(t)
	seedCM := get[*corev1.ConfigMap](t, r, "ConfigMap "+namespace+"/fakecloud-seed")
	seedFile := filepath.Join(t.TempDir(), "seed.yaml")
	if err := os.WriteFile(seedFile, []byte(seedCM.Data["seed.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	seed, err := server.LoadSeed(seedFile)
	if err != nil {
		t.Fatalf("seed on kind: %v", err)
	}
	zoneOf := map[string]string{}
	for _, in := range seed.Instances {
		zoneOf[in.ID] = in.Zone
	}
	// kind's node names: <cluster>-control-plane, <cluster>-worker, <cluster>-worker2, ...
	var controlPlanes, workers int
	for _, n := range cfg.Nodes {
		if n.Image != kinddefaults.Image {
			t.Errorf("node image %q, want kind v0.33.0's %q", n.Image, kinddefaults.Image)
		}
		var nodeName string
		switch n.Role {
		case kindv1alpha4.ControlPlaneRole:
			controlPlanes++
			nodeName = cfg.Name + "-control-plane"
		case kindv1alpha4.WorkerRole:
			workers++
			nodeName = cfg.Name + "-worker"
			if workers > 1 {
				nodeName += strconv.Itoa(workers)
			}
		}
		if z := n.Labels[zoneLabel]; z == "" || z != zoneOf[nodeName] {
			t.Errorf("node %s: zone label %q, seed zone %q; want both set and equal", nodeName, z, zoneOf[nodeName])
		}
	}
	if controlPlanes != 1 || workers < 2 {
		t.Errorf("%d control planes and %d workers, want 1 and >= 2", controlPlanes, workers)
	}
	if !strings.Contains(kinddefaults.Image, ":v1.37.") && !strings.Contains(kinddefaults.Image, ":v1.36.") {
		t.Errorf("kind's node image %s is older than Kubernetes 1.36", kinddefaults.Image)
	}

	svc := get[*corev1.Service](t, r, "Service "+namespace+"/fakecloud")
	var nodePort int32
	for _, p := range svc.Spec.Ports {
		nodePort = p.NodePort
	}
	mapped := false
	for _, n := range cfg.Nodes {
		for _, m := range n.ExtraPortMappings {
			if m.ContainerPort == nodePort && m.ListenAddress == "127.0.0.1" {
				mapped = true
			}
		}
	}
	if svc.Spec.Type != corev1.ServiceTypeNodePort || nodePort == 0 || !mapped {
		t.Errorf("fake cloud Service %s nodePort %d is not mapped to 127.0.0.1 by kind-config.yaml", svc.Spec.Type, nodePort)
	}
}

// TestSnapshotRelease fetches the external-snapshotter release of the csi-snapshotter sidecar
// (through the Go module proxy) and renders deploy/base/snapshot and deploy/kind/snapshot
// against it: the v1 snapshot CRDs are there, the snapshot-controller runs the sidecar's
// version, and kind runs one replica of it.
func TestSnapshotRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads the external-snapshotter module; skipped under -short")
	}
	sidecar, err := manifests.ImageTag(render(t).objs, "csi-snapshotter")
	if err != nil {
		t.Fatal(err)
	}
	tree := snapshotTree(t, sidecar, filepath.Join("base", "snapshot"), filepath.Join("kind", "snapshot"))
	for _, d := range []string{"base", "kind"} {
		objs, err := manifests.Render(filepath.Join(tree, "deploy", d, "snapshot"))
		if err != nil {
			t.Fatal(err)
		}
		for _, crd := range []string{"volumesnapshotclasses", "volumesnapshotcontents", "volumesnapshots"} {
			id := "CustomResourceDefinition " + crd + ".snapshot.storage.k8s.io"
			if !slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool { return manifests.ID(o) == id }) {
				t.Errorf("%s: release %s renders no %s", d, sidecar, id)
			}
		}
		if tag, err := manifests.ImageTag(objs, "snapshot-controller"); err != nil || tag != sidecar {
			t.Errorf("%s: snapshot-controller tag %q (%v), want the csi-snapshotter sidecar's %s", d, tag, err, sidecar)
		}
		if d != "kind" {
			continue
		}
		for _, o := range objs {
			if o.GetKind() == "Deployment" && o.GetName() == "snapshot-controller" {
				if n, _, _ := unstructured.NestedInt64(o.Object, "spec", "replicas"); n != 1 {
					t.Errorf("kind: snapshot-controller replicas %d, want 1", n)
				}
			}
		}
	}
}

// snapshotTree rebuilds, in a temporary tree, the layout the snapshot kustomizations of dirs
// (under deploy/, e.g. "kind/snapshot") point at: their kustomization.yaml files and the
// external-snapshotter release of version in _output/external-snapshotter, so that the
// tests do not write into the checkout. It returns the tree's root.
func snapshotTree(t *testing.T, version string, dirs ...string) string {
	t.Helper()
	tree := t.TempDir()
	for _, d := range dirs {
		k, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", d, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(tree, "deploy", d)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), k, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := manifests.FetchSnapshotter(context.Background(), "go", version, filepath.Join(tree, "_output", "external-snapshotter")); err != nil {
		t.Fatal(err)
	}
	return tree
}
