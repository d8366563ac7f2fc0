// Package capacityplot observes how a cluster follows the fake cloud's attach
// capacity (KEP-4876, mutable CSINode allocatable): it watches the driver's
// CSINode allocatable.count per node, replays the cloud's audit log
// (GET /v1/events) into the capacity truth per node, samples both sides every
// few seconds, and writes the result as one self-contained HTML file (inline
// SVG, no scripts, no network), a plain-text summary of CSINode writes and
// update lag (cloud change -> CSINode change), and the recording itself as
// JSON, from which ReadRecording lets the page be drawn again.
//
// Truth follows the capacity model of docs/design.md without the driver's smoothing:
// max(1, min(limit - outOfBand, attached + quota share)). The lag of a CSINode
// change to value v is measured from the last cloud event at or before it that
// moved the truth to v. Times on the cloud side are the cloud's clock and on
// the cluster side the observer's: on one machine they agree, across machines
// the lag includes their skew.
package capacityplot
