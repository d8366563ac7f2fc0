package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/fakecloud/fakecloud-csi/hack/kind/internal/kindconfig"
	"github.com/fakecloud/fakecloud-csi/hack/kind/internal/manifests"
	"github.com/fakecloud/fakecloud-csi/hack/kind/internal/ociimage"
	"github.com/fakecloud/fakecloud-csi/hack/kind/internal/smoke"
)

// TestHelp: help, -h and --help print the usage (cobra's), one line per subcommand, and
// succeed; no arguments print it too and fail; an unknown subcommand points to help.
func TestHelp(t *testing.T) {
	subcommands := []string{"image", "kind-config", "render", "apply", "wait", "snapshotter", "get", "check"}
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, nil} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, &out, &errOut)
		text := out.String()
		if args == nil {
			if err == nil || !strings.Contains(err.Error(), "no subcommand given") {
				t.Errorf("no arguments: error %v, want one saying no subcommand was given", err)
			}
			text = errOut.String()
		} else if err != nil {
			t.Errorf("%v: %v", args, err)
		}
		if !strings.Contains(text, "Usage:\n  kindctl [flags]\n  kindctl [command]\n") {
			t.Errorf("%v: output %q, want the usage", args, text)
		}
		for _, s := range subcommands {
			if !strings.Contains(text, "\n  "+s+" ") {
				t.Errorf("%v: usage lacks a line for %s:\n%s", args, s, text)
			}
		}
	}
	err := run(context.Background(), []string{"hlep"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), `unknown subcommand "hlep" (kindctl help lists them)`) {
		t.Errorf("unknown subcommand: %v", err)
	}
}

// TestSnapshotterSaysWhatItFetches: snapshotter prints what it fetches before the long,
// silent go mod download (a first run compiles and downloads for about a minute). A go
// command that fails at once stands in for the download; the line must come before it.
func TestSnapshotterSaysWhatItFetches(t *testing.T) {
	goBin := filepath.Join(t.TempDir(), "go")
	if err := os.WriteFile(goBin, []byte("#!/bin/sh\necho 'no network here' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	deploy, err := filepath.Abs("../../../../deploy/base")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = run(context.Background(), []string{"snapshotter", "--deploy=" + deploy, "--out=" + t.TempDir(), "--go=" + goBin}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "no network here") {
		t.Fatalf("snapshotter with a failing go: %v, want its error", err)
	}
	if want := "fetching external-snapshotter v"; !strings.HasPrefix(out.String(), want) ||
		!strings.Contains(out.String(), "from the Go module proxy: its CRDs and snapshot-controller manifests, into ") {
		t.Errorf("output %q, want a progress line starting %q", out.String(), want)
	}
}

// TestFlagsIntoOptions: each subcommand's flags land in its options, repeatable flags in
// order, and the defaults are the ones documented in the package comment.
func TestFlagsIntoOptions(t *testing.T) {
	t.Setenv("KUBECONFIG", "/env/kubeconfig")
	parse := func(t *testing.T, add func(*pflag.FlagSet), args ...string) {
		t.Helper()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		add(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("image", func(t *testing.T) {
		var o imageOptions
		parse(t, o.AddFlags, "--binary=/b/driver", "--ref=r:1", "--out=o.tar", "--env=A=1,2", "--env=B=2", "--cmd=x", "--cmd=y", "--format=docker")
		want := imageOptions{Spec: ociimage.Spec{Binary: "/b/driver", Ref: "r:1", Arch: runtime.GOARCH, Source: "https://github.com/fakecloud/fakecloud-csi",
			Env: []string{"A=1,2", "B=2"}, Cmd: []string{"x", "y"}}, Out: "o.tar", Format: "docker"}
		if !reflect.DeepEqual(o, want) {
			t.Errorf("options %+v, want %+v", o, want)
		}
	})
	t.Run("kind-config", func(t *testing.T) {
		var o kindConfigOptions
		parse(t, o.AddFlags, "--node-image=n:1", "--etcd-tag=3.6")
		want := kindConfigOptions{Options: kindconfig.Options{NodeImage: "n:1", EtcdImageTag: "3.6"}, In: "deploy/kind/kind-config.yaml"}
		if o != want {
			t.Errorf("options %+v, want %+v", o, want)
		}
	})
	t.Run("apply", func(t *testing.T) {
		var o clusterOptions
		parse(t, func(fs *pflag.FlagSet) { o.AddFlags("apply", fs) }, "--dry-run", "--real-prerequisites")
		want := clusterOptions{Kubeconfig: "/env/kubeconfig", Timeout: 5 * time.Minute, Apply: manifests.ApplyOptions{DryRun: true, RealPrerequisites: true}}
		if o != want {
			t.Errorf("options %+v, want %+v", o, want)
		}
	})
	t.Run("check", func(t *testing.T) {
		var o checkOptions
		parse(t, o.AddFlags, "--cloud-url=http://c", "--cloud-token-file=/t", "--timeout=90s", "--node=n1")
		want := checkOptions{Kubeconfig: "/env/kubeconfig", TokenFile: "/t", Smoke: smoke.Options{Namespace: "default", Name: "fakecloud-csi-check",
			Node: "n1", StorageClass: "fakecloud-disk", PodImage: "registry.k8s.io/pause:3.10", CloudURL: "http://c", Timeout: 90 * time.Second}}
		if !reflect.DeepEqual(o, want) {
			t.Errorf("options %+v, want %+v", o, want)
		}
		// The deprecated name fills the same field.
		var old checkOptions
		parse(t, old.AddFlags, "--cloud-url=http://c", "--token-file=/t", "--timeout=90s", "--node=n1")
		if !reflect.DeepEqual(old, want) {
			t.Errorf("with --token-file: options %+v, want %+v", old, want)
		}
	})
	t.Run("get", func(t *testing.T) {
		var o getOptions
		parse(t, o.AddFlags, "--token", "tok", "--timeout", "60s")
		if want := (getOptions{Token: "tok", Timeout: time.Minute}); o != want {
			t.Errorf("options %+v, want %+v", o, want)
		}
	})
}

// TestRefused: a bad flag, a bad value, a missing argument or required flag fails before
// anything is done, with a message naming it (and, for a flag, where the flags are listed);
// main exits 1 on any error. --help of a subcommand lists its flags and succeeds.
func TestRefused(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"image", "--nope"}, "unknown flag: --nope (kindctl image --help lists the flags)"},
		{[]string{"get", "--timeout=soon", "http://x"}, `invalid argument "soon" for "--timeout" flag`},
		{[]string{"image", "--ref=r", "--format=zip"}, `--out is required`},
		{[]string{"image", "--ref=r", "--out=o", "--binary=/b", "--format=zip"}, `--format "zip": want oci or docker`},
		{[]string{"render"}, "render takes one kustomization directory"},
		{[]string{"get"}, "get takes one URL"},
		{[]string{"apply", "dir"}, "--kubeconfig (or KUBECONFIG) is required"},
		{[]string{"wait", "--kubeconfig=k"}, "wait takes one or more kustomization directories"},
		{[]string{"check", "--kubeconfig=k"}, "--cloud-token-file is required"},
		{[]string{"-dir=x"}, "unknown shorthand flag: 'd' in -dir=x"},
	} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), tc.args, &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.args, err, tc.want)
		}
		if out.Len() > 0 {
			t.Errorf("%q: wrote %q to stdout", tc.args, out.String())
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"image", "--help"}, &out, &out); err != nil {
		t.Fatalf("image --help: %v", err)
	}
	for _, want := range []string{"Usage:\n  kindctl image [flags]", "--binary string", "--env stringArray", `--format string       archive format: oci (OCI image layout) or docker (docker save; docker load reads only this) (default "oci")`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("image --help lacks %q:\n%s", want, out.String())
		}
	}
}
