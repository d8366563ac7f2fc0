// Package capacity turns the cloud's raw attach-capacity readings into the value the node
// plugin reports as NodeGetInfo.max_volumes_per_node (CSI spec v1.13.0, NodeGetInfo; KEP-4876
// "Mutable CSINode Allocatable"), following docs/design.md, "Capacity model":
//
//	slots      = attachLimit − outOfBandSlots
//	quotaShare = quotaHeadroom (share "none") or ⌈quotaHeadroom / instances⌉ (share "even")
//	raw        = min(slots, attachedHere + quotaShare)
//	reported   = max(1, raw)
//
// The value is a scheduling hint, so the policy is built never to lie in the dangerous
// direction: it is never 0 (0 means "unlimited" in CSI), decreases apply at once, increases
// wait for a stability window and then ramp by a bounded step per refresh, a value is never
// raised while the truth is unknown, and a reading from an older cloud revision than one
// already used is ignored. When the cloud cannot be read the last known good value is kept
// for Config.StaleAfter, then the conservative floor max(1, attachedHere) is reported, where
// attachedHere is the node's own live count of staged volumes when the node service provides
// it (the AttachedHereFunc given to NewReporter), else the last good reading's attached count. Revisions are
// compared only within one cloud epoch (cloud.Capacity.Epoch): a reading from a new epoch
// restarts the revision guard.
//
// Policy is the pure state machine (time is passed in). Reporter wraps it with cached,
// rate-limited, collapsed cloud lookups, a bounded wait, persisted state and Prometheus
// metrics, and implements the node service's CapacityReporter interface.
package capacity
