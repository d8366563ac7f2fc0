// Package hostpath benchmarks our node plugin's NodeGetInfo against csi-driver-host-path's
// (github.com/kubernetes-csi/csi-driver-host-path, the CSI reference driver), both as real
// processes on unix sockets, from one client (nodeinfo_test.go). It is a module of its own so
// that nothing of the comparison enters the main module's graph; host-path's plugin is not a
// dependency at all but a program built from its own source by hack/hostpath.sh.
// Run with `make bench` (hack/bench.sh), which builds the three programs and passes their paths.
package hostpath
