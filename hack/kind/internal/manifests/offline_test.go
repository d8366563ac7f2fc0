package manifests_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/fakecloud/fakecloud-csi/hack/kind/internal/manifests"
)

// offlineDir is the overlay an offline kind cluster applies instead of deploy/kind.
func offlineDir(t *testing.T) string { return filepath.Join(repoRoot(t), "deploy", "kind-offline") }

// builtSidecars maps each sidecar image the offline overlay renames (its repository under
// registry.k8s.io/sig-storage) to the Go module the local-cluster tools module builds it from.
var builtSidecars = map[string]string{
	"csi-attacher":    "github.com/kubernetes-csi/external-attacher/v4",
	"csi-provisioner": "github.com/kubernetes-csi/external-provisioner/v6",
	"csi-resizer":     "github.com/kubernetes-csi/external-resizer/v2",
	"csi-snapshotter": "github.com/kubernetes-csi/external-snapshotter/v8",
}

// toolsModuleVersions reads the module versions of tests/e2e/localcluster/tools/go.mod, the
// module the offline sidecars are built from (each require line: path version [// comment]).
func toolsModuleVersions(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot(t), "tests", "e2e", "localcluster", "tools", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(fields) >= 2 && strings.HasPrefix(fields[1], "v") {
			out[fields[0]] = fields[1]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSidecarTagsAreTheBuiltModules: deploy/kind's sidecar tags are the versions of the
// modules the offline build compiles, so a laptop (official images) and this machine (images
// built here) run the same code.
func TestSidecarTagsAreTheBuiltModules(t *testing.T) {
	base := render(t)
	mods := toolsModuleVersions(t)
	for repo, mod := range builtSidecars {
		tag, err := manifests.ImageTag(base.objs, repo)
		if err != nil {
			t.Errorf("%s: %v", repo, err)
			continue
		}
		if mods[mod] != tag {
			t.Errorf("deploy/kind runs %s:%s but tests/e2e/localcluster/tools builds %s %q: pin the same release in both", repo, tag, mod, mods[mod])
		}
	}
}

// TestOfflineOverlay: deploy/kind-offline renders the objects of deploy/kind, every image from
// localhost/ (loaded into kind, never pulled) with the sidecars at deploy/kind's tags, no
// livenessprobe container, the registrar as the driver image's `registrar` subcommand with
// node-driver-registrar's flags, and driver liveness probes on a port the driver serves.
func TestOfflineOverlay(t *testing.T) {
	base := render(t)
	objs, err := manifests.Render(offlineDir(t))
	if err != nil {
		t.Fatal(err)
	}
	ids := func(objs []*unstructured.Unstructured) []string {
		var out []string
		for _, o := range objs {
			out = append(out, manifests.ID(o))
		}
		slices.Sort(out)
		return out
	}
	if got, want := ids(objs), ids(base.objs); !slices.Equal(got, want) {
		t.Errorf("offline overlay objects differ from deploy/kind's:\n got %v\nwant %v", got, want)
	}

	images := manifests.Images(objs)
	for where, image := range images {
		if !strings.HasPrefix(image, "localhost/fakecloud-csi/") || !strings.Contains(image, ":") {
			t.Errorf("%s: image %q, want localhost/fakecloud-csi/<name>:<tag> (built here, loaded into kind)", where, image)
		}
		if strings.Contains(image, "livenessprobe") || strings.Contains(image, "node-driver-registrar") {
			t.Errorf("%s: image %q is not buildable from the Go module proxy", where, image)
		}
	}
	for repo := range builtSidecars {
		want, err := manifests.ImageTag(base.objs, repo)
		if err != nil {
			t.Fatal(err)
		}
		img := "localhost/fakecloud-csi/" + repo + ":" + want
		if !slices.Contains(mapValues(images), img) {
			t.Errorf("no container runs %s (deploy/kind's %s tag on the local repository)", img, repo)
		}
	}

	for _, id := range []string{"DaemonSet fakecloud-csi/fakecloud-csi-node", "Deployment fakecloud-csi/fakecloud-csi-controller"} {
		t.Run(id, func(t *testing.T) {
			spec := podSpec(t, objs, id)
			baseSpec := podSpec(t, base.objs, id)
			for _, c := range spec.Containers {
				if c.Name == "liveness-probe" {
					t.Errorf("container liveness-probe is still there")
				}
			}
			driver := container(t, spec, "driver")
			checkProbeOnDriverHTTP(t, driver)
			if !strings.HasPrefix(id, "DaemonSet") {
				return
			}
			reg, baseReg := container(t, spec, "node-driver-registrar"), container(t, baseSpec, "node-driver-registrar")
			if reg.Image != driver.Image || len(reg.Args) == 0 || reg.Args[0] != "registrar" || len(reg.Command) != 0 {
				t.Errorf("registrar container runs %s %v %v, want the driver image %s with args [registrar ...]", reg.Image, reg.Command, reg.Args, driver.Image)
			}
			for _, a := range baseReg.Args {
				if !slices.Contains(reg.Args, a) {
					t.Errorf("registrar args %v lack node-driver-registrar's %s", reg.Args, a)
				}
			}
			if reg.LivenessProbe == nil || reg.LivenessProbe.HTTPGet == nil || !portServed(reg, reg.LivenessProbe.HTTPGet.Port.String(), "--http-endpoint=") {
				t.Errorf("registrar liveness probe %+v is not on its --http-endpoint", reg.LivenessProbe)
			}
		})
	}
}

// checkProbeOnDriverHTTP fails unless c's liveness probe asks /healthz on the port of the
// driver's --http-addr.
func checkProbeOnDriverHTTP(t *testing.T, c corev1.Container) {
	t.Helper()
	p := c.LivenessProbe
	if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		t.Fatalf("driver liveness probe %+v, want GET /healthz", p)
	}
	if !portServed(c, p.HTTPGet.Port.String(), "--http-addr=") {
		t.Errorf("driver liveness probe port %s is not the driver's --http-addr (args %v, ports %+v)", p.HTTPGet.Port.String(), c.Args, c.Ports)
	}
}

// portServed reports whether port (a number or the name of one of c's ports) is the port of
// c's host:port flag with the given prefix.
func portServed(c corev1.Container, port, flagPrefix string) bool {
	num := port
	for _, p := range c.Ports {
		if p.Name == port {
			num = fmt.Sprint(p.ContainerPort)
		}
	}
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, flagPrefix); ok {
			return strings.HasSuffix(v, ":"+num)
		}
	}
	return false
}

func podSpec(t *testing.T, objs []*unstructured.Unstructured, id string) corev1.PodSpec {
	t.Helper()
	for _, o := range objs {
		if manifests.ID(o) != id {
			continue
		}
		typed, err := scheme.Scheme.New(o.GroupVersionKind())
		if err != nil {
			t.Fatal(err)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, typed, true); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		switch w := typed.(type) {
		case *appsv1.DaemonSet:
			return w.Spec.Template.Spec
		case *appsv1.Deployment:
			return w.Spec.Template.Spec
		}
		t.Fatalf("%s is a %T, not a workload", id, typed)
	}
	t.Fatalf("no %s", id)
	return corev1.PodSpec{}
}

func container(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %s", name)
	return corev1.Container{}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestOfflineSnapshotOverlay renders deploy/kind-offline/snapshot against the
// external-snapshotter release of the csi-snapshotter sidecar (fetched like
// TestSnapshotRelease, into a temporary tree): the snapshot-controller is the one built here,
// at deploy/base/snapshot's tag.
func TestOfflineSnapshotOverlay(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads the external-snapshotter module; skipped under -short")
	}
	sidecar, err := manifests.ImageTag(render(t).objs, "csi-snapshotter")
	if err != nil {
		t.Fatal(err)
	}
	tree := snapshotTree(t, sidecar, filepath.Join("base", "snapshot"), filepath.Join("kind", "snapshot"), filepath.Join("kind-offline", "snapshot"))
	objs, err := manifests.Render(filepath.Join(tree, "deploy", "kind-offline", "snapshot"))
	if err != nil {
		t.Fatal(err)
	}
	images := manifests.Images(objs)
	if len(images) == 0 {
		t.Fatal("no workload in the offline snapshot overlay")
	}
	for where, image := range images {
		if want := "localhost/fakecloud-csi/snapshot-controller:" + sidecar; image != want {
			t.Errorf("%s: image %q, want %q", where, image, want)
		}
	}
}
