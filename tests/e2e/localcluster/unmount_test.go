package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

// orderedMounter records the order of unmounts and refuses to unmount a mount point that
// still has a mount below it, as the kernel does (EBUSY).
type orderedMounter struct {
	*mount.Fake
	order []string
}

func (o *orderedMounter) Unmount(target string) error {
	for p := range o.Mounts() {
		if strings.HasPrefix(p, target+"/") {
			return fmt.Errorf("unmount %s: busy, %s is mounted below it", target, p)
		}
	}
	if err := o.Fake.Unmount(target); err != nil {
		return err
	}
	o.order = append(o.order, target)
	return nil
}

func TestUnmountUnder(t *testing.T) {
	run, outside := t.TempDir(), t.TempDir()
	pod := filepath.Join(run, "n", "node-1", "kubelet", "pods", "p1", "volumes", "v1")
	staging := filepath.Join(run, "n", "node-1", "kubelet", "plugins", "staging", "v1")
	nested := filepath.Join(pod, "sub")
	other := filepath.Join(outside, "keep")
	for _, d := range []string{pod, staging, nested, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	m := &orderedMounter{Fake: mount.NewFake()}
	var info strings.Builder
	for i, target := range []string{staging, pod, pod, nested, other} { // pod twice: stacked
		if err := m.BindMount(outside, target, false); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&info, "%d 1 8:1 / %s rw,relatime shared:1 - ext4 /dev/sda1 rw\n", 100+i, target)
	}
	fmt.Fprintf(&info, "200 1 8:1 / %s rw - ext4 /dev/sda1 rw\n", run+"-sibling") // same prefix, not below
	mi := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(mi, []byte(info.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	left, err := unmountUnder(run, mi, m)
	if err != nil || len(left) != 0 {
		t.Fatalf("unmountUnder = %v, %v; want everything unmounted", left, err)
	}
	if got := m.Mounts(); len(got) != 1 || got[other] != 1 {
		t.Fatalf("mounts left = %v, want only %s", got, other)
	}
	if m.order[0] != nested {
		t.Fatalf("unmounted in order %v, want the deepest (%s) first", m.order, nested)
	}
	if _, err := unmountUnder(run, filepath.Join(t.TempDir(), "missing"), m); err == nil {
		t.Fatal("unmountUnder with an unreadable mountinfo: want an error")
	}
}
