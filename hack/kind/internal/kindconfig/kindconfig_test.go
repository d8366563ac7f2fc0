package kindconfig_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	"github.com/fakecloud/fakecloud-csi/hack/kind/internal/kindconfig"
)

const image = "localhost/fakecloud-csi/kind-node:v1.37.2-0123abcd"

func parse(t *testing.T, b []byte) v1alpha4.Cluster {
	t.Helper()
	var c v1alpha4.Cluster
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		t.Fatalf("output is no kind config: %v\n%s", err, b)
	}
	return c
}

// TestOfflineProjectConfig: the project's own deploy/kind/kind-config.yaml keeps every setting
// but the node images, and gains the CNI switch and the two kubeadm patches.
func TestOfflineProjectConfig(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "deploy", "kind", "kind-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := kindconfig.Offline(in, kindconfig.Options{NodeImage: image, EtcdImageTag: "3.7.2-0"})
	if err != nil {
		t.Fatal(err)
	}
	before, after := parse(t, in), parse(t, out)
	if len(after.Nodes) != len(before.Nodes) || len(after.Nodes) != 3 {
		t.Fatalf("%d nodes, want %d", len(after.Nodes), len(before.Nodes))
	}
	for i, n := range after.Nodes {
		if n.Image != image {
			t.Errorf("node %d image %q, want %q", i, n.Image, image)
		}
		// Everything but the image is as it was.
		was := before.Nodes[i]
		was.Image = image
		if !reflect.DeepEqual(n, was) {
			t.Errorf("node %d changed beyond its image:\n got %+v\nwant %+v", i, n, was)
		}
	}
	if after.Name != before.Name {
		t.Errorf("cluster name %q, want %q", after.Name, before.Name)
	}
	if !after.Networking.DisableDefaultCNI {
		t.Error("disableDefaultCNI not set")
	}
	if got := after.Nodes[0].ExtraPortMappings; len(got) != 1 || got[0].HostPort != 30080 || got[0].ListenAddress != "127.0.0.1" {
		t.Errorf("port mappings %+v, want 127.0.0.1:30080", got)
	}
	if got := after.Nodes[0].KubeadmConfigPatches; len(got) != 1 || !strings.Contains(got[0], "taints: []") {
		t.Errorf("control plane patches %q, want the taints: [] one", got)
	}
	want := []string{kindconfig.KubeletCgroupV1Patch, kindconfig.EtcdTagPatch("3.7.2-0")}
	if !reflect.DeepEqual(after.KubeadmConfigPatches, want) {
		t.Errorf("cluster patches %q, want %q", after.KubeadmConfigPatches, want)
	}
	// The etcd patch is YAML kubeadm reads as etcd.local.imageTag.
	var etcd struct {
		Etcd struct {
			Local struct {
				ImageTag string `json:"imageTag"`
			} `json:"local"`
		} `json:"etcd"`
	}
	if err := yaml.Unmarshal([]byte(after.KubeadmConfigPatches[1]), &etcd); err != nil || etcd.Etcd.Local.ImageTag != "3.7.2-0" {
		t.Errorf("etcd patch %q: imageTag %q, err %v", after.KubeadmConfigPatches[1], etcd.Etcd.Local.ImageTag, err)
	}
	again, err := kindconfig.Offline(out, kindconfig.Options{NodeImage: image, EtcdImageTag: "3.7.2-0"})
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(out) {
		t.Errorf("not idempotent:\nfirst\n%s\nsecond\n%s", out, again)
	}
}

func TestOffline(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		opts    kindconfig.Options
		wantErr string
		check   func(t *testing.T, c v1alpha4.Cluster)
	}{
		{
			name: "no nodes gets kind's default control plane with the image",
			in:   "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\n",
			opts: kindconfig.Options{NodeImage: image},
			check: func(t *testing.T, c v1alpha4.Cluster) {
				if len(c.Nodes) != 1 || c.Nodes[0].Role != v1alpha4.ControlPlaneRole || c.Nodes[0].Image != image {
					t.Errorf("nodes %+v, want one control plane of %s", c.Nodes, image)
				}
				if want := []string{kindconfig.KubeletCgroupV1Patch}; !reflect.DeepEqual(c.KubeadmConfigPatches, want) {
					t.Errorf("patches %q, want only the kubelet one (no etcd tag given)", c.KubeadmConfigPatches)
				}
			},
		},
		{
			name: "existing cluster patches are kept before ours",
			in: "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nkubeadmConfigPatches:\n- |\n  kind: ClusterConfiguration\n  apiServer: {}\n" +
				"networking:\n  podSubnet: 10.200.0.0/16\nnodes:\n- role: control-plane\n  image: kindest/node:v1\n",
			opts: kindconfig.Options{NodeImage: image, EtcdImageTag: "3.7.2-0"},
			check: func(t *testing.T, c v1alpha4.Cluster) {
				if len(c.KubeadmConfigPatches) != 3 || !strings.Contains(c.KubeadmConfigPatches[0], "apiServer") {
					t.Errorf("patches %q, want the existing one then two", c.KubeadmConfigPatches)
				}
				if c.Networking.PodSubnet != "10.200.0.0/16" || !c.Networking.DisableDefaultCNI {
					t.Errorf("networking %+v, want the pod subnet kept and the default CNI off", c.Networking)
				}
			},
		},
		{name: "empty image", in: "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\n", wantErr: "node image is empty"},
		{name: "not a cluster", in: "kind: Pod\napiVersion: v1\n", opts: kindconfig.Options{NodeImage: image}, wantErr: "want Cluster"},
		{name: "unknown field", in: "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodez: []\n", opts: kindconfig.Options{NodeImage: image}, wantErr: "not a kind cluster config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := kindconfig.Offline([]byte(tt.in), tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, parse(t, out))
		})
	}
}
