// Command driver is the fakecloud-csi CSI driver (disk.fakecloud.dev): the controller and/or
// node plugin, the `nodeinfo` and `probe` subcommands that query a running plugin, and
// `registrar`, the kubelet plugin registration of a node plugin in its pod.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	// The one process-wide logging call: with --log_file klog buffers, and os.Exit skips
	// deferred calls.
	klog.Flush()
	if err != nil {
		fmt.Fprintln(os.Stderr, "driver:", err)
		os.Exit(1)
	}
}
