package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/internal/stack"
	csidriver "github.com/fakecloud/fakecloud-csi/pkg/csi"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/registration"
)

// Grow starts the next nodes of Options.Nodes until n run (the first Options.StartNodes
// started with the cluster), StartBatch at a time as Start does, and returns once every new
// node is Ready and its CSINode lists the driver with a count. Their fake cloud instances
// exist since Start: a cloud's instances boot before their kubelets join. It errors when n
// is not above the nodes running now or beyond Options.Nodes, and when the inotify
// instances left would not hold the new kubelets. Not safe to call concurrently with
// itself or with readers of Info; the cluster keeps its nodes when a node fails to start,
// as Start does not (Stop ends it all).
func (c *Cluster) Grow(ctx context.Context, n int) error {
	have := len(c.Nodes)
	if n <= have || n > len(c.opts.Nodes) {
		return fmt.Errorf("grow to %d nodes: want more than the %d running and at most the %d of Options.Nodes", n, have, len(c.opts.Nodes))
	}
	if err := inotifyRoom(c.opts.Out, n-have); err != nil {
		return err
	}
	start := time.Now()
	step := func(format string, args ...any) {
		fmt.Fprintf(c.opts.Out, "[%6.1fs] grow %d→%d: %s\n", time.Since(start).Seconds(), have, n, fmt.Sprintf(format, args...))
	}
	if err := c.startNodes(ctx, c.opts.Nodes[have:n], step); err != nil {
		return fmt.Errorf("grow to %d nodes: %w (logs in %s)", n, err, c.LogDir)
	}
	return c.writeInfo()
}

// startNodes starts nodes (the next ones of Options.Nodes: their ports are by their index
// there), each a hollow kubelet, its node plugin and its registration socket, and waits
// until every one is Ready with a CSINode count. Each started node joins c.Nodes.
//
// The kubelets of a batch go first, as a DaemonSet's pods start on registered nodes; the
// node plugins' cluster check reads the Node objects. With StartBatch, StartBatch nodes at a
// time, each batch once the previous one's Nodes are registered: a hundred kubelets starting
// at once on two cores starve the API server (TLS handshakes time out) and register a few
// nodes in minutes. A batch's registration sockets are served while the next batch starts,
// so that the kubelets write their CSINodes batch by batch instead of all at the end.
func (c *Cluster) startNodes(ctx context.Context, nodes []Node, step func(string, ...any)) error {
	first, nn := len(c.Nodes), len(nodes)
	batch := c.opts.StartBatch
	if batch <= 0 {
		batch = nn
	}
	for _, n := range nodes {
		if err := c.pki.kubeconfig(c.kubeconfig(n.Name), "node-"+n.Name, c.server, "system:node:"+n.Name, "system:nodes"); err != nil {
			return err
		}
	}
	// Many nodes take longer together than one does alone, so the waits grow with the
	// node count (2 s per node plugin and hollow kubelet pair, 3 s per node to be Ready,
	// from runs on 2 cores).
	pluginsDeadline := time.Now().Add(max(pluginReadyTimeout, time.Duration(nn)*2*time.Second))
	nps := make([]*nodePlugin, nn)
	regCtx, cancelReg := context.WithCancel(ctx)
	reg := newRegistrar(func(i int) error { return c.registerPlugin(regCtx, nodes[i].Name, nps[i], pluginsDeadline) })
	defer func() { reg.abort(); cancelReg() }()
	for lo := 0; lo < nn; lo += batch {
		hi := min(lo+batch, nn)
		if err := c.startBatch(nodes[lo:hi], first+lo, nps[lo:hi]); err != nil {
			return err
		}
		if hi < nn {
			if err := waitRegistered(ctx, c.admin, nodes[lo:hi], max(2*time.Minute, time.Duration(batch)*5*time.Second)); err != nil {
				return err
			}
			step("nodes %d-%d of %d registered", first+lo+1, first+hi, first+nn)
		}
		if err := reg.add(lo, hi); err != nil {
			return err
		}
	}
	if err := reg.wait(); err != nil {
		return err
	}
	c.mu.Lock()
	for i, n := range nodes {
		c.plugins[n.Name] = nps[i]
		c.PluginURLs[n.Name], c.PluginSockets[n.Name] = nps[i].url, nps[i].socket
	}
	c.mu.Unlock()
	step("%d hollow kubelets and node plugins started", nn)

	if err := waitNodes(ctx, c.admin, nodes, max(3*time.Minute, time.Duration(nn)*3*time.Second)); err != nil {
		return err
	}
	c.Nodes = append(c.Nodes, nodes...)
	step("all %d nodes Ready, CSINode lists %s on every node", len(c.Nodes), DriverName)
	return nil
}

// startBatch starts the hollow kubelets of nodes, then their node plugins, and fills nps
// (one per node). first is the index in Options.Nodes of nodes[0], which picks the ports.
func (c *Cluster) startBatch(nodes []Node, first int, nps []*nodePlugin) error {
	for i, n := range nodes {
		np, err := c.newNodePlugin(n, first+i)
		if err != nil {
			return err
		}
		nps[i] = np
		if err := c.startKubelet(n, first+i); err != nil {
			return err
		}
	}
	for i, n := range nodes {
		if _, err := c.sup.start(c.runCtx, procSpec{Name: nps[i].component, Path: c.driverBinary,
			Args: c.nodePluginFlags(n, first+i).Args(), Restart: true, Node: true}); err != nil {
			return err
		}
	}
	return nil
}

// nodeDir is node's folder: its kubelet's root, its plugin's socket and state.
func (c *Cluster) nodeDir(node string) string { return filepath.Join(c.opts.RunDir, "n", node) }

// newNodePlugin makes the folders of node n (index k of Options.Nodes) and describes its
// plugin; it starts nothing.
func (c *Cluster) newNodePlugin(n Node, k int) (*nodePlugin, error) {
	nodeDir := c.nodeDir(n.Name)
	root := filepath.Join(nodeDir, "kubelet")
	sock := filepath.Join(nodeDir, "csi", "csi.sock")
	for _, d := range []string{filepath.Join(root, "plugins_registry"), filepath.Dir(sock), filepath.Join(nodeDir, "state")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	return &nodePlugin{
		component: "driver-node-" + n.Name,
		socket:    sock,
		url:       fmt.Sprintf("http://127.0.0.1:%d", c.ports.pluginHTTP[k]),
		regSocket: registration.SocketPath(filepath.Join(root, "plugins_registry"), DriverName),
		reg:       registration.NewServer(DriverName, sock, klog.Background().WithValues("node", n.Name)),
	}, nil
}

// startKubelet starts node n's hollow kubelet (index k of Options.Nodes).
func (c *Cluster) startKubelet(n Node, k int) error {
	o := c.opts
	args := []string{
		"--kubeconfig=" + c.kubeconfig(n.Name), "--name=" + n.Name, "--root-dir=" + filepath.Join(c.nodeDir(n.Name), "kubelet"),
		"--port=" + strconv.Itoa(c.ports.kubelet[k]), "--healthz-port=" + strconv.Itoa(c.ports.healthz[k]),
		"--node-labels=" + ZoneLabel + "=" + n.Zone + ",fakecloud.dev/e2e=true" + o.nodeLabels(),
		c.verbosity(),
	}
	if g := o.Versions.KubeletFeatureGates; g != "" {
		args = append(args, "--feature-gates="+g)
	}
	_, err := c.sup.start(c.runCtx, procSpec{Name: "kubelet-" + n.Name, Path: binIn(o.Versions.KubeletBinDir, o.BinDir, "hollow-kubelet"),
		Args: args, Restart: true, Node: true})
	return err
}

// nodePluginFlags are node n's plugin (index k of Options.Nodes): its staging and target
// paths lie in the hollow kubelet's --root-dir; the cluster check runs under the node
// ServiceAccount's kubeconfig.
func (c *Cluster) nodePluginFlags(n Node, k int) stack.Plugin {
	p := c.plugin("node plugin "+n.Name, "driver-node-"+n.Name)
	nodeDir := c.nodeDir(n.Name)
	p.Mode, p.NodeID, p.Socket = csidriver.ModeNode, n.Name, filepath.Join(nodeDir, "csi", "csi.sock")
	p.StateDir, p.KubeletRoot = filepath.Join(nodeDir, "state"), filepath.Join(nodeDir, "kubelet")
	p.HTTPAddr = "127.0.0.1:" + strconv.Itoa(c.ports.pluginHTTP[k])
	p.Kubeconfig, p.NodeName = c.kubeconfig("node-plugin"), n.Name
	return p
}

// registerPlugin waits until node's plugin serves its CSI socket and /healthz, then serves
// its registration socket: the plugin serves its socket after the cluster check, which
// waits for the kubelet to register the Node (up to the driver's --cluster-check-timeout,
// 30 s).
func (c *Cluster) registerPlugin(ctx context.Context, node string, np *nodePlugin, deadline time.Time) error {
	if err := waitFile(ctx, np.socket, max(time.Until(deadline), time.Second)); err != nil {
		return fmt.Errorf("node plugin socket of %s: %w", node, err)
	}
	if err := waitHTTP(ctx, np.url+"/healthz", nil, 30*time.Second); err != nil {
		return fmt.Errorf("node plugin HTTP of %s: %w", node, err)
	}
	stop, err := registration.Serve(c.runCtx, np.regSocket, np.reg)
	if err != nil {
		return fmt.Errorf("registration socket of %s: %w", node, err)
	}
	c.mu.Lock()
	np.stopReg = stop
	c.mu.Unlock()
	return nil
}
