package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fakecloud/fakecloud-csi/hack/kind/internal/kindconfig"
	"github.com/fakecloud/fakecloud-csi/hack/kind/internal/manifests"
	"github.com/fakecloud/fakecloud-csi/hack/kind/internal/ociimage"
	"github.com/fakecloud/fakecloud-csi/hack/kind/internal/smoke"
	"github.com/fakecloud/fakecloud-csi/internal/cli"
)

// run parses args and runs the subcommand they name (see the package comment); `kindctl
// help`, -h and --help print one line per subcommand, `kindctl SUBCOMMAND --help` its
// flags; no subcommand prints the same to stderr and fails. cobra and pflag, as the shipped
// binaries: flags take two dashes.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := cli.NewRoot(&cobra.Command{
		Use:   "kindctl",
		Short: "The kind tooling of fakecloud-csi that needs neither a Docker daemon nor kubectl",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown subcommand %q (kindctl help lists them)", args[0])
			}
			return nil
		},
		RunE: cli.NeedSubcommand(stderr, "no subcommand given (usage above)"),
	}, stdout, stderr)
	root.AddCommand(imageCommand(stdout), kindConfigCommand(stdout), renderCommand(stdout),
		clusterCommand("apply", stdout), clusterCommand("wait", stdout), snapshotterCommand(stdout),
		getCommand(stdout), checkCommand(stdout))
	return cli.Execute(ctx, root, args)
}

// imageOptions are the flags of kindctl image.
type imageOptions struct {
	// Spec is the image to build (ociimage.Spec documents its fields).
	Spec ociimage.Spec
	// Out is the archive to write; Format "oci" (OCI image layout) or "docker" (docker save).
	Out, Format string
}

// AddFlags adds the flags of kindctl image to fs.
func (o *imageOptions) AddFlags(fs *pflag.FlagSet) {
	s := &o.Spec
	fs.StringVar(&s.Binary, "binary", "", "static linux binary to put at /<name> (the entrypoint); empty with --base-layer and --cmd: the base layer alone")
	fs.StringVar(&s.Ref, "ref", "", "image reference, e.g. localhost/fakecloud-csi/driver:dev")
	fs.StringVar(&s.Arch, "arch", runtime.GOARCH, "GOARCH of the binary")
	fs.StringVar(&s.Version, "version", "", "version label (org.opencontainers.image.version)")
	fs.StringVar(&s.Commit, "commit", "", "commit label (org.opencontainers.image.revision)")
	fs.StringVar(&s.Source, "source", "https://github.com/fakecloud/fakecloud-csi", "source label; empty: none")
	fs.StringVar(&o.Out, "out", "", "archive to write")
	fs.StringVar(&s.Dir, "dir", "", "absolute folder of the binary in the image (default /)")
	fs.StringVar(&s.BaseLayer, "base-layer", "", "uncompressed tar to put under the binary as the first layer")
	fs.StringArrayVar(&s.Env, "env", nil, "KEY=VALUE of the image's environment (repeatable)")
	fs.StringArrayVar(&s.Cmd, "cmd", nil, "an element of the image's default command (OCI Cmd; repeatable, in order)")
	fs.StringVar(&s.Title, "title", "", "title label; empty: the binary's name, or the repository's last element")
	fs.StringVar(&o.Format, "format", "oci", "archive format: oci (OCI image layout) or docker (docker save; docker load reads only this)")
}

// Validate reports every problem of o at once.
func (o *imageOptions) Validate() error {
	var errs []error
	if o.Out == "" {
		errs = append(errs, errors.New("--out is required"))
	}
	if err := o.Spec.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.Format != "oci" && o.Format != "docker" {
		errs = append(errs, fmt.Errorf("--format %q: want oci or docker", o.Format))
	}
	return errors.Join(errs...)
}

func imageCommand(stdout io.Writer) *cobra.Command {
	var o imageOptions
	cmd := &cobra.Command{
		Use:   "image",
		Short: "build a driver or fake cloud image archive (OCI or docker) without a Docker daemon",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			write := ociimage.WriteArchive
			if o.Format == "docker" {
				write = ociimage.WriteDockerArchive
			}
			img, err := ociimage.Build(o.Spec)
			if err != nil {
				return err
			}
			if err := write(img, o.Spec.Ref, o.Out); err != nil {
				return err
			}
			d, err := img.Digest()
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(stdout, "%s %s@%s\n", o.Out, o.Spec.Ref, d)
			return err
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// kindConfigOptions are the flags of kindctl kind-config.
type kindConfigOptions struct {
	kindconfig.Options
	// In is the kind cluster config to start from; Out the file to write ("": stdout).
	In, Out string
}

// AddFlags adds the flags of kindctl kind-config to fs.
func (o *kindConfigOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.NodeImage, "node-image", "", "node image every node runs (hack/kind/offline/node-image.sh prints it)")
	fs.StringVar(&o.EtcdImageTag, "etcd-tag", "", "tag of registry.k8s.io/etcd in the node image; empty: kubeadm's default")
	fs.StringVar(&o.In, "in", "deploy/kind/kind-config.yaml", "kind cluster config to start from")
	fs.StringVar(&o.Out, "out", "", "file to write (default stdout)")
}

// kindConfigCommand writes the offline variant of a kind cluster config (package kindconfig).
func kindConfigCommand(stdout io.Writer) *cobra.Command {
	var o kindConfigOptions
	cmd := &cobra.Command{
		Use:   "kind-config",
		Short: "write a kind cluster config with the node image (and etcd tag) filled in",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			src, err := os.ReadFile(o.In)
			if err != nil {
				return fmt.Errorf("kind config: %w", err)
			}
			b, err := kindconfig.Offline(src, o.Options)
			if err != nil {
				return fmt.Errorf("%s: %w", o.In, err)
			}
			if o.Out == "" {
				_, err = stdout.Write(b)
				return err
			}
			return os.WriteFile(o.Out, b, 0o644)
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func renderCommand(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "render DIR",
		Short: "print a kustomization's manifests, as kubectl kustomize would",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errors.New("render takes one kustomization directory")
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			out, err := manifests.RenderYAML(args[0])
			if err != nil {
				return err
			}
			_, err = stdout.Write(out)
			return err
		},
	}
}

// clusterOptions are the flags of kindctl apply and kindctl wait.
type clusterOptions struct {
	// Kubeconfig is the cluster's kubeconfig (default: env KUBECONFIG).
	Kubeconfig string
	// Timeout bounds wait's rollout.
	Timeout time.Duration
	// Apply holds apply's --dry-run and --real-prerequisites.
	Apply manifests.ApplyOptions
}

// AddFlags adds the flags of kindctl verb ("apply" or "wait") to fs.
func (o *clusterOptions) AddFlags(verb string, fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster (env KUBECONFIG)")
	fs.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "wait: how long the rollout may take")
	if verb == "apply" {
		fs.BoolVar(&o.Apply.DryRun, "dry-run", false, "server-side dry run: validate every object, store nothing")
		fs.BoolVar(&o.Apply.RealPrerequisites, "real-prerequisites", false, "with --dry-run: really apply Namespaces and CRDs (the server cannot dry-run objects that need them otherwise)")
	}
}

// Validate reports every problem of o and the directories dirs of verb at once.
func (o *clusterOptions) Validate(verb string, dirs []string) error {
	var errs []error
	if o.Kubeconfig == "" {
		errs = append(errs, errors.New("--kubeconfig (or KUBECONFIG) is required"))
	}
	if len(dirs) == 0 {
		errs = append(errs, fmt.Errorf("%s takes one or more kustomization directories", verb))
	}
	return errors.Join(errs...)
}

func clusterCommand(verb string, stdout io.Writer) *cobra.Command {
	var o clusterOptions
	short := "apply kustomizations to a cluster without kubectl (--dry-run: a server-side dry run)"
	if verb == "wait" {
		short = "wait until the workloads of kustomizations are rolled out"
	}
	cmd := &cobra.Command{
		Use:   verb + " DIR...",
		Short: short,
		RunE: func(cmd *cobra.Command, dirs []string) error {
			if err := o.Validate(verb, dirs); err != nil {
				return err
			}
			var objs []*unstructured.Unstructured
			for _, dir := range dirs {
				o, err := manifests.Render(dir)
				if err != nil {
					return err
				}
				objs = append(objs, o...)
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
			if err != nil {
				return fmt.Errorf("kubeconfig %s: %w", o.Kubeconfig, err)
			}
			a, err := manifests.NewApplier(cfg, stdout)
			if err != nil {
				return err
			}
			if verb == "wait" {
				return a.WaitRolledOut(cmd.Context(), objs, o.Timeout)
			}
			return a.Apply(cmd.Context(), objs, o.Apply)
		},
	}
	o.AddFlags(verb, cmd.Flags())
	return cmd
}

// snapshotterOptions are the flags of kindctl snapshotter.
type snapshotterOptions struct {
	// Deploy is the kustomization whose csi-snapshotter tag picks the release; Out where the
	// manifests go; Go the go command.
	Deploy, Out, Go string
}

// AddFlags adds the flags of kindctl snapshotter to fs.
func (o *snapshotterOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Deploy, "deploy", "deploy/kind", "kustomization whose csi-snapshotter sidecar tag picks the release (deploy/base or an overlay of it)")
	fs.StringVar(&o.Out, "out", "_output/external-snapshotter", "where to put crd/ and snapshot-controller/")
	fs.StringVar(&o.Go, "go", "go", "go command")
}

func snapshotterCommand(stdout io.Writer) *cobra.Command {
	var o snapshotterOptions
	cmd := &cobra.Command{
		Use:   "snapshotter",
		Short: "fetch the external-snapshotter CRDs and snapshot-controller that match the sidecar (Go module proxy)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			objs, err := manifests.Render(o.Deploy)
			if err != nil {
				return err
			}
			version, err := manifests.ImageTag(objs, "csi-snapshotter")
			if err != nil {
				return fmt.Errorf("%s: %w", o.Deploy, err)
			}
			// go mod download of two modules is silent, and slow on a cold module cache.
			if _, err := fmt.Fprintf(stdout, "fetching external-snapshotter %s (the csi-snapshotter sidecar's release) from the Go module proxy: its CRDs and snapshot-controller manifests, into %s ...\n", version, o.Out); err != nil {
				return err
			}
			if err := manifests.FetchSnapshotter(cmd.Context(), o.Go, version, o.Out); err != nil {
				return err
			}
			abs, _ := filepath.Abs(o.Out)
			_, err = fmt.Fprintf(stdout, "external-snapshotter %s in %s\n", version, abs)
			return err
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// checkOptions are the flags of kindctl check.
type checkOptions struct {
	// Smoke is the check (package smoke; AdminToken comes from TokenFile).
	Smoke smoke.Options
	// Kubeconfig is the cluster's kubeconfig (default: env KUBECONFIG); TokenFile holds a
	// fake-cloud admin token.
	Kubeconfig, TokenFile string
}

// AddFlags adds the flags of kindctl check to fs.
func (o *checkOptions) AddFlags(fs *pflag.FlagSet) {
	s := &o.Smoke
	fs.StringVar(&o.Kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster (env KUBECONFIG)")
	fs.StringVar(&s.Namespace, "namespace", "default", "namespace of the check's claim and pod")
	fs.StringVar(&s.Name, "name", "fakecloud-csi-check", "name of the check's claim and pod (neither may exist)")
	fs.StringVar(&s.Node, "node", "", "node to run the pod on; empty: the first whose CSINode count is 2 or more")
	fs.StringVar(&s.StorageClass, "storage-class", "fakecloud-disk", "the claim's StorageClass")
	fs.StringVar(&s.PodImage, "pod-image", "registry.k8s.io/pause:3.10", "image of the pod's container")
	fs.StringVar(&s.CloudURL, "cloud-url", "", "the fake cloud's URL, e.g. http://127.0.0.1:8080 (kubectl port-forward)")
	fs.StringVar(&o.TokenFile, "cloud-token-file", "", "file holding a fake-cloud admin token")
	// The name before every flag about the fake cloud began with --cloud-: still read, with
	// a warning.
	fs.StringVar(&o.TokenFile, "token-file", "", "")
	_ = fs.MarkDeprecated("token-file", "use --cloud-token-file")
	fs.DurationVar(&s.Timeout, "timeout", 2*time.Minute, "how long each waiting step may take")
}

// Validate reports every problem of o at once.
func (o *checkOptions) Validate() error {
	var errs []error
	if o.Kubeconfig == "" {
		errs = append(errs, errors.New("--kubeconfig (or KUBECONFIG) is required"))
	}
	if o.TokenFile == "" {
		errs = append(errs, errors.New("--cloud-token-file is required"))
	}
	return errors.Join(errs...)
}

// checkCommand runs the short end-to-end check of a deployed driver (package smoke).
func checkCommand(stdout io.Writer) *cobra.Command {
	var o checkOptions
	cmd := &cobra.Command{
		Use:   "check",
		Short: "a short end-to-end check of a deployed driver: a claim and a pod attached, the CSINode count following the cloud",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return runCheck(cmd.Context(), o, stdout)
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func runCheck(ctx context.Context, o checkOptions, stdout io.Writer) error {
	tok, err := os.ReadFile(o.TokenFile)
	if err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	s := o.Smoke
	s.Log = stdout
	s.AdminToken = strings.TrimSpace(string(tok))
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", o.Kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	c, err := smoke.New(cs, &http.Client{}, s)
	if err != nil {
		return err
	}
	if err := c.Run(ctx); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	_, err = fmt.Fprintln(stdout, "check passed: attach through the fake cloud, CSINode count followed the cloud's limit down and back, clean delete")
	return err
}

// getOptions are the flags of kindctl get.
type getOptions struct {
	// Token is the bearer token; Out the file for the body ("": stdout).
	Token, Out string
	// Timeout is how long to retry until a 200 answer (0: one try).
	Timeout time.Duration
}

// AddFlags adds the flags of kindctl get to fs.
func (o *getOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Token, "token", "", "bearer token")
	fs.StringVar(&o.Out, "out", "", "file to write the body to (default stdout)")
	fs.DurationVar(&o.Timeout, "timeout", 0, "keep retrying until a 200 answer or this much time passed (0: one try)")
}

// getCommand fetches one URL (the fake cloud's /v1/events after a failure, its /readyz
// before the suite), retrying until --timeout, and writes the body to --out or stdout.
func getCommand(stdout io.Writer) *cobra.Command {
	var o getOptions
	cmd := &cobra.Command{
		Use:   "get URL",
		Short: "GET a URL with a bearer token (the fake cloud's API) and print or save the answer",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errors.New("get takes one URL")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGet(cmd.Context(), o, args[0], stdout)
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func runGet(ctx context.Context, o getOptions, url string, stdout io.Writer) error {
	deadline := time.Now().Add(o.Timeout)
	for {
		body, err := get(ctx, url, o.Token)
		if err == nil {
			if o.Out == "" {
				_, err = stdout.Write(body)
				return err
			}
			return os.WriteFile(o.Out, body, 0o644)
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err) //nolint:errorlint // the deadline is the cause; the last error is context
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
