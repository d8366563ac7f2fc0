package ociimage_test

import (
	"archive/tar"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/fakecloud/fakecloud-csi/hack/kind/internal/ociimage"
)

// repoRoot is the fakecloud-csi checkout this module sits in (hack/kind).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", "driver")); err != nil {
		t.Fatalf("not the repository root: %s: %v", root, err)
	}
	return root
}

// TestImagesScript runs hack/images.sh (what `make images` runs) and checks each archive as
// kind would see it: the image the index names, its entrypoint, labels and platform, and the
// binary inside, run with --version, printing the stamped version and commit.
func TestImagesScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both binaries; skipped under -short")
	}
	root := repoRoot(t)
	out := t.TempDir()
	const version, commit = "v9.8.7-test", "cafe123"
	cmd := exec.Command(filepath.Join(root, "hack", "images.sh"))
	cmd.Env = append(os.Environ(), "IMAGES_DIR="+out, "VERSION="+version, "COMMIT="+commit, "IMAGE_TAG=test", "ARCH="+runtime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/images.sh: %v\n%s", err, b)
	}
	for _, bin := range []string{"driver", "fakecloud"} {
		t.Run(bin, func(t *testing.T) {
			ref := "localhost/fakecloud-csi/" + bin + ":test"
			img, err := ociimage.ReadArchive(filepath.Join(out, bin+".tar"), ref, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(cf.Config.Entrypoint, " "); got != "/"+bin {
				t.Errorf("entrypoint %q, want %q", got, "/"+bin)
			}
			if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
				t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
			}
			for k, want := range map[string]string{ociimage.LabelVersion: version, ociimage.LabelRevision: commit, ociimage.LabelTitle: bin} {
				if got := cf.Config.Labels[k]; got != want {
					t.Errorf("label %s = %q, want %q", k, got, want)
				}
			}
			data, err := ociimage.ExtractFile(img, "/"+bin)
			if err != nil {
				t.Fatal(err)
			}
			if runtime.GOOS != "linux" {
				t.Skipf("cannot run a linux binary on %s", runtime.GOOS)
			}
			exe := filepath.Join(t.TempDir(), bin)
			if err := os.WriteFile(exe, data, 0o755); err != nil {
				t.Fatal(err)
			}
			got, err := exec.Command(exe, "--version").CombinedOutput()
			if err != nil {
				t.Fatalf("%s --version: %v\n%s", bin, err, got)
			}
			if want := bin + " " + version + " (" + commit + ")"; strings.TrimSpace(string(got)) != want {
				t.Errorf("%s --version printed %q, want %q", bin, strings.TrimSpace(string(got)), want)
			}
		})
	}
}

// TestSpecValidate: every problem of a bad Spec is reported at once; a good one passes.
func TestSpecValidate(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(exe, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	notExe := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(notExe, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := ociimage.Spec{Binary: exe, Ref: "localhost/x/bin:dev", Arch: "amd64", Version: "v1", Commit: "c"}
	tests := []struct {
		name  string
		spec  func(s ociimage.Spec) ociimage.Spec
		wants []string
	}{
		{"valid", func(s ociimage.Spec) ociimage.Spec { return s }, nil},
		{"missing binary", func(s ociimage.Spec) ociimage.Spec { s.Binary = filepath.Join(exe, "nope"); return s }, []string{"binary"}},
		{"not executable", func(s ociimage.Spec) ociimage.Spec { s.Binary = notExe; return s }, []string{"not an executable"}},
		{"no tag and no version", func(s ociimage.Spec) ociimage.Spec { s.Ref, s.Version = "localhost/x/bin", ""; return s },
			[]string{"registry/repository:tag", "version and commit"}},
		{"no arch", func(s ociimage.Spec) ociimage.Spec { s.Arch = ""; return s }, []string{"architecture"}},
		{"relative dir", func(s ociimage.Spec) ociimage.Spec { s.Dir = "usr/bin"; return s }, []string{"clean absolute path"}},
		{"unclean dir", func(s ociimage.Spec) ociimage.Spec { s.Dir = "/usr/bin/"; return s }, []string{"clean absolute path"}},
		{"missing base layer", func(s ociimage.Spec) ociimage.Spec { s.BaseLayer = filepath.Join(exe, "nope.tar"); return s }, []string{"base layer"}},
		{"bad env", func(s ociimage.Spec) ociimage.Spec { s.Env = []string{"PATH=/bin", "=x", "NOEQUALS"}; return s }, []string{`env "=x"`, `env "NOEQUALS"`}},
		{"no binary, base layer and cmd", func(s ociimage.Spec) ociimage.Spec {
			s.Binary, s.BaseLayer, s.Cmd = "", notExe, []string{"sh"}
			return s
		}, nil},
		{"no binary, no cmd", func(s ociimage.Spec) ociimage.Spec { s.Binary, s.BaseLayer = "", notExe; return s }, []string{"needs a base layer and a cmd"}},
		{"no binary, no base layer", func(s ociimage.Spec) ociimage.Spec { s.Binary, s.Cmd = "", []string{"sh"}; return s }, []string{"needs a base layer and a cmd"}},
		{"dir, base layer and env", func(s ociimage.Spec) ociimage.Spec {
			s.Dir, s.BaseLayer, s.Env = "/usr/local/bin", notExe, []string{"PATH=/usr/bin"}
			return s
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.spec(good).Validate()
			if len(tt.wants) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tt.wants)
			}
			for _, w := range tt.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestArchiveRoundTrip: what WriteArchive writes, ReadArchive finds by name (and only by
// that name), with the binary intact.
func TestArchiveRoundTrip(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "tool")
	content := []byte("\x7fELF not really\n")
	if err := os.WriteFile(exe, content, 0o755); err != nil {
		t.Fatal(err)
	}
	s := ociimage.Spec{Binary: exe, Ref: "localhost/x/tool:v1", Arch: "arm64", Version: "v1", Commit: "abc"}
	img, err := ociimage.Build(s)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out", "tool.tar")
	if err := ociimage.WriteArchive(img, s.Ref, out); err != nil {
		t.Fatal(err)
	}
	if _, err := ociimage.ReadArchive(out, "localhost/x/tool:v2", t.TempDir()); err == nil {
		t.Error("found an image under a name the archive does not hold")
	}
	back, err := ociimage.ReadArchive(out, s.Ref, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	if got, _ := back.Digest(); got != want {
		t.Errorf("digest after round trip %s, want %s", got, want)
	}
	got, err := ociimage.ExtractFile(back, "/tool")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(content) {
		t.Errorf("binary in image %q, want %q", got, content)
	}
	// Same input, same digest: the image is reproducible.
	again, err := ociimage.Build(s)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := again.Digest(); d != want {
		t.Errorf("second build digest %s, want %s", d, want)
	}
}

// TestDirBaseLayerEnv: an image with a base layer keeps the base's files under the binary's
// layer, puts the binary in Dir with its parents, sets the environment, and the docker archive
// of it reads back as the same image under its tag.
func TestDirBaseLayerEnv(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "kube-proxy")
	if err := os.WriteFile(exe, []byte("\x7fELF proxy\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dir, "base.tar")
	writeTar(t, base, map[string]string{"usr/sbin/xtables-nft-multi": "iptables", "etc/protocols": "tcp 6"})
	s := ociimage.Spec{
		Binary: exe, Ref: "registry.k8s.io/kube-proxy:v1.37.2", Arch: "amd64", Version: "v1.37.2", Commit: "c",
		Dir: "/usr/local/bin", BaseLayer: base, Env: []string{"PATH=/usr/local/bin:/usr/sbin"},
	}
	img, err := ociimage.Build(s)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 2 {
		t.Fatalf("%d layers (err %v), want the base and the binary", len(layers), err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cf.Config.Entrypoint, " "); got != "/usr/local/bin/kube-proxy" {
		t.Errorf("entrypoint %q, want /usr/local/bin/kube-proxy", got)
	}
	if got := strings.Join(cf.Config.Env, " "); got != "PATH=/usr/local/bin:/usr/sbin" {
		t.Errorf("env %q", got)
	}
	for p, want := range map[string]string{"/usr/local/bin/kube-proxy": "\x7fELF proxy\n", "/usr/sbin/xtables-nft-multi": "iptables", "/etc/protocols": "tcp 6"} {
		got, err := ociimage.ExtractFile(img, p)
		if err != nil || string(got) != want {
			t.Errorf("%s: %q (err %v), want %q", p, got, err, want)
		}
	}
	out := filepath.Join(dir, "out", "kube-proxy.tar")
	if err := ociimage.WriteDockerArchive(img, s.Ref, out); err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(s.Ref)
	if err != nil {
		t.Fatal(err)
	}
	back, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatalf("read docker archive: %v", err)
	}
	wantCfg, _ := img.ConfigName()
	if got, _ := back.ConfigName(); got != wantCfg {
		t.Errorf("config digest after round trip %s, want %s", got, wantCfg)
	}
	if _, err := tarball.ImageFromPath(out, mustTag(t, "registry.k8s.io/kube-proxy:v0")); err == nil {
		t.Error("found an image under a tag the archive does not hold")
	}
}

// TestBaseLayerOnly: an image without a binary is its base layer, with no entrypoint, the
// given Cmd (Docker's busybox: CMD ["sh"]) and the repository's name as its title; an image
// with a binary and a Cmd keeps both (agnhost: ENTRYPOINT ["/agnhost"], CMD ["pause"]).
func TestBaseLayerOnly(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "busybox.tar")
	writeTar(t, base, map[string]string{"bin/busybox": "\x7fELF busybox\n", "etc/passwd": "root:x:0:0:root:/root:/bin/sh\n"})
	exe := filepath.Join(dir, "agnhost")
	if err := os.WriteFile(exe, []byte("\x7fELF agnhost\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name                   string
		spec                   ociimage.Spec
		layers                 int
		entrypoint, cmd, title string
		files                  map[string]string
	}{
		{
			name:   "busybox",
			spec:   ociimage.Spec{Ref: "localhost/fakecloud-csi/e2e-test-images/busybox:1.37.0-2", BaseLayer: base, Cmd: []string{"sh"}},
			layers: 1, cmd: "sh", title: "busybox",
			files: map[string]string{"/bin/busybox": "\x7fELF busybox\n"},
		},
		{
			name:   "agnhost",
			spec:   ociimage.Spec{Ref: "localhost/fakecloud-csi/e2e-test-images/agnhost:2.66.1", BaseLayer: base, Binary: exe, Cmd: []string{"pause"}},
			layers: 2, entrypoint: "/agnhost", cmd: "pause", title: "agnhost",
			files: map[string]string{"/bin/busybox": "\x7fELF busybox\n", "/agnhost": "\x7fELF agnhost\n"},
		},
		{
			name:   "title given",
			spec:   ociimage.Spec{Ref: "localhost/fakecloud-csi/e2e-test-images/nginx:1.27.0-2", BaseLayer: base, Cmd: []string{"sh"}, Title: "nginx (busybox stand-in)"},
			layers: 1, cmd: "sh", title: "nginx (busybox stand-in)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.spec
			s.Arch, s.Version, s.Commit = "amd64", "1", "c"
			img, err := ociimage.Build(s)
			if err != nil {
				t.Fatal(err)
			}
			layers, err := img.Layers()
			if err != nil || len(layers) != tt.layers {
				t.Fatalf("%d layers (err %v), want %d", len(layers), err, tt.layers)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(cf.Config.Entrypoint, " "); got != tt.entrypoint {
				t.Errorf("entrypoint %q, want %q", got, tt.entrypoint)
			}
			if got := strings.Join(cf.Config.Cmd, " "); got != tt.cmd {
				t.Errorf("cmd %q, want %q", got, tt.cmd)
			}
			if got := cf.Config.Labels[ociimage.LabelTitle]; got != tt.title {
				t.Errorf("title %q, want %q", got, tt.title)
			}
			for p, want := range tt.files {
				got, err := ociimage.ExtractFile(img, p)
				if err != nil || string(got) != want {
					t.Errorf("%s: %q (err %v), want %q", p, got, err, want)
				}
			}
		})
	}
}

func mustTag(t *testing.T, ref string) *name.Tag {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	return &tag
}

// writeTar writes the regular files (path: content) as a tar at p.
func writeTar(t *testing.T, p string, files map[string]string) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
