package faults

import (
	"errors"
	"fmt"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// DefaultMaxHealthEntries bounds the health set with SetVolumeHealth and SetInstanceHealth
// (objects not ok at once); one more is ServerLimitExceeded. Health rules count against
// MaxRules instead.
const DefaultMaxHealthEntries = 10000

// HealthState is the health of one object with the reason for it.
type HealthState struct {
	// Health is a cloud.VolumeHealth or cloud.InstanceHealth value, never "ok".
	Health string
	// Message says why: the admin's message, or the rule that set it.
	Message string
}

// Health is the health of every object that is not ok at one instant: what the admin set,
// overlaid with the live health rules, the worse of the two per object.
type Health struct {
	Volumes   map[string]HealthState
	Instances map[string]HealthState
}

// Volume is the health of volume id ("ok" and no message when nothing says otherwise).
func (h Health) Volume(id string) (cloud.VolumeHealth, string) {
	if s, ok := h.Volumes[id]; ok {
		return cloud.VolumeHealth(s.Health), s.Message
	}
	return cloud.VolumeHealthOK, ""
}

// Instance is the health of instance id ("ok" and no message when nothing says otherwise).
func (h Health) Instance(id string) (cloud.InstanceHealth, string) {
	if s, ok := h.Instances[id]; ok {
		return cloud.InstanceHealth(s.Health), s.Message
	}
	return cloud.InstanceHealthOK, ""
}

// validateHealthRule reports the problems of a health rule (r.Health != ""): it names
// exactly one object, with a health of that object's kind, and carries nothing a firing
// rule does.
func validateHealthRule(r cloud.FaultRule) []error {
	var errs []error
	if r.Operation != "" && r.Operation != cloud.OperationAny {
		errs = append(errs, fmt.Errorf("a health rule fires on no call: operation must be \"*\" or empty, got %s", cloud.Quote(string(r.Operation))))
	}
	switch {
	case (r.InstanceID == "") == (r.VolumeID == ""):
		errs = append(errs, errors.New("a health rule names exactly one of instanceId and volumeId"))
	case r.InstanceID != "" && cloud.InstanceHealth(r.Health).Rank() < 0:
		errs = append(errs, fmt.Errorf("instance health must be one of %v, got %s%s", cloud.InstanceHealths(), cloud.Quote(r.Health),
			didYouMean(r.Health, cloud.InstanceHealths())))
	case r.VolumeID != "" && cloud.VolumeHealth(r.Health).Rank() < 0:
		errs = append(errs, fmt.Errorf("volume health must be one of %v, got %s%s", cloud.VolumeHealths(), cloud.Quote(r.Health),
			didYouMean(r.Health, cloud.VolumeHealths())))
	}
	if r.Error != "" || r.LatencyMS != 0 || r.Probability != nil || r.AfterCount != 0 || r.Count != 0 {
		errs = append(errs, errors.New("a health rule takes no error, latencyMs, probability, afterCount or count"))
	}
	return errs
}

// SetVolumeHealth sets what volume id's health is until it is set again or the engine is
// reset; "ok" clears it. The caller checks that the volume exists. Errors: InvalidArgument
// (a value that is no VolumeHealth, a message over cloud.MaxHealthMessageBytes),
// ServerLimitExceeded (DefaultMaxHealthEntries objects already set).
func (e *Engine) SetVolumeHealth(id string, h cloud.VolumeHealth, message string) error {
	if h.Rank() < 0 {
		return cloud.NewError(cloud.CodeInvalidArgument, "volume health must be one of %v, got %s%s", cloud.VolumeHealths(), cloud.Quote(string(h)),
			didYouMean(string(h), cloud.VolumeHealths()))
	}
	return e.setHealth(&e.volHealth, id, string(h), h.Normal(), message)
}

// SetInstanceHealth is SetVolumeHealth for instance id and an InstanceHealth.
func (e *Engine) SetInstanceHealth(id string, h cloud.InstanceHealth, message string) error {
	if h.Rank() < 0 {
		return cloud.NewError(cloud.CodeInvalidArgument, "instance health must be one of %v, got %s%s", cloud.InstanceHealths(), cloud.Quote(string(h)),
			didYouMean(string(h), cloud.InstanceHealths()))
	}
	return e.setHealth(&e.instHealth, id, string(h), h.Normal(), message)
}

func (e *Engine) setHealth(m *map[string]HealthState, id, h string, normal bool, message string) error {
	if err := cloud.CheckHealthMessage(message); err != nil {
		return cloud.NewError(cloud.CodeInvalidArgument, "health: %v", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if normal {
		delete(*m, id)
		return nil
	}
	if _, ok := (*m)[id]; !ok && len(e.volHealth)+len(e.instHealth) >= DefaultMaxHealthEntries {
		return cloud.NewError(cloud.CodeServerLimitExceeded, "health: at most %d objects may have a health set; set some back to ok first", DefaultMaxHealthEntries)
	}
	if *m == nil {
		*m = map[string]HealthState{}
	}
	(*m)[id] = HealthState{Health: h, Message: message}
	return nil
}

// Health returns the health of every object that is not ok now: what was set, overlaid with
// the live health rules (expired ones are dropped first), the worse per object; between
// equals, what was set wins, then the older rule. The cost is linear in the rules and the
// objects set.
func (e *Engine) Health() Health {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.expireLocked()
	out := Health{Volumes: make(map[string]HealthState, len(e.volHealth)), Instances: make(map[string]HealthState, len(e.instHealth))}
	for id, s := range e.volHealth {
		out.Volumes[id] = s
	}
	for id, s := range e.instHealth {
		out.Instances[id] = s
	}
	for _, r := range e.rules {
		s := r.spec
		if s.Health == "" {
			continue
		}
		st := HealthState{Health: s.Health, Message: fmt.Sprintf("set by fault rule %s", s.ID)}
		if s.VolumeID != "" {
			if cur, ok := out.Volumes[s.VolumeID]; (!ok || cloud.VolumeHealth(s.Health).Rank() > cloud.VolumeHealth(cur.Health).Rank()) && !cloud.VolumeHealth(s.Health).Normal() {
				out.Volumes[s.VolumeID] = st
			}
			continue
		}
		if cur, ok := out.Instances[s.InstanceID]; (!ok || cloud.InstanceHealth(s.Health).Rank() > cloud.InstanceHealth(cur.Health).Rank()) && !cloud.InstanceHealth(s.Health).Normal() {
			out.Instances[s.InstanceID] = st
		}
	}
	return out
}
