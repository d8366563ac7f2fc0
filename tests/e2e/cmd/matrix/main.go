// Command matrix runs the KEP-4876 compatibility matrix (package matrix,
// docs/compatibility.md) on the local cluster: for each cell it builds the versions the cell
// needs (cached by version), starts the cluster with them, runs the checks, appends the row
// to the results file and writes the docs table from it.
//
//	go run ./cmd/matrix run [--only=cell,cell]   # make e2e-matrix MATRIX_CELLS=...
//	go run ./cmd/matrix doc                      # the table again from the results file
//	go run ./cmd/matrix which --kubeconfig=K     # which cell each node of a cluster is in, and its result
//	go run ./cmd/matrix upgrade [--keep-plugins] # the upgrade walk: kubelets 1.35 → 1.36 → 1.37, node by node
//
// Ctrl-C stops the cell under way; its row is written with what was measured.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

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

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "run" && args[0] != "doc" && args[0] != "which" && args[0] != "upgrade") {
		return errors.New("usage: matrix run|doc|which|upgrade [flags]")
	}
	fs := flag.NewFlagSet("matrix "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	cellsPath := fs.String("cells", "matrix/cells.json", "cells file")
	resultsPath := fs.String("results", "matrix/results.json", "results file (one row per cell run is appended)")
	docPath := fs.String("doc", "", "doc whose generated table is rewritten (default: <clone>/docs/compatibility.md)")
	only := fs.String("only", "", "run: only these cells, comma separated (default: all)")
	keepPlugins := fs.Bool("keep-plugins", false, "upgrade: leave the node plugins running through the kubelets' upgrades (default: replace each node's plugin pod after its kubelet, as docs/upgrade.md's canary does)")
	upgradesPath := fs.String("upgrades", "matrix/upgrade.json", "results file of the upgrade walk (one entry per walk is appended)")
	kubeconfig := fs.String("kubeconfig", "", "which: the cluster's kubeconfig")
	namespace := fs.String("namespace", "fakecloud-csi", "which: the namespace of the driver's controller Deployment (its csi-attacher image)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	root, err := localcluster.FindRepoRoot(wd)
	if err != nil {
		return err
	}
	if *docPath == "" {
		*docPath = filepath.Join(root, "docs", "compatibility.md")
	}
	cells, err := matrix.ReadCells(*cellsPath)
	if err != nil {
		return err
	}
	if args[0] == "which" {
		return which(ctx, *kubeconfig, *namespace, cells, *resultsPath, stdout)
	}
	if args[0] == "doc" {
		if err := writeDoc(*resultsPath, *docPath, cells); err != nil {
			return err
		}
		return writeUpgradeDoc(*upgradesPath, *docPath)
	}
	sel, err := matrix.Select(cells, strings.FieldsFunc(*only, func(r rune) bool { return r == ',' }))
	if err != nil {
		return err
	}
	binDir, err := localcluster.DefaultCacheDir()
	if err != nil {
		return err
	}
	o := matrix.Options{RepoRoot: root, BinDir: binDir, Commit: describe(root), Out: stdout}
	toolsDir := filepath.Join(root, "tests", "e2e", "localcluster", "tools")
	if err := localcluster.Build(ctx, localcluster.BuildOptions{ToolsDir: toolsDir, BinDir: binDir, Out: stdout}); err != nil {
		return err
	}
	if args[0] == "upgrade" {
		w := matrix.DefaultWalk()
		w.ReplacePlugins = !*keepPlugins
		return upgrade(ctx, o, w, toolsDir, *upgradesPath, *docPath, stdout)
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
		if err := matrix.AppendResult(*resultsPath, row); err != nil {
			return err
		}
		// The table after each cell: a long run that is stopped keeps what it measured.
		if err := writeDoc(*resultsPath, *docPath, cells); err != nil {
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
		return fmt.Errorf("cells not as expected: %s (see %s)", strings.Join(failed, ", "), *resultsPath)
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
	if kubeconfig == "" {
		return errors.New("which: --kubeconfig is required")
	}
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
