// Package cloud holds the fake cloud's public contract: the JSON types of its HTTP API (v1),
// the error codes it returns and their sentinel errors, and the Go client of the calls the
// CSI driver makes (Client). It is the fake cloud's face, all that pkg/csi imports: the admin
// and test calls are in pkg/cloud/admin, the server that implements the API is in
// pkg/cloud/server.
//
// The fake cloud owns the truth about attach capacity: instances, their per-instance attach
// limit and out-of-band slots, attachments and account quotas. An attach is checked against all
// of them atomically, so the answer of AttachVolume is authoritative; a CSINode count is only a
// hint derived from Capacity (see docs/design.md, "Who does what").
//
// Units and errors, once for every identifier here: slot counts are attach slots (one per
// attached volume, KEP-4876's allocatable.count), quotas are counts or bytes as named,
// durations end in their unit (MS, Seconds), sizes in bytes; an error of the API is an *Error
// whose Code maps to one HTTP status (Code.HTTPStatus, docs/errors.md) and, in the driver,
// to one gRPC code (Class.Handling); a method's doc names the codes it can return.
package cloud
