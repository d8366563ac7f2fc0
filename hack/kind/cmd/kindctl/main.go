// Command kindctl is the kind tooling of fakecloud-csi that needs neither a Docker daemon nor
// kubectl (hack/images.sh, hack/kind-up.sh, hack/e2e-kind.sh and `make deploy-dry-run` call
// it):
//
//	kindctl image --binary=B --ref=R --out=F --version=V --commit=C [--arch=A] [--source=URL]
//	    [--dir=D] [--base-layer=T] [--env=K=V]... [--cmd=ARG]... [--title=T] [--format=oci|docker]
//	kindctl image --base-layer=T --cmd=ARG... --ref=R --out=F --version=V --commit=C  (no binary)
//	kindctl kind-config --node-image=REF [--etcd-tag=T] --in=F --out=F
//	kindctl render DIR
//	kindctl apply [--kubeconfig=K] [--dry-run [--real-prerequisites]] DIR...
//	kindctl wait [--kubeconfig=K] [--timeout=D] DIR...
//	kindctl snapshotter --deploy=DIR --out=DIR
//	kindctl get [--token=T] [--out=F] [--timeout=D] URL
//	kindctl check [--kubeconfig=K] --cloud-url=URL --cloud-token-file=F [--node=N] [--namespace=NS]
//	    [--name=N] [--storage-class=SC] [--pod-image=I] [--timeout=D]
//	kindctl help (or -h, --help; no arguments print it too and fail)
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kindctl:", err)
		os.Exit(1)
	}
}
