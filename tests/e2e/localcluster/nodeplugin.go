package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/registration"
)

// driverVersionVar is the linker symbol of the driver's version, which
// GetPluginInfo returns as vendor_version.
const driverVersionVar = "github.com/fakecloud/fakecloud-csi/pkg/version.Version"

// pluginReadyTimeout bounds how long a restarted node plugin may take to
// serve its socket and turn ready.
const pluginReadyTimeout = time.Minute

// nodePlugin is one node's driver process and the kubelet registration
// socket the harness serves for it in place of node-driver-registrar.
type nodePlugin struct {
	// component is the supervisor's name of the process, driver-node-<node>.
	component string
	// socket is the CSI endpoint (unix socket path), url the HTTP base URL.
	socket, url string
	// regSocket is the registration socket in the kubelet's plugins_registry.
	regSocket string
	reg       *registration.Server
	// stopReg removes the registration socket; nil while it is not served.
	stopReg func()
}

// DriverBinary is the driver built from the clone for this run; every
// driver process runs it unless RestartNodePlugin swapped it.
func (c *Cluster) DriverBinary() string { return c.driverBinary }

// BuildDriver builds cmd/driver of the clone with pkg/version.Version set to
// version (what GetPluginInfo reports) into <run>/bin/driver-<version> and
// returns its path. The Go build cache makes it a link of a few seconds
// after the first build. version must be usable in a file name.
func (c *Cluster) BuildDriver(ctx context.Context, version string) (string, error) {
	if version == "" || strings.ContainsAny(version, "/ \t\n") {
		return "", fmt.Errorf("driver version %q: want a non-empty word without slashes or spaces", version)
	}
	dst := filepath.Join(filepath.Dir(c.driverBinary), "driver-"+version)
	if err := goBuild(ctx, c.opts.RepoRoot, dst, "./cmd/driver", "-X "+driverVersionVar+"="+version); err != nil {
		return "", err
	}
	return dst, nil
}

// NodePluginBinary is the binary node's plugin runs now; it errors for a
// node the cluster does not have.
func (c *Cluster) NodePluginBinary(node string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	np, ok := c.plugins[node]
	if !ok {
		return "", fmt.Errorf("no node plugin on node %q", node)
	}
	p, err := c.sup.find(np.component)
	if err != nil {
		return "", err
	}
	return p.binary(), nil
}

// NodePluginRestart says how RestartNodePlugin replaces a node plugin.
type NodePluginRestart struct {
	// Binary is the driver binary to start (BuildDriver, DriverBinary);
	// empty keeps the one running now.
	Binary string
	// Reregister removes the kubelet registration socket before the stop
	// and serves it again once the new plugin is ready, as the
	// node-driver-registrar of a replaced DaemonSet pod does: the kubelet
	// deregisters the plugin (its CSINode entry goes) and registers it
	// again. False keeps the socket, as when only the driver container of
	// the pod restarts, and the kubelet keeps the plugin registered.
	Reregister bool
}

// RestartNodePlugin stops node's plugin (SIGTERM, SIGKILL after 10 s, as a
// kubelet stops a container), starts it again with r.Binary, and returns
// once the new process serves its CSI socket and /readyz answers 200 and
// the registration socket is served. A registration socket left unserved by
// an earlier failed call is served again even without r.Reregister, so a
// cleanup call always leaves the node registered. Restarts are serialised.
func (c *Cluster) RestartNodePlugin(ctx context.Context, node string, r NodePluginRestart) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	np, ok := c.plugins[node]
	if !ok {
		return fmt.Errorf("restart node plugin: no node plugin on node %q", node)
	}
	if r.Binary != "" {
		if st, err := os.Stat(r.Binary); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return fmt.Errorf("restart node plugin of %s: binary %q is not an executable file (%v)", node, r.Binary, err) //nolint:errorlint // err is nil when it is a directory or not executable
		}
	}
	p, err := c.sup.find(np.component)
	if err != nil {
		return fmt.Errorf("restart node plugin of %s: %w", node, err)
	}
	if r.Reregister && np.stopReg != nil {
		np.stopReg()
		np.stopReg = nil
	}
	p.stop()
	if err := p.resume(c.runCtx, r.Binary); err != nil {
		return fmt.Errorf("restart node plugin of %s: %w", node, err)
	}
	if err := waitFile(ctx, np.socket, pluginReadyTimeout); err != nil {
		return fmt.Errorf("restarted node plugin of %s: socket: %w (log %s)", node, err, p.logPath)
	}
	// The old process has exited, so whatever answers here is the new one.
	if err := waitHTTP(ctx, np.url+"/readyz", nil, pluginReadyTimeout); err != nil {
		return fmt.Errorf("restarted node plugin of %s not ready: %w (log %s)", node, err, p.logPath)
	}
	if np.stopReg == nil {
		if np.stopReg, err = registration.Serve(c.runCtx, np.regSocket, np.reg); err != nil {
			return fmt.Errorf("restarted node plugin of %s: registration: %w", node, err)
		}
	}
	return nil
}
