// Command localcluster builds and runs the e2e cluster of upstream Kubernetes
// binaries (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
// hollow kubelets, csi-provisioner, csi-attacher, csi-resizer, csi-snapshotter,
// snapshot-controller) with the fake cloud and the driver, all as local
// processes on 127.0.0.1. No Docker needed.
//
//	localcluster build            build missing binaries into the cache
//	                              (--version=v1.34.4 or v4.12.0: one other Kubernetes or
//	                              external-attacher version, for the compatibility matrix)
//	localcluster build-upstream   build the upstream storage e2e suite (tests/e2e/upstream) into
//	                              the cache unless built; print its path on stdout
//	localcluster up [--private]   start a cluster in the background, print how to reach it
//	                              (--private: not the run `down` stops without --run-dir)
//	localcluster down [--run-dir] stop it
//	localcluster run              start a cluster in the foreground until Ctrl-C
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fakecloud/fakecloud-csi/internal/cli"
	"github.com/fakecloud/fakecloud-csi/tests/e2e/localcluster"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

// options are the flags shared by the subcommands.
type options struct {
	// RepoRoot is the clone; found from the working directory when empty.
	RepoRoot string
	// BinDir is the binary cache; localcluster.DefaultCacheDir when empty.
	BinDir string
	// RunDir is the run folder; a new one under the temp dir when empty (up,
	// run), the last `up` when empty (down).
	RunDir string
	// Nodes is the number of hollow nodes (the first three have the default
	// shapes; more repeat them).
	Nodes int
	// Force rebuilds cached binaries (build).
	Force bool
	// Kind adds the offline kind node image's binaries (build).
	Kind bool
	// Verbosity is the components' -v.
	Verbosity int
	// DriverArgs are extra driver flags, space separated.
	DriverArgs string
	// Private keeps `up` from recording its run as the current one, the one
	// `down` without --run-dir stops: for scripts that stop their own
	// cluster while someone else's `make up-local` cluster runs.
	Private bool
	// Version is the one other version `build --version` builds; Components, comma
	// separated, limit it to some of its components.
	Version, Components string
	// ControlPlaneVersion, KubeletVersion and AttacherVersion run those roles at another
	// version than the pinned set (built by `build --version`); "" is the pinned one.
	ControlPlaneVersion, KubeletVersion, AttacherVersion string
	// Versions' gates and node labels are passed as they are.
	Versions localcluster.Versions
}

// AddFlags adds the flags every subcommand takes to fs.
func (o *options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.RepoRoot, "repo", "", "fakecloud-csi clone (default: found from the working directory)")
	fs.StringVar(&o.BinDir, "bin-dir", "", "binary cache (default: $FAKECLOUD_E2E_CACHE or ${XDG_CACHE_HOME:-~/.cache}/fakecloud-csi/localcluster/"+localcluster.KubeVersion+"/bin)")
	fs.StringVar(&o.RunDir, "run-dir", "", "run folder (default: new under $TMPDIR; for down: the last up)")
	fs.IntVar(&o.Nodes, "nodes", 3, "hollow nodes")
	fs.BoolVar(&o.Force, "force", false, "build, build-upstream: rebuild binaries that are cached")
	fs.BoolVar(&o.Kind, "kind", false, "build: also kubelet, kubeadm, kubectl and kube-proxy for the offline kind node image")
	fs.IntVarP(&o.Verbosity, "v", "v", 4, "component log verbosity")
	fs.BoolVar(&o.Private, "private", false, "up: do not make this run the current one (the one down stops without --run-dir)")
	fs.StringVar(&o.Components, "components", "", "build --version: only these components, comma separated (e.g. hollow-kubelet; kubelet: the real kubelet of that version, for a kind node)")
	fs.StringVar(&o.Version, "version", "", "build: build this Kubernetes (v1.x.y) or external-attacher (v4.x.y) version instead of the pinned set")
	fs.StringVar(&o.ControlPlaneVersion, "control-plane-version", "", "up, run: kube-apiserver, kube-controller-manager and kube-scheduler of this version (default: "+localcluster.KubeVersion+")")
	fs.StringVar(&o.KubeletVersion, "kubelet-version", "", "up, run: hollow kubelets of this version (default: "+localcluster.KubeVersion+")")
	fs.StringVar(&o.AttacherVersion, "attacher-version", "", "up, run: csi-attacher of this version (default: the tools module's)")
	fs.StringVar(&o.Versions.APIServerFeatureGates, "apiserver-feature-gates", "", "up, run: kube-apiserver --feature-gates")
	fs.StringVar(&o.Versions.KubeletFeatureGates, "kubelet-feature-gates", "", "up, run: hollow kubelets' --feature-gates (e.g. MutableCSINodeAllocatableCount=true)")
	fs.StringVar(&o.Versions.AttacherFeatureGates, "attacher-feature-gates", "", "up, run: csi-attacher --feature-gates")
	fs.StringVar(&o.Versions.NodeLabels, "node-labels", "", "up, run: extra labels of every Node, k=v,k2=v2")
	fs.StringVar(&o.DriverArgs, "driver-args", "", "driver flags added after localcluster.DefaultDriverArgs, space separated (e.g. \"--capacity-stability-window=30s\")")
}

// Validate reports every problem of o at once.
func (o *options) Validate() error {
	var errs []error
	if o.Nodes < 1 || o.Nodes > 20 {
		errs = append(errs, fmt.Errorf("--nodes must be 1..20, got %d", o.Nodes))
	}
	if o.Verbosity < 0 {
		errs = append(errs, fmt.Errorf("--v must be ≥ 0, got %d", o.Verbosity))
	}
	return errors.Join(errs...)
}

// complete fills the defaults that need the environment.
func (o *options) complete() error {
	var err error
	if o.RepoRoot == "" {
		wd, werr := os.Getwd()
		if werr != nil {
			return werr
		}
		if o.RepoRoot, err = localcluster.FindRepoRoot(wd); err != nil {
			return err
		}
	}
	if o.BinDir == "" {
		if o.BinDir, err = localcluster.DefaultCacheDir(); err != nil {
			return err
		}
	}
	for _, r := range []struct {
		v   string
		dir *string
	}{{o.ControlPlaneVersion, &o.Versions.ControlPlaneBinDir}, {o.KubeletVersion, &o.Versions.KubeletBinDir}, {o.AttacherVersion, &o.Versions.AttacherBinDir}} {
		if r.v == "" || r.v == localcluster.KubeVersion {
			continue
		}
		if *r.dir, err = localcluster.VersionCacheDir(r.v); err != nil {
			return err
		}
	}
	return nil
}

// run parses args and runs the subcommand they name (see the package comment) until ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	root := newCommand(&o, stdout, stderr)
	return cli.Execute(ctx, root, args)
}

// newCommand is the command tree, its flags parsed into o; every subcommand takes every
// flag (`up` hands its own to the `serve` it starts).
func newCommand(o *options, stdout, stderr io.Writer) *cobra.Command {
	root := cli.NewRoot(&cobra.Command{
		Use:   "localcluster",
		Short: "Build and run the e2e cluster of upstream Kubernetes binaries with the fake cloud and the driver, as local processes",
		Args:  cobra.NoArgs,
		RunE:  cli.NeedSubcommand(stderr, "usage: localcluster build|build-upstream|up|down|run|serve [flags]"),
	}, stdout, stderr)
	o.AddFlags(root.PersistentFlags())
	sub := func(use, short string, do func(ctx context.Context, cmd *cobra.Command) error) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				if err := o.Validate(); err != nil {
					return err
				}
				if err := o.complete(); err != nil {
					return err
				}
				return do(cmd.Context(), cmd)
			}}
	}
	serveCmd := sub("serve", "start a cluster in the foreground until stopped (what up starts, detached)", func(ctx context.Context, _ *cobra.Command) error {
		return serve(ctx, *o, stdout, false)
	})
	serveCmd.Hidden = true
	root.AddCommand(
		sub("build", "build missing binaries into the cache (--version: one other Kubernetes or external-attacher version, for the compatibility matrix)", func(ctx context.Context, _ *cobra.Command) error {
			return build(ctx, *o, stdout)
		}),
		sub("build-upstream", "build the upstream storage e2e suite (tests/e2e/upstream) into the cache unless built; print its path on stdout", func(ctx context.Context, _ *cobra.Command) error {
			// Progress to stderr: stdout is the binary's path alone, for scripts.
			bin, err := localcluster.BuildUpstream(ctx, localcluster.UpstreamBuildOptions{
				ModuleDir: filepath.Join(o.RepoRoot, "tests", "e2e", "upstream"),
				BinDir:    o.BinDir, Force: o.Force, Out: stderr,
			})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(stdout, bin)
			return err
		}),
		sub("up", "start a cluster in the background, print how to reach it (--private: not the run down stops without --run-dir)", func(ctx context.Context, cmd *cobra.Command) error {
			return up(ctx, *o, changedFlags(cmd.Flags()), stdout)
		}),
		sub("down", "stop the cluster of --run-dir, or of the last up", func(context.Context, *cobra.Command) error {
			return down(*o, stdout)
		}),
		sub("run", "start a cluster in the foreground until Ctrl-C", func(ctx context.Context, _ *cobra.Command) error {
			return serve(ctx, *o, stdout, true)
		}),
		serveCmd)
	return root
}

// changedFlags are the flags given on the command line, as --name=value arguments, but for
// --run-dir (up hands serve its absolute run folder).
func changedFlags(fs *pflag.FlagSet) []string {
	var out []string
	fs.Visit(func(f *pflag.Flag) {
		if f.Name != "run-dir" {
			out = append(out, "--"+f.Name+"="+f.Value.String())
		}
	})
	return out
}

// build builds the pinned binaries into the cache, or with --version one other version.
func build(ctx context.Context, o options, stdout io.Writer) error {
	toolsDir := filepath.Join(o.RepoRoot, "tests", "e2e", "localcluster", "tools")
	if o.Version != "" {
		dir, err := localcluster.BuildVersion(ctx, localcluster.VersionBuildOptions{
			ToolsDir: toolsDir, Version: o.Version, Force: o.Force, Out: stdout,
			Components: strings.FieldsFunc(o.Components, func(r rune) bool { return r == ',' }),
		})
		if err == nil {
			fmt.Fprintln(stdout, "built", o.Version, "into", dir)
		}
		return err
	}
	return localcluster.Build(ctx, localcluster.BuildOptions{ToolsDir: toolsDir, BinDir: o.BinDir, Kind: o.Kind, Force: o.Force, Out: stdout})
}

func clusterOptions(o options, runDir string, out io.Writer) localcluster.Options {
	co := localcluster.DefaultOptions(o.RepoRoot, o.BinDir, runDir)
	base := co.Nodes
	co.Nodes = nil
	for i := range o.Nodes {
		n := base[i%len(base)]
		n.Name = "node-" + strconv.Itoa(i+1)
		co.Nodes = append(co.Nodes, n)
	}
	co.Verbosity = o.Verbosity
	co.Versions = o.Versions
	co.DriverArgs = append(co.DriverArgs, strings.Fields(o.DriverArgs)...)
	co.Out = out
	return co
}

// serve starts a cluster and keeps it until ctx ends (Ctrl-C, `down`).
func serve(ctx context.Context, o options, stdout io.Writer, printInfo bool) error {
	runDir := o.RunDir
	if runDir == "" {
		var err error
		if runDir, err = localcluster.NewRunDir(); err != nil {
			return err
		}
	}
	c, err := localcluster.Start(ctx, clusterOptions(o, runDir, stdout))
	if err != nil {
		return err
	}
	defer c.Stop()
	if printInfo {
		printHowTo(stdout, c.Info)
	}
	<-ctx.Done()
	fmt.Fprintln(stdout, "stopping the cluster; logs stay in", c.LogDir)
	return nil
}

func currentFile(binDir string) string {
	return filepath.Join(filepath.Dir(binDir), "current-run")
}

// up starts `serve` detached from the terminal and returns once the cluster
// is ready (cluster.json exists) or serve failed.
func up(ctx context.Context, o options, args []string, stdout io.Writer) error {
	runDir := o.RunDir
	if runDir == "" {
		var err error
		if runDir, err = localcluster.NewRunDir(); err != nil {
			return err
		}
	}
	// Absolute, so that `down` finds this run folder on serve's command line (isServe).
	runDir, err := filepath.Abs(runDir)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logPath := filepath.Join(runDir, "localcluster.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(self, append([]string{"serve", "--run-dir=" + runDir}, args...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start serve: %w", err)
	}
	if err := os.WriteFile(filepath.Join(runDir, "localcluster.pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		return err
	}
	if !o.Private {
		_ = os.WriteFile(currentFile(o.BinDir), []byte(runDir+"\n"), 0o644)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Fprintf(stdout, "starting a local cluster in %s (progress: %s)\n", runDir, logPath)
	for {
		if info, err := localcluster.ReadInfo(runDir); err == nil {
			printHowTo(stdout, info)
			return nil
		}
		select {
		case err := <-exited:
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("cluster failed to start (%w):\n%s", err, log)
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGTERM)
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func printHowTo(w io.Writer, info localcluster.Info) {
	fmt.Fprintf(w, `
local cluster ready (run folder %[1]s, logs in %[2]s)
  console: %[4]s/ui#token=%[6]s (open in a browser: slots, quotas, faults, events, each plugin's value live)
  export KUBECONFIG=%[3]s
  export FAKECLOUD_E2E_CLOUD_URL=%[4]s FAKECLOUD_E2E_CLOUD_TOKEN_FILE=%[5]s FAKECLOUD_E2E_RUN_DIR=%[1]s
  kubectl get nodes,csinodes -o wide
  curl -s -H "Authorization: Bearer $(cat %[5]s)" %[4]s/v1/instances
  curl -s -H "Authorization: Bearer $(cat %[5]s)" -X PATCH -d '{"outOfBandSlots":3}' %[4]s/v1/instances/node-1
  curl -s -H "Authorization: Bearer $(cat %[5]s)" %[4]s/v1/quotas
stop it with: make down-local (or, in tests/e2e: go run ./localcluster/cmd/localcluster down --run-dir=%[1]s)
`, info.RunDir, info.LogDir, info.Kubeconfig, info.CloudURL, info.AdminTokenFile, info.AdminToken)
	nodes := make([]string, 0, len(info.PluginURLs))
	for n := range info.PluginURLs {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	fmt.Fprintf(w, "controller plugin: curl -s %s/metrics\n", info.ControllerURL)
	for _, n := range nodes {
		fmt.Fprintf(w, "node plugin of %s: curl -s %s/debug/capacity (also /debug/cluster, /metrics)\n", n, info.PluginURLs[n])
	}
	if len(info.DriverArgs) > 0 {
		fmt.Fprintf(w, "the drivers run with the e2e suite's capacity flags (increases apply at the next refresh,\n"+
			"no stability window or step limit; docs/local-cluster.md):\n  %s\n", strings.Join(info.DriverArgs, " "))
	}
}

// down stops the serve process of a run folder and waits for it to finish.
func down(o options, stdout io.Writer) error {
	runDir := o.RunDir
	if runDir == "" {
		data, err := os.ReadFile(currentFile(o.BinDir))
		if err != nil {
			return fmt.Errorf("no --run-dir and no current run: %w", err)
		}
		runDir = strings.TrimSpace(string(data))
	}
	runDir, err := filepath.Abs(runDir)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(runDir, "localcluster.pid"))
	if errors.Is(err, fs.ErrNotExist) {
		// Already stopped (or never started there): nothing to do, as a cleanup step wants.
		fmt.Fprintln(stdout, "no cluster running in", runDir)
		return nil
	}
	if err != nil {
		return fmt.Errorf("no cluster in %s: %w", runDir, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return fmt.Errorf("bad pid file in %s: %w", runDir, err)
	}
	// The serve process may have died long ago and its pid gone to another program: signal
	// it only when it still is this run folder's serve process.
	if !isServe(pid, runDir) {
		if syscall.Kill(pid, 0) == nil {
			// Alive, but not recognisably ours (another spelling of the run folder, /proc
			// hidden): keep the pid file rather than orphan a running cluster.
			return fmt.Errorf("pid %d of %s is running but is not `localcluster serve --run-dir=%s`; stop it yourself if it is the cluster (kill %d)", pid, runDir, runDir, pid)
		}
		fmt.Fprintln(stdout, "cluster in", runDir, "was not running")
		_ = os.Remove(filepath.Join(runDir, "localcluster.pid"))
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			fmt.Fprintln(stdout, "cluster in", runDir, "was not running")
			_ = os.Remove(filepath.Join(runDir, "localcluster.pid"))
			return nil
		}
		return fmt.Errorf("stop pid %d: %w", pid, err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d still running after 2m; logs in %s/logs", pid, runDir)
		}
		time.Sleep(200 * time.Millisecond)
	}
	_ = os.Remove(filepath.Join(runDir, "localcluster.pid"))
	fmt.Fprintln(stdout, "stopped the cluster in", runDir, "- logs in", filepath.Join(runDir, "logs"))
	return nil
}

// isServe reports whether pid runs `localcluster serve --run-dir=runDir` (read from
// /proc/<pid>/cmdline, whose arguments are NUL-separated).
func isServe(pid int, runDir string) bool {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
	return slices.Contains(args, "serve") && slices.Contains(args, "--run-dir="+runDir)
}
