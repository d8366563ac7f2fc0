// Package csi implements the CSI services (spec v1.13) of the disk.fakecloud.dev driver:
// identity, controller (volumes, attachments and snapshots through the fake cloud) and node
// (bind mounts of per-volume backing folders or files under a state directory).
//
// The node service reports the node's attach capacity as NodeGetInfo.max_volumes_per_node
// (KEP-4876, Mutable CSINode Allocatable) through a CapacityReporter; the controller service's
// ControllerPublishVolume is the authority that maps the cloud's answer to a gRPC code
// (docs/errors.md). Driver.Run owns the gRPC server and the optional HTTP server.
//
// Start-up is four steps, in this order: Options.Validate (once), clustercheck.Decide (a
// node plugin's capacity mode; the only step that waits on the Kubernetes API server),
// NewForCloud, the composition root, which builds every part without I/O and hands the node
// service and the capacity reporter the same staged-volume tracker (package nodestate), and
// Driver.Run, which takes the state directory's lock, restores the capacity reporter's last
// known good value (CapacityReporter.Restore) and then serves. docs/architecture.md follows
// the two data paths file by file.
package csi
