// Package offline tests the offline kind scripts of this folder.
package offline

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// cacheEntries is a node-image.sh cache: the current key's entries, older keys' (each
// kind), what a running build is writing and what is not keyed.
var (
	current = []string{"tools-aaaaaaaaaaaa/bin/coredns", "images-bbbbbbbbbbbb/etcd.tar", "rootfs-bookworm-cccccccccccc.tar",
		"kind-node-v1.37.2-dddddddd.tar"}
	older = []string{"tools-111111111111/bin/coredns", "images-222222222222/etcd.tar", "images-333333333333/done",
		"rootfs-bookworm-444444444444.tar", "kind-node-v1.37.2-55555555.tar", "kind-node-v1.36.3-66666666.tar"}
	untouched = []string{"images-777777777777.tmp/etcd.tar", "kind-node-v1.37.2-88888888.tar.tmp", "tools-999999999999/bin.tmp/ctr",
		"rootfs-work.x1y2z3/etc/passwd", "hack-bin/kindctl", "node-image", "node-image.env", "debootstrap.log"}
	keep = []string{"tools-aaaaaaaaaaaa", "images-bbbbbbbbbbbb", "rootfs-bookworm-cccccccccccc.tar", "kind-node-v1.37.2-dddddddd.tar",
		"localhost/fakecloud-csi/kind-base:v1.37.2-cur", "localhost/fakecloud-csi/kind-node:v1.37.2-cur"}
)

// fakeDocker is a docker on PATH that lists two older images of each repository besides the
// current one, logs each rmi to log, and refuses to remove an image "in use".
const fakeDocker = `#!/bin/sh
case "$1 $2" in
"version "*) exit 0 ;;
"image ls") for t in cur old inuse; do echo "$5:v1.37.2-$t"; done ;;
"image inspect") echo 200000000 ;;
"rmi "*) echo "$2" >>"$DOCKER_LOG"; case "$2" in *inuse) exit 1 ;; esac ;;
esac
`

func writeCache(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, group := range [][]string{current, older, untouched} {
		for _, f := range group {
			p := filepath.Join(dir, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, make([]byte, 4096), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

func exists(dir, entry string) bool {
	_, err := os.Stat(filepath.Join(dir, strings.SplitN(entry, "/", 2)[0]))
	return err == nil
}

// TestPruneCacheKeepsOnlyTheCurrentKey: make kind-images kept every older key's node image
// (766 MB each), component images and tools under ~/.cache/fakecloud-csi/kind, 9.6 GB on one
// machine, which filled the disk of a cold CI run. Once a build has written the current key,
// prune-cache.sh removes the other keys' entries, files and Docker images, says what and how
// much, and leaves what a build is writing, what is not keyed and images still in use.
func TestPruneCacheKeepsOnlyTheCurrentKey(t *testing.T) {
	for _, tool := range []string{"bash", "flock", "du"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: prune-cache.sh needs it", tool)
		}
	}
	dir := writeCache(t)
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "docker"), []byte(fakeDocker), 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "rmi.log")
	cmd := exec.Command("bash", append([]string{"prune-cache.sh", dir}, keep...)...)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "DOCKER_LOG="+log)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("prune-cache.sh: %v\n%s", err, out)
	}
	for _, e := range current {
		if !exists(dir, e) {
			t.Errorf("removed the current key's %s\n%s", e, out)
		}
	}
	for _, e := range untouched {
		if !exists(dir, e) {
			t.Errorf("removed %s, which is being written or not keyed\n%s", e, out)
		}
	}
	for _, e := range older {
		name := strings.SplitN(e, "/", 2)[0]
		if exists(dir, e) {
			t.Errorf("kept %s of an older key\n%s", name, out)
		}
		if !strings.Contains(string(out), "  removed "+filepath.Join(dir, name)+" (") {
			t.Errorf("output does not say it removed %s:\n%s", name, out)
		}
	}
	rmi, _ := os.ReadFile(log)
	if got, want := string(rmi), "localhost/fakecloud-csi/kind-base:v1.37.2-old\nlocalhost/fakecloud-csi/kind-base:v1.37.2-inuse\n"+
		"localhost/fakecloud-csi/kind-node:v1.37.2-old\nlocalhost/fakecloud-csi/kind-node:v1.37.2-inuse\n"; got != want {
		t.Errorf("docker rmi of\n%swant\n%s", got, want)
	}
	for _, want := range []string{"  removed image localhost/fakecloud-csi/kind-node:v1.37.2-old (up to 200 MB",
		"  kept image localhost/fakecloud-csi/kind-base:v1.37.2-inuse: in use",
		"cache: removed 6 entries of older keys in " + dir + ", freed ", "; 2 older images in the Docker engine (up to 400 MB)"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// Again: nothing left to remove, and it says so.
	cmd = exec.Command("bash", append([]string{"prune-cache.sh", dir}, keep...)...)
	cmd.Env = append(os.Environ(), "PATH=/nonexistent:"+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "cache: nothing of older keys to remove in "+dir) {
		t.Errorf("second run: %v\n%s", err, out)
	}
}

// TestPruneCacheLeavesARunningBuildAlone: while another node-image.sh holds the build lock
// (shared, for as long as it builds), nothing is removed: its entries may be an older key's.
func TestPruneCacheLeavesARunningBuildAlone(t *testing.T) {
	for _, tool := range []string{"bash", "flock"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: prune-cache.sh needs it", tool)
		}
	}
	dir := writeCache(t)
	f, err := os.OpenFile(filepath.Join(dir, ".build.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", append([]string{"prune-cache.sh", dir}, keep...)...)
	cmd.Env = append(os.Environ(), "PATH=/nonexistent:"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "another node-image build is running") {
		t.Fatalf("prune-cache.sh: %v\n%s", err, out)
	}
	for _, e := range append(older, current...) {
		if !exists(dir, e) {
			t.Errorf("removed %s while another build runs", e)
		}
	}
}
