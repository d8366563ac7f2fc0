// Command matrix runs the KEP-4876 compatibility matrix (package matrix,
// docs/compatibility.md) on the local cluster: for each cell it builds the versions the cell
// needs (cached by version), starts the cluster with them, runs the checks, appends the row
// to the results file and writes the docs table from it.
//
//	go run ./cmd/matrix run [--only=cell,cell]   # make e2e-matrix MATRIX_CELLS=...
//	go run ./cmd/matrix doc                      # the table again from the results file
//	go run ./cmd/matrix which --kubeconfig=K     # which cell each node of a cluster is in, and its result
//	go run ./cmd/matrix upgrade [--keep-plugins] # the upgrade walk: kubelets 1.35 → 1.36 → 1.37, node by node
//	go run ./cmd/matrix check --kubeconfig=K --cloud-url=U --cloud-token-file=T [--node=N] [--cluster=kind]
//	                                             # the cell checks on a cluster where the driver runs (make e2e-matrix-kind)
//
// Ctrl-C stops the cell under way; its row is written with what was measured.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fakecloud/fakecloud-csi/internal/cli"
	"github.com/fakecloud/fakecloud-csi/tests/e2e/localcluster"
	"github.com/fakecloud/fakecloud-csi/tests/e2e/matrix"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "matrix:", err)
		os.Exit(1)
	}
}

// options are the command's flags; the first four are every subcommand's.
type options struct {
	// Cells is the cells file; Results the results file (a row per cell run is appended);
	// Doc the doc whose generated tables are rewritten ("": <clone>/docs/compatibility.md);
	// Upgrades the upgrade walk's results file (an entry per walk is appended).
	Cells, Results, Doc, Upgrades string
	// Only (run) names the cells to run, comma separated; "": all.
	Only string
	// KeepPlugins (upgrade) leaves the node plugins running through the kubelets' upgrades.
	KeepPlugins bool
	// Kubeconfig (which, check: required) is the cluster's kubeconfig; Namespace that of the
	// driver's controller Deployment (and, for check, its node plugin DaemonSet).
	Kubeconfig, Namespace string
}

// AddFlags adds the flags every subcommand takes to fs.
func (o *options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Cells, "cells", "matrix/cells.json", "cells file")
	fs.StringVar(&o.Results, "results", "matrix/results.json", "results file (one row per cell run is appended)")
	fs.StringVar(&o.Doc, "doc", "", "doc whose generated table is rewritten (default: <clone>/docs/compatibility.md)")
	fs.StringVar(&o.Upgrades, "upgrades", "matrix/upgrade.json", "results file of the upgrade walk (one entry per walk is appended)")
}

// Validate reports every problem of o for subcommand verb at once.
func (o *options) Validate(verb string) error {
	var errs []error
	for name, v := range map[string]string{"--cells": o.Cells, "--results": o.Results, "--upgrades": o.Upgrades} {
		if v == "" {
			errs = append(errs, fmt.Errorf("%s must not be empty", name))
		}
	}
	if (verb == "which" || verb == "check") && o.Kubeconfig == "" {
		errs = append(errs, errors.New(verb+": --kubeconfig is required"))
	}
	return errors.Join(errs...)
}

// run parses args and runs the subcommand they name (see the package comment) until ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	root := newCommand(&o, stdout, stderr)
	return cli.Execute(ctx, root, args)
}

// newCommand is the command tree, its flags parsed into o.
func newCommand(o *options, stdout, stderr io.Writer) *cobra.Command {
	root := cli.NewRoot(&cobra.Command{
		Use:   "matrix",
		Short: "Run the KEP-4876 compatibility matrix (docs/compatibility.md) on the local cluster",
		Args:  cobra.NoArgs,
		RunE:  cli.NeedSubcommand(stderr, "usage: matrix run|doc|which|upgrade|check [flags]"),
	}, stdout, stderr)
	o.AddFlags(root.PersistentFlags())
	sub := func(use, short string, do func(ctx context.Context, e env) error) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				if err := o.Validate(cmd.Name()); err != nil {
					return err
				}
				e, err := o.env()
				if err != nil {
					return err
				}
				return do(cmd.Context(), e)
			}}
	}
	runCmd := sub("run", "run the cells (make e2e-matrix MATRIX_CELLS=...): build, start, check, append the row, write the table", func(ctx context.Context, e env) error {
		return runCells(ctx, *o, e, stdout)
	})
	runCmd.Flags().StringVar(&o.Only, "only", "", "run: only these cells, comma separated (default: all)")
	docCmd := sub("doc", "write the docs' tables again from the results files", func(_ context.Context, e env) error {
		if err := writeDoc(o.Results, e.doc, e.cells); err != nil {
			return err
		}
		return writeUpgradeDoc(o.Upgrades, e.doc)
	})
	whichCmd := sub("which", "which cell each node of a cluster is in, and its result", func(ctx context.Context, e env) error {
		return which(ctx, o.Kubeconfig, o.Namespace, e.cells, o.Results, stdout)
	})
	whichCmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", "", "which: the cluster's kubeconfig")
	whichCmd.Flags().StringVar(&o.Namespace, "namespace", "fakecloud-csi", "which: the namespace of the driver's controller Deployment (its csi-attacher image)")
	upgradeCmd := sub("upgrade", "the upgrade walk: kubelets 1.35 → 1.36 → 1.37, node by node", func(ctx context.Context, e env) error {
		o2, toolsDir, err := buildBase(ctx, e, stdout)
		if err != nil {
			return err
		}
		w := matrix.DefaultWalk()
		w.ReplacePlugins = !o.KeepPlugins
		return upgrade(ctx, o2, w, toolsDir, o.Upgrades, e.doc, stdout)
	})
	upgradeCmd.Flags().BoolVar(&o.KeepPlugins, "keep-plugins", false, "upgrade: leave the node plugins running through the kubelets' upgrades (default: replace each node's plugin pod after its kubelet, as docs/upgrade.md's canary does)")
	var cf checkFlags
	checkCmd := sub("check", "the cell checks on a cluster where the driver runs (make e2e-matrix-kind): a node's cell and its row", func(ctx context.Context, e env) error {
		return runCheck(ctx, *o, cf, e, stdout)
	})
	checkCmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", "", "check: the cluster's kubeconfig (cluster-admin rights, see matrix.CheckOptions)")
	checkCmd.Flags().StringVar(&o.Namespace, "namespace", "fakecloud-csi", "check: the driver's namespace (its node plugin DaemonSet and controller Deployment)")
	cf.AddFlags(checkCmd.Flags())
	root.AddCommand(runCmd, docCmd, whichCmd, upgradeCmd, checkCmd)
	return root
}

// env is what every subcommand starts from: the clone's root, the doc to rewrite and the
// cells.
type env struct {
	root, doc string
	cells     []matrix.Cell
}

// env finds the clone (from the working directory) and reads the cells file.
func (o *options) env() (env, error) {
	wd, err := os.Getwd()
	if err != nil {
		return env{}, err
	}
	root, err := localcluster.FindRepoRoot(wd)
	if err != nil {
		return env{}, err
	}
	e := env{root: root, doc: o.Doc}
	if e.doc == "" {
		e.doc = filepath.Join(root, "docs", "compatibility.md")
	}
	e.cells, err = matrix.ReadCells(o.Cells)
	return e, err
}

// buildBase builds what every cell and the upgrade walk need (localcluster.Build) and returns
// the options of a run and the tools folder.
func buildBase(ctx context.Context, e env, stdout io.Writer) (matrix.Options, string, error) {
	binDir, err := localcluster.DefaultCacheDir()
	if err != nil {
		return matrix.Options{}, "", err
	}
	o := matrix.Options{RepoRoot: e.root, BinDir: binDir, Commit: describe(e.root), Out: stdout}
	toolsDir := filepath.Join(e.root, "tests", "e2e", "localcluster", "tools")
	err = localcluster.Build(ctx, localcluster.BuildOptions{ToolsDir: toolsDir, BinDir: binDir, Out: stdout})
	return o, toolsDir, err
}

// runCells runs the selected cells one after the other, appending each row and writing the
// table after each; it fails naming the cells not as expected.
func runCells(ctx context.Context, opts options, e env, stdout io.Writer) error {
	sel, err := matrix.Select(e.cells, strings.FieldsFunc(opts.Only, func(r rune) bool { return r == ',' }))
	if err != nil {
		return err
	}
	o, toolsDir, err := buildBase(ctx, e, stdout)
	if err != nil {
		return err
	}
	var failed []string
	for _, c := range sel {
		for _, b := range matrix.Builds(c) {
			b.ToolsDir, b.Out = toolsDir, stdout
			if _, err := localcluster.BuildVersion(ctx, b); err != nil {
				return fmt.Errorf("cell %s: build %s: %w", c.Name, b.Version, err)
			}
		}
		row := matrix.RunCell(ctx, o, c)
		fmt.Fprintf(stdout, "matrix %s: %s (%.0f s)\n", c.Name, row.Outcome, row.TotalSeconds)
		if err := matrix.AppendResult(opts.Results, row); err != nil {
			return err
		}
		// The table after each cell: a long run that is stopped keeps what it measured.
		if err := writeDoc(opts.Results, e.doc, e.cells); err != nil {
			return err
		}
		if row.Outcome != "as expected" {
			failed = append(failed, c.Name)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("cells not as expected: %s (see %s)", strings.Join(failed, ", "), opts.Results)
	}
	return ctx.Err()
}

// writeDoc writes the doc's table from the results file.
func writeDoc(resultsPath, docPath string, cells []matrix.Cell) error {
	rows, err := matrix.ReadResults(resultsPath)
	if err != nil {
		return err
	}
	return matrix.WriteDoc(docPath, cells, rows)
}

// upgrade runs the upgrade walk w, appends its result to upgradesPath and
// writes the doc's upgrade table from that file.
func upgrade(ctx context.Context, o matrix.Options, w matrix.Walk, toolsDir, upgradesPath, docPath string, stdout io.Writer) error {
	if err := w.Validate(); err != nil {
		return err
	}
	for _, b := range w.Builds() {
		b.ToolsDir, b.Out = toolsDir, stdout
		if _, err := localcluster.BuildVersion(ctx, b); err != nil {
			return fmt.Errorf("upgrade walk: build %s: %w", b.Version, err)
		}
	}
	u := matrix.RunUpgrade(ctx, o, w)
	fmt.Fprintf(stdout, "matrix upgrade: %s (%.0f s)\n", u.Outcome, u.TotalSeconds)
	if err := matrix.AppendUpgrade(upgradesPath, u); err != nil {
		return err
	}
	if err := writeUpgradeDoc(upgradesPath, docPath); err != nil {
		return err
	}
	if u.Outcome != "as expected" {
		return fmt.Errorf("upgrade walk not as expected (see %s)", upgradesPath)
	}
	return ctx.Err()
}

// writeUpgradeDoc writes the doc's upgrade table from the upgrade results file.
func writeUpgradeDoc(upgradesPath, docPath string) error {
	us, err := matrix.ReadUpgrades(upgradesPath)
	if err != nil {
		return err
	}
	return matrix.WriteUpgradeDoc(docPath, us)
}

// describe is the clone's `git describe --always --dirty`, "unknown" without git.
func describe(root string) string {
	out, err := exec.Command("git", "-C", root, "describe", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// which prints which cell of the matrix each node of the cluster at kubeconfig is in, and the
// cell's latest result.
func which(ctx context.Context, kubeconfig, namespace string, cells []matrix.Cell, resultsPath string, out io.Writer) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	o, err := matrix.Observe(ctx, cs, localcluster.DriverName, namespace)
	if err != nil {
		return err
	}
	rows, err := matrix.ReadResults(resultsPath)
	if err != nil {
		return err
	}
	latest := map[string]matrix.Row{}
	for _, r := range rows {
		if old, ok := latest[r.Cell.Name]; !ok || r.Date.After(old.Date) {
			latest[r.Cell.Name] = r
		}
	}
	period := "unset"
	if o.PeriodSeconds != nil {
		period = fmt.Sprintf("%d s", *o.PeriodSeconds)
	}
	attacher := o.Attacher
	if attacher == "" {
		attacher = "not found in namespace " + namespace
	}
	fmt.Fprintf(out, "API server %s, CSIDriver period %s, external-attacher %s\n", o.ServerVersion, period, attacher)
	found := matrix.Which(o, cells)
	names := make([]string, 0, len(found))
	for n := range found {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		k := o.Kubelets[n]
		fmt.Fprintf(out, "node %s: kubelet %s, labelled %s=true: %v\n", n, k.Version, matrix.ModeLabel, k.Labelled)
		if len(found[n]) == 0 {
			fmt.Fprintln(out, "  no cell of the matrix (tests/e2e/matrix/cells.json) has these versions: not measured")
		}
		for _, c := range found[n] {
			r, ok := latest[c]
			if !ok {
				fmt.Fprintf(out, "  cell %s: planned, not run\n", c)
				continue
			}
			fmt.Fprintf(out, "  cell %s: %s (%s, %s)\n", c, r.Outcome, r.Date.Format("2006-01-02"), r.Commit)
		}
	}
	return nil
}
