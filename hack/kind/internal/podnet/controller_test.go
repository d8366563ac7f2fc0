package podnet

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// fakeNet is a Network in memory that records the changes made to it.
type fakeNet struct {
	routes  map[netip.Prefix]KernelRoute
	mtu     int
	mtuErr  error
	failFor netip.Prefix // ReplaceRoute fails for this Dst
	calls   []string
}

func newFakeNet(mtu int, kernel ...KernelRoute) *fakeNet {
	f := &fakeNet{routes: map[netip.Prefix]KernelRoute{}, mtu: mtu}
	for _, r := range kernel {
		f.routes[r.Dst] = r
	}
	return f
}

func (f *fakeNet) Routes() ([]KernelRoute, error) {
	var out []KernelRoute
	for _, r := range f.routes {
		out = append(out, r)
	}
	return out, nil
}

func (f *fakeNet) ReplaceRoute(r Route) error {
	f.calls = append(f.calls, "replace "+r.Dst.String()+" via "+r.Via.String())
	if r.Dst == f.failFor {
		return errors.New("network is unreachable")
	}
	f.routes[r.Dst] = KernelRoute{Dst: r.Dst, Via: r.Via, Ours: true}
	return nil
}

func (f *fakeNet) DeleteRoute(r Route) error {
	f.calls = append(f.calls, "delete "+r.Dst.String())
	delete(f.routes, r.Dst)
	return nil
}

func (f *fakeNet) MTU(netip.Addr) (int, error) { return f.mtu, f.mtuErr }

func TestControllerReconcile(t *testing.T) {
	dir := t.TempDir()
	fn := newFakeNet(1400, foreign("172.18.0.0/16"))
	c := &Controller{NodeName: "kind-worker", CNIConfDir: dir, Net: fn}
	conf := filepath.Join(dir, ConflistName)

	// The own node has no pod CIDR yet: routes to the others, no conflist.
	cp := node("kind-control-plane", "172.18.0.2", "10.244.0.0/24")
	if err := c.Reconcile([]*corev1.Node{cp, node("kind-worker", "172.18.0.3")}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(conf); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("conflist exists before the node has a pod CIDR: %v", err)
	}
	wantCalls := []string{"replace 10.244.0.0/24 via 172.18.0.2"}
	if !reflect.DeepEqual(fn.calls, wantCalls) {
		t.Errorf("calls %q, want %q", fn.calls, wantCalls)
	}

	// The pod CIDR arrives, and a second worker joins.
	fn.calls = nil
	nodes := []*corev1.Node{cp, node("kind-worker", "172.18.0.3", "10.244.1.0/24"), node("kind-worker2", "172.18.0.4", "10.244.2.0/24")}
	if err := c.Reconcile(nodes); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := RenderConflist(netip.MustParsePrefix("10.244.1.0/24"), 1400)
	if string(got) != string(want) {
		t.Errorf("conflist\n%s\nwant\n%s", got, want)
	}
	wantCalls = []string{"replace 10.244.2.0/24 via 172.18.0.4"}
	if !reflect.DeepEqual(fn.calls, wantCalls) {
		t.Errorf("calls %q, want %q", fn.calls, wantCalls)
	}

	// A resync with nothing changed changes nothing.
	fn.calls = nil
	before, _ := os.Stat(conf)
	if err := c.Reconcile(nodes); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(conf)
	if len(fn.calls) != 0 || !before.ModTime().Equal(after.ModTime()) {
		t.Errorf("steady state changed something: calls %q, mtime %v -> %v", fn.calls, before.ModTime(), after.ModTime())
	}

	// A route that cannot be set is not fatal, and is retried on the next reconcile.
	fn.failFor = netip.MustParsePrefix("10.244.3.0/24")
	nodes = append(nodes, node("kind-worker3", "172.31.0.9", "10.244.3.0/24"))
	for range 2 {
		fn.calls = nil
		if err := c.Reconcile(nodes); err != nil {
			t.Fatalf("a failing route is fatal: %v", err)
		}
		if want := []string{"replace 10.244.3.0/24 via 172.31.0.9"}; !reflect.DeepEqual(fn.calls, want) {
			t.Errorf("calls %q, want %q", fn.calls, want)
		}
	}

	// The MTU cannot be read: the conflist falls back to 1500.
	fn.mtuErr = errors.New("no default route")
	if err := c.Reconcile(nodes); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(conf); !strings.Contains(string(got), `"mtu": 1500`) {
		t.Errorf("conflist after MTU error:\n%s", got)
	}

	// The conflist directory cannot be written: fatal, with the path in the error.
	bad := &Controller{NodeName: "kind-worker", CNIConfDir: filepath.Join(conf, "sub"), Net: newFakeNet(1500)}
	err = bad.Reconcile(nodes)
	if err == nil || !strings.Contains(err.Error(), "write conflist") {
		t.Errorf("unwritable conf dir: err = %v", err)
	}
}

func TestControllerNotesLoggedOnce(t *testing.T) {
	c := &Controller{NodeName: "a", CNIConfDir: t.TempDir(), Net: newFakeNet(1500)}
	nodes := []*corev1.Node{node("a", "172.18.0.2", "10.244.0.0/24"), node("b", "", "10.244.1.0/24")}
	for range 2 {
		if err := c.Reconcile(nodes); err != nil {
			t.Fatal(err)
		}
		if want := map[Note]bool{{"b", "no IPv4 InternalIP: no route to its pods"}: true}; !reflect.DeepEqual(c.notes, want) {
			t.Errorf("notes %v, want %v", c.notes, want)
		}
	}
	if err := c.Reconcile(nodes[:1]); err != nil {
		t.Fatal(err)
	}
	if len(c.notes) != 0 {
		t.Errorf("a note outlived its cause: %v", c.notes)
	}
}

func TestEnableForwarding(t *testing.T) {
	for _, tt := range []struct{ in, want string }{{"0\n", "1\n"}, {"1\n", "1\n"}} {
		path := filepath.Join(t.TempDir(), "ip_forward")
		if err := os.WriteFile(path, []byte(tt.in), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := enableForwarding(path); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(path); string(got) != tt.want {
			t.Errorf("%q -> %q, want %q", tt.in, got, tt.want)
		}
	}
	if err := enableForwarding(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("missing sysctl file: no error")
	}
}

func TestWaitForFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubelet.conf")
	done := make(chan error, 1)
	go func() { done <- WaitForFile(context.Background(), path, 10*time.Millisecond) }()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("returned before the file existed: %v", err)
	default:
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("did not notice the file")
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := WaitForFile(ctx, path+".never", time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled wait: err = %v", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	good := Options{Kubeconfig: "/etc/kubernetes/kubelet.conf", NodeName: "kind-worker", CNIConfDir: "/etc/cni/net.d", Resync: 30 * time.Second, WaitInterval: time.Second}
	tests := []struct {
		name    string
		mutate  func(*Options)
		wantErr []string
	}{
		{name: "defaults", mutate: func(*Options) {}},
		{name: "no node name", mutate: func(o *Options) { o.NodeName = "" }, wantErr: []string{"--node-name is empty"}},
		{name: "upper-case node name", mutate: func(o *Options) { o.NodeName = "Kind_Worker" }, wantErr: []string{"not a valid node name"}},
		{name: "relative conf dir", mutate: func(o *Options) { o.CNIConfDir = "net.d" }, wantErr: []string{"not an absolute path"}},
		{
			name:    "several problems at once",
			mutate:  func(o *Options) { o.Kubeconfig = ""; o.Resync = time.Millisecond; o.WaitInterval = 0 },
			wantErr: []string{"--kubeconfig is empty", "--resync 1ms", "wait interval 0s"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := good
			tt.mutate(&o)
			err := o.Validate()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate: nil, want %q", tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
