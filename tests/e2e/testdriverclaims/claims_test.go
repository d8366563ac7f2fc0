// Package testdriverclaims checks that tests/e2e/upstream/testdriver.yaml, the
// description of disk.fakecloud.dev that Kubernetes' storage e2e reads, claims
// exactly what the driver advertises over CSI and what deploy/base (and so deploy/kind) sets up.
// The upstream suites skip every spec whose capability is false, so a claim
// that is too modest hides specs, and one that is too bold fails them.
package testdriverclaims

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	driver "github.com/fakecloud/fakecloud-csi/pkg/csi"
)

// testDriver is the part of the external driver definition
// (k8s.io/kubernetes/test/e2e/storage/external, driverDefinition) that the
// claims live in.
type testDriver struct {
	StorageClass struct {
		FromExistingClassName string `json:"FromExistingClassName"`
	} `json:"StorageClass"`
	SnapshotClass struct {
		FromExistingClassName string `json:"FromExistingClassName"`
	} `json:"SnapshotClass"`
	DriverInfo struct {
		Name               string `json:"Name"`
		SupportedSizeRange struct {
			Min string `json:"Min"`
			Max string `json:"Max"`
		} `json:"SupportedSizeRange"`
		SupportedFsType      map[string]struct{} `json:"SupportedFsType"`
		TopologyKeys         []string            `json:"TopologyKeys"`
		NumAllowedTopologies int                 `json:"NumAllowedTopologies"`
		Capabilities         map[string]bool     `json:"Capabilities"`
	} `json:"DriverInfo"`
}

// advertised is what the driver's three services say about themselves.
type advertised struct {
	plugin     *csi.GetPluginCapabilitiesResponse
	controller map[csi.ControllerServiceCapability_RPC_Type]bool
	node       map[csi.NodeServiceCapability_RPC_Type]bool
}

func (a advertised) pluginService(t csi.PluginCapability_Service_Type) bool {
	for _, c := range a.plugin.GetCapabilities() {
		if c.GetService().GetType() == t {
			return true
		}
	}
	return false
}

func (a advertised) expansion(t csi.PluginCapability_VolumeExpansion_Type) bool {
	for _, c := range a.plugin.GetCapabilities() {
		if c.GetVolumeExpansion() != nil && c.GetVolumeExpansion().GetType() == t {
			return true
		}
	}
	return false
}

func repoFile(t *testing.T, rel string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func loadAdvertised(t *testing.T) advertised {
	t.Helper()
	ctx := context.Background()
	var a advertised
	var err error
	// The capability RPCs read no state: zero-value servers answer them.
	if a.plugin, err = driver.NewIdentityServer("test", true, driver.NewReadiness(true, true)).GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{}); err != nil {
		t.Fatal(err)
	}
	cc, err := (&driver.ControllerServer{}).ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	a.controller = map[csi.ControllerServiceCapability_RPC_Type]bool{}
	for _, c := range cc.GetCapabilities() {
		a.controller[c.GetRpc().GetType()] = true
	}
	nc, err := (&driver.NodeServer{}).NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	a.node = map[csi.NodeServiceCapability_RPC_Type]bool{}
	for _, c := range nc.GetCapabilities() {
		a.node[c.GetRpc().GetType()] = true
	}
	return a
}

func TestTestDriverClaims(t *testing.T) {
	var td testDriver
	if err := yaml.UnmarshalStrict(repoFile(t, "tests/e2e/upstream/testdriver.yaml"), &td); err != nil {
		t.Fatalf("testdriver.yaml: %v", err)
	}
	var csiDriver struct {
		Spec struct {
			FSGroupPolicy   string `json:"fsGroupPolicy"`
			StorageCapacity *bool  `json:"storageCapacity"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(repoFile(t, "deploy/base/csidriver.yaml"), &csiDriver); err != nil {
		t.Fatal(err)
	}
	a := loadAdvertised(t)
	publishesCapacity := csiDriver.Spec.StorageCapacity != nil && *csiDriver.Spec.StorageCapacity
	// The group snapshot suite creates VolumeGroupSnapshots, which need the group snapshot CRDs,
	// a VolumeGroupSnapshotClass and the snapshotter and snapshot-controller with group
	// snapshots enabled; deploy/base sets up none of it while it has no such class.
	_, err := os.Stat(filepath.Join("..", "..", "..", "deploy", "base", "volumegroupsnapshotclass.yaml"))
	deploysGroupSnapshots := err == nil

	// Each claim the advertised capabilities decide, and from what.
	for _, tc := range []struct {
		claim string
		want  bool
	}{
		{"controllerExpansion", a.controller[csi.ControllerServiceCapability_RPC_EXPAND_VOLUME]},
		{"nodeExpansion", a.node[csi.NodeServiceCapability_RPC_EXPAND_VOLUME]},
		{"onlineExpansion", a.expansion(csi.PluginCapability_VolumeExpansion_ONLINE)},
		{"offlineExpansion", a.controller[csi.ControllerServiceCapability_RPC_EXPAND_VOLUME]},
		{"topology", a.pluginService(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS)},
		{"snapshotDataSource", a.controller[csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT]},
		{"pvcDataSource", a.controller[csi.ControllerServiceCapability_RPC_CLONE_VOLUME]},
		{"volumeMountGroup", a.node[csi.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP]},
		{"multipods", a.node[csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER]},
		// ReadWriteOncePod is SINGLE_NODE_SINGLE_WRITER, which needs SINGLE_NODE_MULTI_WRITER.
		{"readWriteOncePod", a.controller[csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER] &&
			a.node[csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER]},
		// The capacity suite checks CSIStorageCapacity objects, which need GET_CAPACITY and a
		// CSIDriver that asks for them.
		{"capacity", a.controller[csi.ControllerServiceCapability_RPC_GET_CAPACITY] && publishesCapacity},
		{"fsGroup", csiDriver.Spec.FSGroupPolicy == "File"},
		// Mount volumes are folders, not filesystems of their own, while the node formats
		// nothing: the only supported fsType is the default one.
		{"FSResizeFromSourceNotSupported", len(td.DriverInfo.SupportedFsType) == 1 && hasKey(td.DriverInfo.SupportedFsType, "")},
		// Multi-node access modes are refused (a volume attaches to one instance).
		{"RWX", false},
		{"capReadOnlyMany", false},
		{"groupSnapshot", a.pluginService(csi.PluginCapability_Service_GROUP_CONTROLLER_SERVICE) && deploysGroupSnapshots},
		{"snapshotMetadata", false},
	} {
		t.Run(tc.claim, func(t *testing.T) {
			got, ok := td.DriverInfo.Capabilities[tc.claim]
			if !ok {
				t.Fatalf("testdriver.yaml does not state %s (want %v)", tc.claim, tc.want)
			}
			if got != tc.want {
				t.Errorf("testdriver.yaml claims %s: %v, the driver advertises %v", tc.claim, got, tc.want)
			}
		})
	}

	t.Run("identity and classes", func(t *testing.T) {
		if td.DriverInfo.Name != driver.DriverName {
			t.Errorf("Name %q, want %q", td.DriverInfo.Name, driver.DriverName)
		}
		if !slices.Equal(td.DriverInfo.TopologyKeys, []string{driver.TopologyZoneKey}) {
			t.Errorf("TopologyKeys %v, want [%s]", td.DriverInfo.TopologyKeys, driver.TopologyZoneKey)
		}
		for _, c := range []struct{ got, file string }{
			{td.StorageClass.FromExistingClassName, "deploy/base/storageclass.yaml"},
			{td.SnapshotClass.FromExistingClassName, "deploy/base/volumesnapshotclass.yaml"},
		} {
			var obj struct {
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal(repoFile(t, c.file), &obj); err != nil {
				t.Fatal(err)
			}
			if c.got != obj.Metadata.Name {
				t.Errorf("class %q, want %q of %s", c.got, obj.Metadata.Name, c.file)
			}
		}
	})

	t.Run("size range", func(t *testing.T) {
		for _, c := range []struct {
			name, q string
			want    int64
		}{
			{"Min", td.DriverInfo.SupportedSizeRange.Min, driver.GiB},
			{"Max", td.DriverInfo.SupportedSizeRange.Max, driver.MaxVolumeSize},
		} {
			q, err := resource.ParseQuantity(c.q)
			if err != nil {
				t.Fatalf("SupportedSizeRange.%s %q: %v", c.name, c.q, err)
			}
			if q.Value() != c.want {
				t.Errorf("SupportedSizeRange.%s %s = %d bytes, want %d", c.name, c.q, q.Value(), c.want)
			}
		}
	})

	t.Run("fsType", func(t *testing.T) {
		// Mount volumes are bind-mounted folders: only the default fsType.
		if len(td.DriverInfo.SupportedFsType) != 1 {
			t.Errorf("SupportedFsType %v, want only the default \"\"", td.DriverInfo.SupportedFsType)
		}
		if _, ok := td.DriverInfo.SupportedFsType[""]; !ok {
			t.Errorf("SupportedFsType %v lacks the default \"\"", td.DriverInfo.SupportedFsType)
		}
	})

	t.Run("exec", func(t *testing.T) {
		// hack/e2e-upstream.sh turns this one line off for the local cluster.
		if !td.DriverInfo.Capabilities["exec"] {
			t.Error("exec must be true in testdriver.yaml (real containers); the local copy turns it off")
		}
	})
}

// hasKey says whether m has the key k.
func hasKey[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}
