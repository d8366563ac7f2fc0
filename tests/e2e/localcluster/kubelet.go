package localcluster

import (
	"context"
	"fmt"
	"os"
)

// KubeletBinary is the hollow-kubelet binary node's kubelet runs now (or ran last); it errors
// for a node the cluster does not have.
func (c *Cluster) KubeletBinary(node string) (string, error) {
	p, err := c.sup.find("kubelet-" + node)
	if err != nil {
		return "", fmt.Errorf("kubelet of node %q: %w", node, err)
	}
	return p.binary(), nil
}

// RestartKubelet stops node's hollow kubelet (SIGTERM, SIGKILL after 10 s) and starts it
// again from binary (a hollow-kubelet of another version, BinaryFor; empty keeps the one
// running now) with the same flags: the same --root-dir (pods, volume mounts,
// plugins_registry with the node plugin's registration socket, which stays served) and the
// same Node name, as an operator upgrades a kubelet in place. It returns once the new process
// runs; whether the Node reports the new version and Ready is the caller's to wait for (the
// kubelet posts its status within seconds). A binary that is not an executable file is
// refused before anything is stopped. Serialised with RestartNodePlugin.
func (c *Cluster) RestartKubelet(ctx context.Context, node, binary string) error {
	if binary != "" {
		if st, err := os.Stat(binary); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return fmt.Errorf("restart kubelet of %s: binary %q is not an executable file (%v)", node, binary, err) //nolint:errorlint // err is nil when it is a directory or not executable
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p, err := c.sup.find("kubelet-" + node)
	if err != nil {
		return fmt.Errorf("restart kubelet of %s: %w", node, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("restart kubelet of %s: %w", node, err)
	}
	p.stop()
	if err := p.resume(c.runCtx, binary); err != nil {
		return fmt.Errorf("restart kubelet of %s: %w", node, err)
	}
	return nil
}
