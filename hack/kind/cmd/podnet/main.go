// Command podnet is the pod network of the offline kind node image: run inside every node by
// systemd (hack/kind/offline/node/podnet.service), it writes the node's CNI conflist and the
// routes to the other nodes' pod CIDRs. See package hack/kind/internal/podnet.
//
//	podnet [--kubeconfig=/etc/kubernetes/kubelet.conf] [--admin-kubeconfig=/etc/kubernetes/admin.conf]
//	       [--node-name=$(hostname)]
//	       [--cni-conf-dir=/etc/cni/net.d] [--resync=30s] [klog flags such as -v]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/hack/kind/internal/podnet"
	"github.com/fakecloud/fakecloud-csi/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	klog.Flush()
	if err != nil {
		fmt.Fprintln(os.Stderr, "podnet:", err)
		os.Exit(1)
	}
}

// run parses args into podnet.Options and runs podnet until ctx is done.
func run(ctx context.Context, args []string) error {
	// kubelet names its Node after the lowercased hostname, and kind names the node
	// container (and so its hostname) after the node.
	host, _ := os.Hostname()
	o := podnet.Options{WaitInterval: time.Second}
	cmd := cli.NewRoot(&cobra.Command{
		Use:   "podnet",
		Short: "The pod network of the offline kind node image: the node's CNI conflist and routes to the other nodes' pod CIDRs",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unexpected arguments %q", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return fmt.Errorf("invalid flags: %w", err)
			}
			return podnet.Run(cmd.Context(), o)
		},
	}, os.Stdout, os.Stderr, cli.WithoutFlagHint())
	fs := cmd.Flags()
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "/etc/kubernetes/kubelet.conf", "kubeconfig to read Nodes with; waited for until it exists")
	fs.StringVar(&o.AdminKubeconfig, "admin-kubeconfig", "/etc/kubernetes/admin.conf", "kubeconfig used once, where it exists (the control plane), to create the RBAC that lets nodes read all Nodes; empty: never")
	fs.StringVar(&o.NodeName, "node-name", strings.ToLower(host), "this node's Node name")
	fs.StringVar(&o.CNIConfDir, "cni-conf-dir", "/etc/cni/net.d", "directory to write "+podnet.ConflistName+" in")
	fs.DurationVar(&o.Resync, "resync", 30*time.Second, "how often to check the routes and the conflist without a Node event")
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	return cli.Execute(ctx, cmd, args)
}
