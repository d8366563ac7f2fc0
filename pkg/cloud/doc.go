// Package cloud holds the fake cloud's public contract: the JSON types of its HTTP API (v1),
// the error codes it returns and their sentinel errors, and the Go client that the CSI driver
// uses. The server that implements the API lives in pkg/cloud/server.
//
// The fake cloud owns the truth about attach capacity: instances, their per-instance attach
// limit and out-of-band slots, attachments and account quotas. An attach is checked against all
// of them atomically, so the answer of AttachVolume is authoritative; a CSINode count is only a
// hint derived from Capacity (see docs/design.md, "Who does what").
package cloud
