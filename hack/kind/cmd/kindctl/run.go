package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fakecloud/fakecloud-csi/hack/kind/internal/kindconfig"
	"github.com/fakecloud/fakecloud-csi/hack/kind/internal/manifests"
	"github.com/fakecloud/fakecloud-csi/hack/kind/internal/ociimage"
	"github.com/fakecloud/fakecloud-csi/hack/kind/internal/smoke"
)

// usage is what `kindctl help` prints: one line per subcommand (the package comment has
// their flags; `kindctl SUBCOMMAND -h` lists them).
const usage = `usage: kindctl SUBCOMMAND [flags]   (kindctl SUBCOMMAND -h: its flags)
  image        build a driver or fake cloud image archive (OCI or docker) without a Docker daemon
  kind-config  write a kind cluster config with the node image (and etcd tag) filled in
  render       print a kustomization's manifests, as kubectl kustomize would
  apply        apply kustomizations to a cluster without kubectl (--dry-run: a server-side dry run)
  wait         wait until the workloads of kustomizations are rolled out
  snapshotter  fetch the external-snapshotter CRDs and snapshot-controller that match the sidecar (Go module proxy)
  get          GET a URL with a bearer token (the fake cloud's API) and print or save the answer
  check        a short end-to-end check of a deployed driver: a claim and a pod attached, the CSINode count following the cloud
  help         this text
`

// run dispatches one subcommand; see the package comment.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		_, _ = io.WriteString(stderr, usage)
		return errors.New("no subcommand given (usage above)")
	}
	fs := flag.NewFlagSet("kindctl "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	switch args[0] {
	case "image":
		return runImage(fs, args[1:], stdout)
	case "kind-config":
		return runKindConfig(fs, args[1:], stdout)
	case "render":
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return errors.New("render takes one kustomization directory")
		}
		out, err := manifests.RenderYAML(fs.Arg(0))
		if err != nil {
			return err
		}
		_, err = stdout.Write(out)
		return err
	case "apply", "wait":
		return runCluster(ctx, args[0], fs, args[1:], stdout)
	case "snapshotter":
		return runSnapshotter(ctx, fs, args[1:], stdout)
	case "get":
		return runGet(ctx, fs, args[1:], stdout)
	case "check":
		return runCheck(ctx, fs, args[1:], stdout)
	case "help", "-h", "-help", "--help":
		_, err := io.WriteString(stdout, usage)
		return err
	default:
		return fmt.Errorf("unknown subcommand %q (kindctl help lists them)", args[0])
	}
}

func runImage(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	var s ociimage.Spec
	var out string
	fs.StringVar(&s.Binary, "binary", "", "static linux binary to put at /<name> (the entrypoint); empty with --base-layer and --cmd: the base layer alone")
	fs.StringVar(&s.Ref, "ref", "", "image reference, e.g. localhost/fakecloud-csi/driver:dev")
	fs.StringVar(&s.Arch, "arch", runtime.GOARCH, "GOARCH of the binary")
	fs.StringVar(&s.Version, "version", "", "version label (org.opencontainers.image.version)")
	fs.StringVar(&s.Commit, "commit", "", "commit label (org.opencontainers.image.revision)")
	fs.StringVar(&s.Source, "source", "https://github.com/fakecloud/fakecloud-csi", "source label; empty: none")
	fs.StringVar(&out, "out", "", "archive to write")
	fs.StringVar(&s.Dir, "dir", "", "absolute folder of the binary in the image (default /)")
	fs.StringVar(&s.BaseLayer, "base-layer", "", "uncompressed tar to put under the binary as the first layer")
	fs.Func("env", "KEY=VALUE of the image's environment (repeatable)", func(v string) error {
		s.Env = append(s.Env, v)
		return nil
	})
	fs.Func("cmd", "an element of the image's default command (OCI Cmd; repeatable, in order)", func(v string) error {
		s.Cmd = append(s.Cmd, v)
		return nil
	})
	fs.StringVar(&s.Title, "title", "", "title label; empty: the binary's name, or the repository's last element")
	format := fs.String("format", "oci", "archive format: oci (OCI image layout) or docker (docker save; docker load reads only this)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var errs []error
	if out == "" {
		errs = append(errs, errors.New("--out is required"))
	}
	if err := s.Validate(); err != nil {
		errs = append(errs, err)
	}
	write := ociimage.WriteArchive
	switch *format {
	case "oci":
	case "docker":
		write = ociimage.WriteDockerArchive
	default:
		errs = append(errs, fmt.Errorf("--format %q: want oci or docker", *format))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	img, err := ociimage.Build(s)
	if err != nil {
		return err
	}
	if err := write(img, s.Ref, out); err != nil {
		return err
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s %s@%s\n", out, s.Ref, d)
	return err
}

// runKindConfig writes the offline variant of a kind cluster config (package kindconfig).
func runKindConfig(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	var o kindconfig.Options
	fs.StringVar(&o.NodeImage, "node-image", "", "node image every node runs (hack/kind/offline/node-image.sh prints it)")
	fs.StringVar(&o.EtcdImageTag, "etcd-tag", "", "tag of registry.k8s.io/etcd in the node image; empty: kubeadm's default")
	in := fs.String("in", "deploy/kind/kind-config.yaml", "kind cluster config to start from")
	out := fs.String("out", "", "file to write (default stdout)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	src, err := os.ReadFile(*in)
	if err != nil {
		return fmt.Errorf("kind config: %w", err)
	}
	b, err := kindconfig.Offline(src, o)
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	if *out == "" {
		_, err = stdout.Write(b)
		return err
	}
	return os.WriteFile(*out, b, 0o644)
}

func runCluster(ctx context.Context, verb string, fs *flag.FlagSet, args []string, stdout io.Writer) error {
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster (env KUBECONFIG)")
	var o manifests.ApplyOptions
	timeout := fs.Duration("timeout", 5*time.Minute, "wait: how long the rollout may take")
	if verb == "apply" {
		fs.BoolVar(&o.DryRun, "dry-run", false, "server-side dry run: validate every object, store nothing")
		fs.BoolVar(&o.RealPrerequisites, "real-prerequisites", false, "with --dry-run: really apply Namespaces and CRDs (the server cannot dry-run objects that need them otherwise)")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *kubeconfig == "" {
		return errors.New("--kubeconfig (or KUBECONFIG) is required")
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%s takes one or more kustomization directories", verb)
	}
	var objs []*unstructured.Unstructured
	for _, dir := range fs.Args() {
		o, err := manifests.Render(dir)
		if err != nil {
			return err
		}
		objs = append(objs, o...)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", *kubeconfig, err)
	}
	a, err := manifests.NewApplier(cfg, stdout)
	if err != nil {
		return err
	}
	if verb == "wait" {
		return a.WaitRolledOut(ctx, objs, *timeout)
	}
	return a.Apply(ctx, objs, o)
}

func runSnapshotter(ctx context.Context, fs *flag.FlagSet, args []string, stdout io.Writer) error {
	deploy := fs.String("deploy", "deploy/kind", "kustomization whose csi-snapshotter sidecar tag picks the release (deploy/base or an overlay of it)")
	out := fs.String("out", "_output/external-snapshotter", "where to put crd/ and snapshot-controller/")
	goBin := fs.String("go", "go", "go command")
	if err := fs.Parse(args); err != nil {
		return err
	}
	objs, err := manifests.Render(*deploy)
	if err != nil {
		return err
	}
	version, err := manifests.ImageTag(objs, "csi-snapshotter")
	if err != nil {
		return fmt.Errorf("%s: %w", *deploy, err)
	}
	// go mod download of two modules is silent, and slow on a cold module cache.
	if _, err := fmt.Fprintf(stdout, "fetching external-snapshotter %s (the csi-snapshotter sidecar's release) from the Go module proxy: its CRDs and snapshot-controller manifests, into %s ...\n", version, *out); err != nil {
		return err
	}
	if err := manifests.FetchSnapshotter(ctx, *goBin, version, *out); err != nil {
		return err
	}
	abs, _ := filepath.Abs(*out)
	_, err = fmt.Fprintf(stdout, "external-snapshotter %s in %s\n", version, abs)
	return err
}

// runCheck runs the short end-to-end check of a deployed driver (package smoke).
func runCheck(ctx context.Context, fs *flag.FlagSet, args []string, stdout io.Writer) error {
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster (env KUBECONFIG)")
	o := smoke.Options{Log: stdout}
	fs.StringVar(&o.Namespace, "namespace", "default", "namespace of the check's claim and pod")
	fs.StringVar(&o.Name, "name", "fakecloud-csi-check", "name of the check's claim and pod (neither may exist)")
	fs.StringVar(&o.Node, "node", "", "node to run the pod on; empty: the first whose CSINode count is 2 or more")
	fs.StringVar(&o.StorageClass, "storage-class", "fakecloud-disk", "the claim's StorageClass")
	fs.StringVar(&o.PodImage, "pod-image", "registry.k8s.io/pause:3.10", "image of the pod's container")
	fs.StringVar(&o.CloudURL, "cloud-url", "", "the fake cloud's URL, e.g. http://127.0.0.1:8080 (kubectl port-forward)")
	tokenFile := fs.String("token-file", "", "file holding a fake-cloud admin token")
	fs.DurationVar(&o.Timeout, "timeout", 2*time.Minute, "how long each waiting step may take")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *kubeconfig == "" {
		return errors.New("--kubeconfig (or KUBECONFIG) is required")
	}
	if *tokenFile == "" {
		return errors.New("--token-file is required")
	}
	tok, err := os.ReadFile(*tokenFile)
	if err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	o.AdminToken = strings.TrimSpace(string(tok))
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", *kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	c, err := smoke.New(cs, &http.Client{}, o)
	if err != nil {
		return err
	}
	if err := c.Run(ctx); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	_, err = fmt.Fprintln(stdout, "check passed: attach through the fake cloud, CSINode count followed the cloud's limit down and back, clean delete")
	return err
}

// runGet fetches one URL (the fake cloud's /v1/events after a failure, its /readyz before
// the suite), retrying until --timeout, and writes the body to --out or stdout.
func runGet(ctx context.Context, fs *flag.FlagSet, args []string, stdout io.Writer) error {
	token := fs.String("token", "", "bearer token")
	out := fs.String("out", "", "file to write the body to (default stdout)")
	timeout := fs.Duration("timeout", 0, "keep retrying until a 200 answer or this much time passed (0: one try)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("get takes one URL")
	}
	deadline := time.Now().Add(*timeout)
	for {
		body, err := get(ctx, fs.Arg(0), *token)
		if err == nil {
			if *out == "" {
				_, err = stdout.Write(body)
				return err
			}
			return os.WriteFile(*out, body, 0o644)
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(time.Second):
		}
	}
}

func get(ctx context.Context, url, token string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return body, nil
}
