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

	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/hack/kind/internal/podnet"
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
	fs := flag.NewFlagSet("podnet", flag.ContinueOnError)
	klog.InitFlags(fs)
	// kubelet names its Node after the lowercased hostname, and kind names the node
	// container (and so its hostname) after the node.
	host, _ := os.Hostname()
	o := podnet.Options{WaitInterval: time.Second}
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "/etc/kubernetes/kubelet.conf", "kubeconfig to read Nodes with; waited for until it exists")
	fs.StringVar(&o.AdminKubeconfig, "admin-kubeconfig", "/etc/kubernetes/admin.conf", "kubeconfig used once, where it exists (the control plane), to create the RBAC that lets nodes read all Nodes; empty: never")
	fs.StringVar(&o.NodeName, "node-name", strings.ToLower(host), "this node's Node name")
	fs.StringVar(&o.CNIConfDir, "cni-conf-dir", "/etc/cni/net.d", "directory to write "+podnet.ConflistName+" in")
	fs.DurationVar(&o.Resync, "resync", 30*time.Second, "how often to check the routes and the conflist without a Node event")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := o.Validate(); err != nil {
		return fmt.Errorf("invalid flags: %w", err)
	}
	return podnet.Run(ctx, o)
}
