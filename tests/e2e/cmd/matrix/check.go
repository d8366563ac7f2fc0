package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
	"github.com/fakecloud/fakecloud-csi/tests/e2e/matrix"
)

// maxTokenBytes bounds --cloud-token-file.
const maxTokenBytes = 4096

// checkFlags are `matrix check`'s own flags (its --kubeconfig and --namespace are options').
type checkFlags struct {
	// CloudURL is the fake cloud as this machine reaches it; TokenFile holds an admin token.
	CloudURL, TokenFile string
	// Node is the node to check ("": matrix.CheckOptions picks); Cluster names the cluster in
	// the row.
	Node, Cluster string
	// PluginSelector finds the node plugin's pods; CheckNamespace is the checks' own; PodImage
	// the image of their pods.
	PluginSelector, CheckNamespace, PodImage string
	// CleanupTimeout bounds the restore after the checks.
	CleanupTimeout time.Duration
	// Record appends the row to --results and rewrites --doc's table.
	Record bool
}

// AddFlags adds c's flags to fs.
func (c *checkFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.CloudURL, "cloud-url", "", "check: the fake cloud's URL as this machine reaches it (kind: http://127.0.0.1:30080)")
	fs.StringVar(&c.TokenFile, "cloud-token-file", "", "check: file holding a fake cloud admin token (kind: demo-admin-token)")
	fs.StringVar(&c.Node, "node", "", "check: the node to check (default: the first whose CSINode count is at least 2 and that has a second node of the driver in its zone)")
	fs.StringVar(&c.Cluster, "cluster", "kubeconfig", "check: the cluster's name in the row (e.g. kind)")
	fs.StringVar(&c.PluginSelector, "plugin-selector", "app.kubernetes.io/name=fakecloud-csi-node", "check: label selector of the node plugin's pods")
	fs.StringVar(&c.CheckNamespace, "check-namespace", "fakecloud-csi-matrix-check", "check: the checks' own namespace: must not exist; created and deleted")
	fs.StringVar(&c.PodImage, "pod-image", "registry.k8s.io/pause:3.10", "check: image of the checks' pods (they only hold volumes)")
	fs.DurationVar(&c.CleanupTimeout, "cleanup-timeout", 4*time.Minute, "check: bound of the restore after the checks (also after Ctrl-C)")
	fs.BoolVar(&c.Record, "record", true, "check: append the row to --results and rewrite --doc's table")
}

// Validate reports what is missing.
func (c *checkFlags) Validate() error {
	if c.CloudURL == "" || c.TokenFile == "" {
		return errors.New("check: --cloud-url and --cloud-token-file are required")
	}
	return nil
}

// runCheck is `matrix check`: the cell checks on the cluster of o.Kubeconfig where the driver
// is deployed (matrix.RunCheck), the node's cell and the row printed and, with c.Record, the
// row appended to the results file and the docs table written from it. Errors: bad flags, a
// cluster or cloud that cannot be read, or a row that is not as expected (an error, or
// unexpected).
func runCheck(ctx context.Context, o options, c checkFlags, e env, stdout io.Writer) error {
	if err := c.Validate(); err != nil {
		return err
	}
	token, err := readToken(c.TokenFile)
	if err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("check: kubeconfig %s: %w", o.Kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	cc, err := admin.NewClient(c.CloudURL, cloud.WithToken(token), cloud.WithUserAgent("fakecloud-csi-matrix-check"))
	if err != nil {
		return err
	}
	row, err := matrix.RunCheck(ctx, matrix.CheckOptions{Clientset: cs, Cloud: cc, Cells: e.cells, Node: c.Node,
		DriverNamespace: o.Namespace, PluginSelector: c.PluginSelector, Namespace: c.CheckNamespace, PodImage: c.PodImage,
		Cluster: c.Cluster, Commit: describe(e.root), KubeletGates: matrix.ConfigzGates(cs), CleanupTimeout: c.CleanupTimeout, Out: stdout})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nnode %s of %s is in cell %s\n\n%s\n%s (%.0f s)\n", row.Node, row.Cluster, row.Cell.Name,
		matrix.Table(nil, []matrix.Row{row}), row.Outcome, row.TotalSeconds)
	if c.Record {
		if err := matrix.AppendResult(o.Results, row); err != nil {
			return err
		}
		if err := writeDoc(o.Results, e.doc, e.cells); err != nil {
			return err
		}
	}
	if strings.HasPrefix(row.Outcome, "error") || strings.HasPrefix(row.Outcome, "unexpected") {
		return fmt.Errorf("check on %s: %s", row.Node, row.Outcome)
	}
	return ctx.Err()
}

// readToken reads a token file (at most maxTokenBytes, surrounding white space dropped).
func readToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("check: cloud token: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxTokenBytes+1))
	if err != nil {
		return "", fmt.Errorf("check: cloud token %s: %w", path, err)
	}
	tok := strings.TrimSpace(string(data))
	if len(data) > maxTokenBytes || tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("check: cloud token %s: want one word of at most %d bytes", path, maxTokenBytes)
	}
	return tok, nil
}
