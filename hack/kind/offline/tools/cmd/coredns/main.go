// Command coredns is CoreDNS v1.14.6 (the release kubeadm v1.37.2 deploys) with only the plugins
// that kubeadm's default Corefile uses: errors, health, ready, kubernetes, prometheus (the
// "prometheus" directive is the metrics plugin), forward, cache, loop, reload, loadbalance and
// log. The upstream binary links every plugin, and with them every cloud SDK, which takes about
// ten minutes to build on two cores; this one needs only the Kubernetes client.
//
// Plugins register their directive with caddy from their package's init(); the blank imports
// below are that registration. A Corefile naming any other plugin fails at start with
// "unknown directive".
package main

import (
	"github.com/coredns/coredns/coremain"

	// The server types and the plugins the kubeadm Corefile names, in its order.
	_ "github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() {
	coremain.Run()
}
