package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// The steps of Start before and after the stack's own (startSteps), one method each.

// buildRepoBinaries builds the fake cloud and the driver of the clone into the run's bin/.
func (c *Cluster) buildBinaries(ctx context.Context) error {
	if err := os.MkdirAll(c.binDir, 0o755); err != nil {
		return err
	}
	return buildRepoBinaries(ctx, c.opts.RepoRoot, c.binDir, c.opts.Out)
}

// writeCertificates makes the cluster's CA and a kubeconfig for each client of the control
// plane.
func (c *Cluster) writeCertificates(context.Context) error {
	pk, err := newPKI(filepath.Join(c.opts.RunDir, "pki"))
	if err != nil {
		return err
	}
	c.pki = pk
	for _, k := range []struct{ name, cn, org string }{
		{"admin", "e2e-admin", "system:masters"},
		{"controller-manager", "system:kube-controller-manager", ""},
		{"scheduler", "system:kube-scheduler", ""},
		// A client certificate for the ServiceAccount's user name: RBAC matches
		// ServiceAccount subjects by user name, so the sidecars run with exactly
		// the permissions of deploy/base/rbac-*.yaml, as in a cluster.
		{"sidecars", "system:serviceaccount:fakecloud-csi:fakecloud-csi-controller", "system:serviceaccounts"},
		// The node plugins' cluster check (API server and kubelet versions,
		// the CSIDriver's update period, a Warning Event) under the node
		// ServiceAccount's RBAC (deploy/base/rbac-node-*.yaml).
		{"node-plugin", "system:serviceaccount:fakecloud-csi:fakecloud-csi-node", "system:serviceaccounts"},
		// snapshot-controller under the RBAC of the external-snapshotter
		// release (rbac-snapshot-controller.yaml), as deploy/base/snapshot
		// runs it.
		{"snapshot-controller", "system:serviceaccount:" + SnapshotControllerNamespace + ":snapshot-controller", "system:serviceaccounts"},
	} {
		var orgs []string
		if k.org != "" {
			orgs = []string{k.org}
		}
		if err := pk.kubeconfig(c.kubeconfig(k.name), k.name, c.server, k.cn, orgs...); err != nil {
			return err
		}
	}
	return nil
}

// bin is the path of component name in BinDir; cp of a control plane component in the
// Versions' folder.
func (c *Cluster) bin(name string) string { return filepath.Join(c.opts.BinDir, name) }
func (c *Cluster) cp(name string) string {
	return binIn(c.opts.Versions.ControlPlaneBinDir, c.opts.BinDir, name)
}

// verbosity is the --v flag of every component.
func (c *Cluster) verbosity() string { return "--v=" + strconv.Itoa(c.opts.Verbosity) }

func (c *Cluster) etcdURL() string { return fmt.Sprintf("http://127.0.0.1:%d", c.ports.etcdClient) }

func (c *Cluster) startEtcd(ctx context.Context) error {
	etcdURL := c.etcdURL()
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", c.ports.etcdPeer)
	_, err := c.sup.start(c.runCtx, procSpec{Name: "etcd", Path: c.bin("etcd"), Args: []string{
		"--name=e2e", "--data-dir=" + filepath.Join(c.opts.RunDir, "etcd"),
		"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=e2e=" + peerURL,
		// A throwaway cluster: durability costs seconds on a shared disk.
		"--unsafe-no-fsync=true", "--log-level=warn",
	}})
	return err
}

func (c *Cluster) etcdReady(ctx context.Context) error {
	if err := waitHTTP(ctx, c.etcdURL()+"/health", nil, time.Minute); err != nil {
		return fmt.Errorf("etcd not healthy: %w", err)
	}
	c.say("etcd healthy on %s", c.etcdURL())
	return nil
}

func (c *Cluster) startAPIServer(context.Context) error {
	pk := c.pki
	args := []string{
		"--etcd-servers=" + c.etcdURL(),
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.ports.apiserver),
		// It refuses a loopback advertise address with the lease reconciler.
		"--endpoint-reconciler-type=none",
		"--tls-cert-file=" + pk.ServingCert, "--tls-private-key-file=" + pk.ServingKey,
		"--client-ca-file=" + pk.CAFile,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + pk.SAPubFile,
		"--service-account-signing-key-file=" + pk.SAKeyFile,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--profiling=false",
		c.verbosity(),
	}
	if g := c.opts.Versions.APIServerFeatureGates; g != "" {
		args = append(args, "--feature-gates="+g)
	}
	_, err := c.sup.start(c.runCtx, procSpec{Name: "kube-apiserver", Path: c.cp("kube-apiserver"), Args: args})
	return err
}

func (c *Cluster) apiServerReady(ctx context.Context) error {
	admin, err := clientFor(c.Kubeconfig)
	if err != nil {
		return err
	}
	c.admin = admin
	if err := waitAPIServer(ctx, admin, 2*time.Minute); err != nil {
		return fmt.Errorf("kube-apiserver not ready: %w", err)
	}
	c.say("kube-apiserver ready on %s", c.server)
	return nil
}

func (c *Cluster) startControllerManagers(context.Context) error {
	if _, err := c.sup.start(c.runCtx, procSpec{Name: "kube-controller-manager", Path: c.cp("kube-controller-manager"), Args: []string{
		"--kubeconfig=" + c.kubeconfig("controller-manager"),
		"--controllers=*", "--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + c.pki.SAKeyFile,
		"--root-ca-file=" + c.pki.CAFile,
		"--secure-port=0",
		c.verbosity(),
	}, Restart: true}); err != nil {
		return err
	}
	if _, err := c.sup.start(c.runCtx, procSpec{Name: "kube-scheduler", Path: c.cp("kube-scheduler"), Args: []string{
		"--kubeconfig=" + c.kubeconfig("scheduler"), "--leader-elect=false", "--secure-port=0", c.verbosity(),
	}, Restart: true}); err != nil {
		return err
	}
	c.say("kube-controller-manager and kube-scheduler started")
	return nil
}

func (c *Cluster) applyDeployBase(ctx context.Context) error {
	if err := applyDeploy(ctx, c.admin, filepath.Join(c.opts.RepoRoot, "deploy", "base"), c.opts.Versions.CSIDriverPeriodSeconds); err != nil {
		return err
	}
	c.say("applied deploy/base (namespace, RBAC, CSIDriver, StorageClass)")
	return nil
}

func (c *Cluster) applySnapshotSupport(ctx context.Context) error {
	release, err := findSnapshotRelease(ctx, filepath.Join(c.opts.RepoRoot, "tests", "e2e", "localcluster", "tools"))
	if err != nil {
		return err
	}
	dyn, err := dynamicFor(c.Kubeconfig)
	if err != nil {
		return err
	}
	if err := applySnapshotSupport(ctx, c.admin, dyn, release, filepath.Join(c.opts.RepoRoot, "deploy", "base")); err != nil {
		return err
	}
	c.say("applied the snapshot CRDs, snapshot-controller RBAC and VolumeSnapshotClass")
	return nil
}

// writeCloudFiles writes the fake cloud's seed and tokens and makes the controller plugin's
// state folder.
func (c *Cluster) writeCloudFiles(context.Context) error {
	if err := writeCloudFiles(c.opts, c.AdminToken, c.driverToken, c.AdminTokenFile, c.driverTokenFile); err != nil {
		return err
	}
	return os.MkdirAll(filepath.Join(c.opts.RunDir, "ctrl", "state"), 0o755)
}

// startSidecars starts the controller plugin's sidecars and snapshot-controller.
func (c *Cluster) startSidecars(context.Context) error {
	v := c.verbosity()
	sidecar := []string{"--csi-address=" + filepath.Join(c.opts.RunDir, "ctrl", "csi.sock"), "--kubeconfig=" + c.kubeconfig("sidecars"),
		"--leader-election=false", "--timeout=30s", "--retry-interval-max=10s", v}
	attacherArgs := sidecar
	if g := c.opts.Versions.AttacherFeatureGates; g != "" {
		attacherArgs = append(append([]string{}, sidecar...), "--feature-gates="+g)
	}
	for _, p := range []procSpec{
		{Name: "csi-provisioner", Path: c.bin("csi-provisioner"), Args: append([]string{"--extra-create-metadata=true"}, sidecar...)},
		{Name: "csi-attacher", Path: binIn(c.opts.Versions.AttacherBinDir, c.opts.BinDir, "csi-attacher"), Args: attacherArgs},
		{Name: "csi-resizer", Path: c.bin("csi-resizer"), Args: sidecar},
		{Name: "csi-snapshotter", Path: c.bin("csi-snapshotter"), Args: sidecar},
		{Name: "snapshot-controller", Path: c.bin("snapshot-controller"), Args: []string{
			"--kubeconfig=" + c.kubeconfig("snapshot-controller"), "--leader-election=false", "--retry-interval-max=10s", v,
		}},
	} {
		p.Restart = true
		if _, err := c.sup.start(c.runCtx, p); err != nil {
			return err
		}
	}
	c.say("controller plugin, csi-provisioner, csi-attacher, csi-resizer, csi-snapshotter and snapshot-controller started")
	return nil
}
