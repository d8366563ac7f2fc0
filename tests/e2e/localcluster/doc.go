// Package localcluster runs the e2e cluster of upstream Kubernetes binaries
// as local processes on 127.0.0.1, so the e2e suite runs where there is no
// Docker engine (docs/local-cluster.md).
//
// Build compiles etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, a hollow kubelet (kubemark with controller attach/detach
// on), csi-provisioner, csi-attacher, csi-resizer, csi-snapshotter and
// snapshot-controller from the tools module
// (tests/e2e/localcluster/tools, which alone depends on k8s.io/kubernetes)
// into a cache outside the clone, keyed by KubeVersion. BuildUpstream builds
// Kubernetes' storage e2e suite (tests/e2e/upstream) into the same cache with
// the same flags, keyed by its sources.
//
// Start generates a CA, client certificates and kubeconfigs, starts the
// control plane, the fake cloud (seeded with one instance per node, the node
// name being the instance ID), the driver's controller plugin with its
// sidecars (authenticated as the ServiceAccount of deploy/base, so RBAC is
// exercised), csi-resizer, csi-snapshotter and snapshot-controller (with the
// VolumeSnapshot CRDs and the snapshot-controller RBAC of the release the
// tools module pins), and per node a hollow kubelet, a node plugin (its HTTP
// endpoints on a free port, Info.PluginURLs; its cluster check under the
// node ServiceAccount's RBAC) and the kubelet plugin registration service
// that node-driver-registrar would serve (pkg/csi/registration). It applies deploy/base's RBAC,
// CSIDriver and StorageClass, and returns when every node is Ready and its
// CSINode reports the driver with a count. Options.StartBatch starts the nodes a batch
// at a time (make scale: 10), and Start first checks that the hollow kubelets will get
// their inotify instances (two each; fs.inotify.max_user_instances). With
// Options.StartNodes it starts only the first nodes, and Cluster.Grow starts more later
// (make scale: one cluster grown from 10 to 30 to 100 nodes); every node's instance is in
// the fake cloud from the start. Stop stops the nodes' processes 16 at a time, then the
// control plane. The hollow kubelets create no iptables chains on the host
// (makeIPTablesUtilChains off).
//
// RestartNodePlugin rolls one node plugin as a DaemonSet update would: with
// another binary (BuildDriver stamps a version), keeping the registration
// socket (a driver container restart) or removing and serving it again (a
// pod replacement, which makes the kubelet deregister the plugin).
//
// Every component logs to <run>/logs/<name>.log and has a pid file in
// <run>/pids; components other than etcd and kube-apiserver are restarted
// when they exit, as a kubelet restarts a container.
package localcluster
