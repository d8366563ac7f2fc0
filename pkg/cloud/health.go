package cloud

// VolumeHealth is the cloud's view of a volume's backing storage (docs/fakecloud-api.md,
// "Health"). The zero value "" reads as VolumeHealthOK: volumes from a cloud without health
// are healthy.
type VolumeHealth string

// The volume health values, from best to worst.
const (
	// VolumeHealthOK: the volume serves I/O normally.
	VolumeHealthOK VolumeHealth = "ok"
	// VolumeHealthDegraded: the volume serves I/O with reduced redundancy or speed; attaches
	// still work. The driver reports it as an abnormal CSI VolumeCondition.
	VolumeHealthDegraded VolumeHealth = "degraded"
	// VolumeHealthFailed: the volume's data cannot be trusted. Attaches still work (a
	// volume is repaired or read out while attached); the condition is abnormal.
	VolumeHealthFailed VolumeHealth = "failed"
)

// InstanceHealth is the cloud's view of an instance's ability to take attaches. The zero
// value "" reads as InstanceHealthOK.
type InstanceHealth string

// The instance health values, from best to worst.
const (
	// InstanceHealthOK: the instance takes attaches.
	InstanceHealthOK InstanceHealth = "ok"
	// InstanceHealthImpaired: the instance runs but its attach path does not: every attach
	// to it is InstanceImpaired (409, retryable) until health returns. Attachments it has
	// stay; detaches work.
	InstanceHealthImpaired InstanceHealth = "impaired"
	// InstanceHealthStopped: the instance is stopped: every attach to it is InstanceStopped
	// (409, retryable: it is started again without the caller doing anything). Detaches work.
	InstanceHealthStopped InstanceHealth = "stopped"
)

// VolumeHealths lists the volume health values, best first.
func VolumeHealths() []VolumeHealth {
	return []VolumeHealth{VolumeHealthOK, VolumeHealthDegraded, VolumeHealthFailed}
}

// InstanceHealths lists the instance health values, best first.
func InstanceHealths() []InstanceHealth {
	return []InstanceHealth{InstanceHealthOK, InstanceHealthImpaired, InstanceHealthStopped}
}

// Normal reports whether h is VolumeHealthOK (or "", which means it).
func (h VolumeHealth) Normal() bool { return h == "" || h == VolumeHealthOK }

// Rank orders h from best (0) to worst; -1 for an unknown value.
func (h VolumeHealth) Rank() int {
	switch h {
	case "", VolumeHealthOK:
		return 0
	case VolumeHealthDegraded:
		return 1
	case VolumeHealthFailed:
		return 2
	}
	return -1
}

// Normal reports whether h is InstanceHealthOK (or "", which means it).
func (h InstanceHealth) Normal() bool { return h == "" || h == InstanceHealthOK }

// Rank orders h from best (0) to worst; -1 for an unknown value.
func (h InstanceHealth) Rank() int {
	switch h {
	case "", InstanceHealthOK:
		return 0
	case InstanceHealthImpaired:
		return 1
	case InstanceHealthStopped:
		return 2
	}
	return -1
}

// AttachError is the error an attach to an instance of health h gets, nil when h takes
// attaches. Never an attach-capacity code: an unhealthy instance is not full, and the
// kubelet fails a pod whose attach is RESOURCE_EXHAUSTED (docs/errors.md).
func (h InstanceHealth) AttachError(instanceID string) *Error {
	switch h {
	case InstanceHealthImpaired:
		return NewError(CodeInstanceImpaired, "instance %s is impaired: it takes no attaches until its health returns", Quote(instanceID))
	case InstanceHealthStopped:
		return NewError(CodeInstanceStopped, "instance %s is stopped: it takes no attaches until it runs again", Quote(instanceID))
	}
	return nil
}

// MaxHealthMessageBytes bounds HealthRequest.Message, in bytes.
const MaxHealthMessageBytes = 256

// HealthRequest is the body of PUT /v1/volumes/{id}/health and PUT /v1/instances/{id}/health
// (admin). Health is one of the target's values ("ok" clears what an earlier PUT set);
// Message, at most MaxHealthMessageBytes with no control character, says why and is shown with
// the health. Fault rules with a health (FaultRule.Health) set health for a TTL on top: the
// worse of the two holds. Errors, each changing nothing: 400 InvalidArgument (a value that is
// not the target's health, with the value likely meant; a message over the bound), 404
// VolumeNotFound or InstanceNotFound, 409 ServerLimitExceeded (the server holds a health for
// as many objects as it may).
type HealthRequest struct {
	Health  string `json:"health"`
	Message string `json:"message,omitempty"`
}

// CheckHealthMessage is the bound on a health message: at most MaxHealthMessageBytes of
// UTF-8 with no control character (CheckFreeText).
func CheckHealthMessage(m string) error {
	return CheckFreeText("message", m, MaxHealthMessageBytes)
}
