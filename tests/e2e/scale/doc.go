// Package scale measures what capacity reporting (KEP-4876, mutable CSINode allocatable)
// costs on real components as the cluster grows: it starts a local cluster of upstream
// binaries (package localcluster: N hollow kubelets, each with its node plugin and the real
// plugin registration, one API server, one fake cloud, the controller plugin and its
// sidecars) at the first node count and grows it to each next one; at each count it runs a
// steady pod workload and for each CSIDriver nodeAllocatableUpdatePeriodSeconds one phase
// of scripted capacity churn through the fake cloud's scenario runner (pkg/cloud/scenario):
// out-of-band slots on a fraction of the nodes, an attachment-quota squeeze with ±1 noise, a
// GetCapacity outage.
//
// Each phase yields one Phase: CSINode writes per second and per real capacity change, API
// server requests per second by verb and resource (its own apiserver_request_total) and
// the share caused by capacity updates, the node plugins' cloud capacity lookups per second
// against their bound N / --capacity-min-interval, convergence from a cloud change to the
// CSINode change (package capacityplot's replay of the cloud's audit log), attach failures
// with RESOURCE_EXHAUSTED, node plugin CPU and RSS per node, and pods stuck in
// ContainerCreating. Figures are ratios or per-node costs where they can be, so that runs
// on different machines compare; every phase also records the machine's load average.
//
// WriteFiles writes the results as JSON, a Markdown table and an HTML page of each figure
// against N (inline SVG, as capacityplot's page).
package scale
