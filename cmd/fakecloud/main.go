// Command fakecloud serves the fake cloud's HTTP API (docs/fakecloud-api.md) over a durable bbolt
// store: instances with attach limits, quotas, volumes, snapshots and fault rules.
//
//	fakecloud --listen=127.0.0.1:8080 --data-dir=/var/lib/fakecloud --seed=examples/seed.yaml \
//	  --auth=tokens --tokens-file=examples/tokens.yaml --auto-register
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
		fmt.Fprintln(os.Stderr, "fakecloud:", err)
		os.Exit(1)
	}
}
