// Package nodestate owns the node plugin's state directory (--state-dir): the layout of every
// file in it, the atomic writes, the exclusive lock, and the two pieces of state kept there
// that more than one part of the plugin reads: the staged-volume tracker (written by the node
// service, read by the capacity reporter for its live floor) and the persisted node identity
// (the zone NodeGetInfo reports, kept so that a restart can answer while the cloud is down).
//
// The layout, all under the state directory:
//
//	.lock                                  flock held while a plugin runs (Dir.Lock)
//	node.json                              the node identity (Identity)
//	capacity.json                          the capacity reporter's last trusted value (pkg/csi/capacity)
//	volumes/<volumeID>/staged              the staged mount point (Staged)
//	volumes/<volumeID>/published/<sha256>  one record per target_path (pkg/csi, publish records)
//	volumes/<volumeID>/data, block.img     the volume's data, unless --volume-data-dir is set
//
// Nothing here talks to the cloud or maps errors to gRPC codes; pkg/csi does.
package nodestate
