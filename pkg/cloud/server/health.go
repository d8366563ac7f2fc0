package server

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/faults"
)

// Health (docs/fakecloud-api.md, "Health") is test configuration held by the fault engine,
// like fault rules: PUT .../health sets it until reset, a health fault rule for its TTL, and
// the worse of the two holds. It changes no revision; every change is an event.

// decodeHealth reads a PUT .../health body.
func decodeHealth(r *http.Request) (cloud.HealthRequest, error) {
	var req cloud.HealthRequest
	if err := decode(r, &req); err != nil {
		return req, err
	}
	if req.Health == "" {
		return req, cloud.NewError(cloud.CodeInvalidArgument, "health is required")
	}
	return req, nil
}

func (s *Server) setVolumeHealth(r *http.Request, _ caller) (*reply, error) {
	id := pathVar(r, "id")
	req, err := decodeHealth(r)
	if err != nil {
		return nil, err
	}
	if _, err := s.store.GetVolume(id); err != nil {
		return nil, err
	}
	if err := s.faults.SetVolumeHealth(id, cloud.VolumeHealth(req.Health), req.Message); err != nil {
		return nil, err
	}
	if _, err := s.store.RecordMutation(cloud.Event{Type: "VolumeHealthSet", VolumeID: id,
		Detail: fmt.Sprintf("health=%s message=%s", req.Health, cloud.Quote(req.Message))}); err != nil {
		return nil, err
	}
	return s.volumeReply(s.store.GetVolume(id))
}

func (s *Server) setInstanceHealth(r *http.Request, _ caller) (*reply, error) {
	id := pathVar(r, "id")
	req, err := decodeHealth(r)
	if err != nil {
		return nil, err
	}
	if _, err := s.store.GetInstance(id); err != nil {
		return nil, err
	}
	if err := s.faults.SetInstanceHealth(id, cloud.InstanceHealth(req.Health), req.Message); err != nil {
		return nil, err
	}
	if _, err := s.store.RecordMutation(cloud.Event{Type: "InstanceHealthSet", InstanceID: id,
		Detail: fmt.Sprintf("health=%s message=%s", req.Health, cloud.Quote(req.Message))}); err != nil {
		return nil, err
	}
	return s.instanceReply(s.store.GetInstance(id))
}

// volumeReply is the answer of a handler that returns one volume (the store's v, or its
// err): v with the health the fault engine holds for it.
func (s *Server) volumeReply(v *cloud.Volume, err error) (*reply, error) {
	if err != nil {
		return nil, err
	}
	s.volumeHealth(s.faults.Health(), v)
	return ok(v, v.Revision), nil
}

// instanceReply is volumeReply for a handler that returns one instance.
func (s *Server) instanceReply(inst *cloud.Instance, err error) (*reply, error) {
	if err != nil {
		return nil, err
	}
	s.instanceHealth(s.faults.Health(), inst)
	return ok(inst, inst.Revision), nil
}

// volumeHealth fills v's health from h.
func (s *Server) volumeHealth(h faults.Health, v *cloud.Volume) {
	v.Health, v.HealthMessage = h.Volume(v.ID)
}

// instanceHealth fills inst's health from h.
func (s *Server) instanceHealth(h faults.Health, inst *cloud.Instance) {
	inst.Health, inst.HealthMessage = h.Instance(inst.ID)
}

// refuseUnhealthyAttach is the cloud's health check of an attach: an impaired or stopped
// instance takes none (InstanceImpaired, InstanceStopped: 409, retryable), whatever its free
// slots. The refusal is an event. It runs before the store's attach transaction, so an
// attach racing a health change may still pass; health is a test knob, not an invariant.
func (s *Server) refuseUnhealthyAttach(ctx context.Context, call faults.Call) error {
	if call.Operation != cloud.OperationAttachVolume || call.InstanceID == "" {
		return nil
	}
	h, msg := s.faults.Health().Instance(call.InstanceID)
	refusal := h.AttachError(call.InstanceID)
	if refusal == nil {
		return nil
	}
	if msg != "" {
		refusal = cloud.NewError(refusal.Code, "%s (%s)", refusal.Message, cloud.Quote(msg))
	}
	if _, err := s.store.RecordEvents([]cloud.Event{{Type: "AttachRefusedUnhealthy", VolumeID: call.VolumeID, InstanceID: call.InstanceID,
		Detail: fmt.Sprintf("health=%s", h)}}); err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Attach refused: instance unhealthy", "volumeID", call.VolumeID, "nodeID", call.InstanceID, "health", h)
	return refusal
}
