package localcluster

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"testing"
)

// The start is one list of steps, the stack's own (fake cloud, controller plugin) among
// the cluster's, in the order the components need each other.
func TestStartSteps(t *testing.T) {
	o := DefaultOptions("/repo", "/bin", t.TempDir())
	c, err := newCluster(o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.cancel()
	var names []string
	for _, s := range c.startSteps(len(o.Nodes)) {
		names = append(names, s.Name)
	}
	want := []string{"repository binaries", "certificates", "etcd", "kube-apiserver", "kube-controller-manager and kube-scheduler",
		"deploy/base", "snapshot support", "fake cloud files", "fake cloud", "controller plugin", "sidecars", "nodes", "cluster info"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("start steps\n got %q\nwant %q", names, want)
	}
}

// The fake cloud, the controller plugin and the node plugins get the flags the cluster gave
// them before internal/stack defined them (in any order).
func TestComponentFlags(t *testing.T) {
	o := DefaultOptions("/repo", "/bin", t.TempDir())
	c, err := newCluster(o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.cancel()
	run, p := o.RunDir, c.ports
	v := "--v=" + strconv.Itoa(o.Verbosity)
	common := append([]string{"--cloud-url=" + c.CloudURL, "--cloud-token-file=" + filepath.Join(run, "cloud-driver.token"), v}, o.DriverArgs...)
	cloud := []string{"--listen=127.0.0.1:" + strconv.Itoa(p.cloud), "--seed=" + filepath.Join(run, "cloud-seed.yaml"),
		"--auth=tokens", "--tokens-file=" + filepath.Join(run, "cloud-tokens.yaml"), v, "--console-kubeconfig=" + c.Kubeconfig}
	for i, n := range o.Nodes {
		cloud = append(cloud, fmt.Sprintf("--console-node=%s=http://127.0.0.1:%d", n.Name, p.pluginHTTP[i]))
	}
	ctrl := append([]string{"--mode=controller", "--endpoint=unix://" + filepath.Join(run, "ctrl", "csi.sock"),
		"--state-dir=" + filepath.Join(run, "ctrl", "state"), "--volume-data-dir=" + filepath.Join(run, "volumes"),
		"--http-addr=127.0.0.1:" + strconv.Itoa(p.controllerHTTP)}, common...)
	nodeDir := filepath.Join(run, "n", "node-2")
	node := append([]string{"--mode=node", "--node-id=node-2", "--endpoint=unix://" + filepath.Join(nodeDir, "csi", "csi.sock"),
		"--state-dir=" + filepath.Join(nodeDir, "state"), "--kubelet-root=" + filepath.Join(nodeDir, "kubelet"),
		"--volume-data-dir=" + filepath.Join(run, "volumes"), "--http-addr=127.0.0.1:" + strconv.Itoa(p.pluginHTTP[1]),
		"--kubeconfig=" + c.kubeconfig("node-plugin"), "--node-name=node-2"}, common...)
	st := c.stack()
	for _, tt := range []struct {
		name      string
		got, want []string
	}{
		{"fake cloud", st.Cloud.Args(), cloud},
		{"controller plugin", st.Plugins[0].Args(), ctrl},
		{"node plugin of node-2", c.nodePluginFlags(o.Nodes[1], 1).Args(), node},
	} {
		slices.Sort(tt.got)
		slices.Sort(tt.want)
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s flags\n got %q\nwant %q", tt.name, tt.got, tt.want)
		}
	}
	if id := st.Plugins[0].ID; id != "driver-controller" {
		t.Errorf("controller plugin's process %q, want driver-controller (S9 kills it by that name)", id)
	}
}
