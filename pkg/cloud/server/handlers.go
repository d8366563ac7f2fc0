package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"

	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/faults"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
)

func (s *Server) healthz(*http.Request, caller) (*reply, error) {
	return ok(map[string]string{"status": "ok"}, 0), nil
}

func (s *Server) readyz(*http.Request, caller) (*reply, error) {
	if err := s.store.Ready(); err != nil {
		return nil, cloud.NewError(cloud.CodeUnavailable, "store not ready: %v", err)
	}
	return ok(map[string]string{"status": "ready"}, 0), nil
}

func (s *Server) listInstanceTypes(*http.Request, caller) (*reply, error) {
	types, err := s.store.InstanceTypes()
	if err != nil {
		return nil, err
	}
	return ok(cloud.InstanceTypeList{InstanceTypes: types}, 0), nil
}

func (s *Server) createInstance(r *http.Request, _ caller) (*reply, error) {
	var req cloud.CreateInstanceRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	inst, err := s.store.CreateInstance(req)
	if err != nil {
		return nil, err
	}
	return created(inst, inst.Revision), nil
}

func (s *Server) listInstances(*http.Request, caller) (*reply, error) {
	list, err := s.store.ListInstances()
	if err != nil {
		return nil, err
	}
	h := s.faults.Health()
	for i := range list {
		s.instanceHealth(h, &list[i])
	}
	return ok(cloud.InstanceList{Instances: list}, 0), nil
}

// registration is the instance auto-registration would create for id, or nil when the
// caller's lookups must not create instances.
func (s *Server) registration(c caller, id string) *cloud.CreateInstanceRequest {
	if !s.cfg.AutoRegister || !c.mayRegister() {
		return nil
	}
	return &cloud.CreateInstanceRequest{ID: id, Zone: s.cfg.DefaultZone, InstanceType: s.cfg.DefaultInstanceType}
}

// ensureRegistered creates instance id when it is missing and the caller may register it.
func (s *Server) ensureRegistered(c caller, id string, lookupErr error) bool {
	reg := s.registration(c, id)
	if reg == nil || !errors.Is(lookupErr, cloud.ErrInstanceNotFound) {
		return false
	}
	_, err := s.store.EnsureInstance(*reg)
	return err == nil
}

func (s *Server) getInstance(r *http.Request, c caller) (*reply, error) {
	id := pathVar(r, "id")
	if err := s.inject(r.Context(), faults.Call{Operation: cloud.OperationGetInstance, InstanceID: id}); err != nil {
		return nil, err
	}
	inst, err := s.store.GetInstance(id)
	if s.ensureRegistered(c, id, err) {
		inst, err = s.store.GetInstance(id)
	}
	return s.instanceReply(inst, err)
}

func (s *Server) patchInstance(r *http.Request, _ caller) (*reply, error) {
	var p cloud.InstancePatch
	if err := decode(r, &p); err != nil {
		return nil, err
	}
	match, err := ifMatch(r)
	if err != nil {
		return nil, err
	}
	inst, err := s.applyInstancePatch(pathVar(r, "id"), p, match)
	if err != nil {
		return nil, err
	}
	return ok(inst, inst.Revision), nil
}

// applyInstancePatch is PATCH /v1/instances/{id} once its request is read (and a scenario's
// instance step): p applied to instance id if its revision is still *match (nil: any),
// answered with its health. Codes: the store's (InvalidArgument, InstanceNotFound,
// PreconditionFailed).
func (s *Server) applyInstancePatch(id string, p cloud.InstancePatch, match *uint64) (*cloud.Instance, error) {
	inst, err := s.store.PatchInstance(id, p, match)
	if err != nil {
		return nil, err
	}
	s.instanceHealth(s.faults.Health(), inst)
	return inst, nil
}

func (s *Server) getCapacity(r *http.Request, c caller) (*reply, error) {
	id := pathVar(r, "id")
	if err := s.inject(r.Context(), faults.Call{Operation: cloud.OperationGetCapacity, InstanceID: id}); err != nil {
		return nil, err
	}
	capacity, err := s.store.Capacity(id)
	if s.ensureRegistered(c, id, err) {
		capacity, err = s.store.Capacity(id)
	}
	if err != nil {
		return nil, err
	}
	capacity.Health, _ = s.faults.Health().Instance(id)
	return ok(capacity, capacity.Revision), nil
}

func (s *Server) createVolume(r *http.Request, _ caller) (*reply, error) {
	var req cloud.CreateVolumeRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	for _, f := range []struct{ name, v string }{{"sourceSnapshotId", req.SourceSnapshotID}, {"sourceVolumeId", req.SourceVolumeID}} {
		if err := cloud.CheckOptionalID(f.name, f.v); err != nil {
			return nil, cloud.NewError(cloud.CodeInvalidArgument, "create volume: %v", err)
		}
	}
	if err := s.inject(r.Context(), faults.Call{Operation: cloud.OperationCreateVolume}); err != nil {
		return nil, err
	}
	if req.Zone == "" && req.SourceVolumeID != "" {
		// A clone is where its source is.
		src, err := s.store.GetVolume(req.SourceVolumeID)
		if err != nil {
			return nil, err
		}
		req.Zone = src.Zone
	}
	if req.Zone == "" {
		req.Zone = s.cfg.DefaultZone
	}
	v, err := s.store.CreateVolume(req)
	if err != nil {
		return nil, err
	}
	// Health lives in the fault engine, not the store: filled in as GET /v1/volumes/{id}
	// does, so the create answer and a GET right after agree.
	s.volumeHealth(s.faults.Health(), v)
	return created(v, v.Revision), nil
}

func (s *Server) listVolumes(r *http.Request, _ caller) (*reply, error) {
	maxResults, token, err := pageQuery(r)
	if err != nil {
		return nil, err
	}
	if err := s.inject(r.Context(), faults.Call{Operation: cloud.OperationListVolumes}); err != nil {
		return nil, err
	}
	list, err := s.store.ListVolumes(maxResults, token)
	if err != nil {
		return nil, err
	}
	h := s.faults.Health()
	for i := range list.Volumes {
		s.volumeHealth(h, &list.Volumes[i])
	}
	return ok(list, 0), nil
}

// getVolume reads a volume, or with waitFor waits for the end of its attach or detach
// (waitVolume). Fault rules on GetVolume act on both, before any wait.
func (s *Server) getVolume(r *http.Request, _ caller) (*reply, error) {
	id := pathVar(r, "id")
	wait, err := parseVolumeWait(r)
	if err != nil {
		return nil, err
	}
	if err := s.inject(r.Context(), faults.Call{Operation: cloud.OperationGetVolume, VolumeID: id}); err != nil {
		return nil, err
	}
	if wait != nil {
		return s.waitVolume(r, id, wait)
	}
	return s.volumeReply(s.store.GetVolume(id))
}

func (s *Server) deleteVolume(r *http.Request, _ caller) (*reply, error) {
	id := pathVar(r, "id")
	if err := s.inject(r.Context(), faults.Call{Operation: cloud.OperationDeleteVolume, VolumeID: id}); err != nil {
		return nil, err
	}
	rev, err := s.store.DeleteVolume(id)
	if err != nil {
		return nil, err
	}
	return ok(cloud.RevisionResponse{Revision: rev}, rev), nil
}

// canonicalAttachBody recognises the body cloud.Client sends, {"instanceId":"<id>"} with
// optional trailing white space, where <id> is printable ASCII without '"' or '\' (so no
// escape to decode). For such a body the strict decoder (decode) gives exactly that ID and no
// error; for any other body ok is false and the strict decoder decides.
// FuzzCanonicalAttachBody holds the two to the same answer.
func canonicalAttachBody(data []byte) (id string, ok bool) {
	const prefix, suffix = `{"instanceId":"`, `"}`
	rest, found := bytes.CutPrefix(data, []byte(prefix))
	if !found {
		return "", false
	}
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return "", false
	}
	for _, c := range rest[:end] {
		if c < 0x20 || c > 0x7e || c == '\\' {
			return "", false
		}
	}
	tail, found := bytes.CutPrefix(rest[end:], []byte(suffix))
	if !found || len(bytes.TrimLeft(tail, " \t\r\n")) != 0 {
		return "", false
	}
	return string(rest[:end]), true
}

// decodeAttach reads an attach or detach body. The instance ID is checked here, before the
// fault rules see it: a fired rule records it in an event.
func decodeAttach(r *http.Request) (cloud.AttachRequest, error) {
	var req cloud.AttachRequest
	data, err := readBody(r)
	if err != nil {
		return req, err
	}
	if id, ok := canonicalAttachBody(data); ok {
		// What the strict decoder would give, without its cost: this is every driver's
		// attach and detach.
		req.InstanceID = id
	} else if err := decodeBytes(data, &req); err != nil {
		return req, err
	}
	if err := cloud.CheckID("instanceId", req.InstanceID); err != nil {
		return req, cloud.NewError(cloud.CodeInvalidArgument, "%v", err)
	}
	return req, nil
}

func (s *Server) attachVolume(r *http.Request, c caller) (*reply, error) {
	id := pathVar(r, "id")
	req, err := decodeAttach(r)
	if err != nil {
		return nil, err
	}
	call := faults.Call{Operation: cloud.OperationAttachVolume, VolumeID: id, InstanceID: req.InstanceID}
	// An attach never registers an instance: a node registers when its plugin first looks
	// itself up, and an attach to a node that never did is a caller's mistake (404).
	return s.attachOrDetach(r, call, req.ReadOnly, func(ctx context.Context) (*cloud.Attachment, error) {
		return s.store.AttachMode(id, req.InstanceID, req.ReadOnly, nil, s.planner(ctx, call))
	})
}

// attachOrDetach runs an attach or detach: its arrival number on the volume is taken
// first, then the fault rules run (their latency waited out whether or not the caller
// stays, operationContext), then apply commits it, unless a later request on the same
// volume that asks something else was carried out meanwhile (volumeOrder; readOnly is the
// attach's mode, false for a detach): then it is dropped, recorded as a RequestSuperseded
// event, and answered Unavailable.
func (s *Server) attachOrDetach(r *http.Request, call faults.Call, readOnly bool, apply func(ctx context.Context) (*cloud.Attachment, error)) (*reply, error) {
	ticket := s.order.arrive(call.VolumeID, orderedRequest{op: call.Operation, instanceID: call.InstanceID, readOnly: readOnly})
	defer ticket.done()
	ctx, cancel := s.operationContext(r)
	defer cancel()
	if err := s.inject(ctx, call); err != nil {
		return nil, err
	}
	var (
		att *cloud.Attachment
		err error
	)
	if !ticket.carryOut(func() { att, err = apply(ctx) }) {
		klog.FromContext(ctx).V(2).Info("Request superseded", "operation", call.Operation, "volumeID", call.VolumeID, "nodeID", call.InstanceID)
		if _, err := s.store.RecordEvents([]cloud.Event{{Type: "RequestSuperseded", VolumeID: call.VolumeID, InstanceID: call.InstanceID,
			Detail: fmt.Sprintf("operation=%s: a later, different attach or detach of the volume was carried out first; this one did not run", call.Operation)}}); err != nil {
			return nil, err
		}
		return nil, supersededError(call.Operation, call.VolumeID)
	}
	if err != nil {
		return nil, err
	}
	s.started(att)
	return attachReply(att), nil
}

func (s *Server) detachVolume(r *http.Request, _ caller) (*reply, error) {
	id := pathVar(r, "id")
	req, err := decodeAttach(r)
	if err != nil {
		return nil, err
	}
	if req.ReadOnly {
		// A detach has no mode; a body that says one was meant for an attach.
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "detach: readOnly is an attach option")
	}
	call := faults.Call{Operation: cloud.OperationDetachVolume, VolumeID: id, InstanceID: req.InstanceID}
	return s.attachOrDetach(r, call, false, func(ctx context.Context) (*cloud.Attachment, error) {
		return s.store.Detach(id, req.InstanceID, s.planner(ctx, call))
	})
}

func (s *Server) resizeVolume(r *http.Request, _ caller) (*reply, error) {
	id := pathVar(r, "id")
	var req cloud.ResizeRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if err := s.inject(r.Context(), faults.Call{Operation: cloud.OperationResizeVolume, VolumeID: id}); err != nil {
		return nil, err
	}
	return s.volumeReply(s.store.Resize(id, req.SizeBytes))
}

func (s *Server) modifyVolume(r *http.Request, _ caller) (*reply, error) {
	id := pathVar(r, "id")
	var req cloud.ModifyVolumeRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if err := s.inject(r.Context(), faults.Call{Operation: cloud.OperationModifyVolume, VolumeID: id}); err != nil {
		return nil, err
	}
	return s.volumeReply(s.store.ModifyVolume(id, req))
}

func (s *Server) createSnapshot(r *http.Request, _ caller) (*reply, error) {
	var req cloud.CreateSnapshotRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	// Checked before the fault rules see it (a fired rule records it in an event).
	if err := cloud.CheckID("sourceVolumeId", req.SourceVolumeID); err != nil {
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "create snapshot: %v", err)
	}
	if err := s.inject(r.Context(), faults.Call{Operation: cloud.OperationCreateSnapshot, VolumeID: req.SourceVolumeID}); err != nil {
		return nil, err
	}
	sn, err := s.store.CreateSnapshot(req)
	if err != nil {
		return nil, err
	}
	return created(sn, sn.Revision), nil
}

func (s *Server) listSnapshots(r *http.Request, _ caller) (*reply, error) {
	maxResults, err := queryInt(r, "maxResults")
	if err != nil {
		return nil, err
	}
	o := cloud.ListSnapshotsOptions{MaxResults: maxResults}
	for name, v := range map[string]*string{"snapshotId": &o.SnapshotID, "sourceVolumeId": &o.SourceVolumeID, "pageToken": &o.PageToken} {
		if *v, err = queryID(r, name); err != nil {
			return nil, err
		}
	}
	if err := s.inject(r.Context(), faults.Call{Operation: cloud.OperationListSnapshots, VolumeID: o.SourceVolumeID}); err != nil {
		return nil, err
	}
	list, err := s.store.ListSnapshots(o)
	if err != nil {
		return nil, err
	}
	return ok(list, 0), nil
}

func (s *Server) getSnapshot(r *http.Request, _ caller) (*reply, error) {
	sn, err := s.store.GetSnapshot(pathVar(r, "id"))
	if err != nil {
		return nil, err
	}
	return ok(sn, sn.Revision), nil
}

func (s *Server) deleteSnapshot(r *http.Request, _ caller) (*reply, error) {
	id := pathVar(r, "id")
	if err := s.inject(r.Context(), faults.Call{Operation: cloud.OperationDeleteSnapshot}); err != nil {
		return nil, err
	}
	rev, err := s.store.DeleteSnapshot(id)
	if err != nil {
		return nil, err
	}
	return ok(cloud.RevisionResponse{Revision: rev}, rev), nil
}

// createGroupSnapshot: a fault rule sees the group as one call with no volume (a rule with a
// volumeId never matches it), so a fired rule fails the whole group and cuts no member.
func (s *Server) createGroupSnapshot(r *http.Request, _ caller) (*reply, error) {
	var req cloud.CreateGroupSnapshotRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	// Checked before the fault rules see it, as every other request's IDs are.
	if _, err := req.Check(); err != nil {
		return nil, err
	}
	if err := s.inject(r.Context(), faults.Call{Operation: cloud.OperationCreateGroupSnapshot}); err != nil {
		return nil, err
	}
	g, err := s.store.CreateGroupSnapshot(req)
	if err != nil {
		return nil, err
	}
	return created(g, g.Revision), nil
}

func (s *Server) getGroupSnapshot(r *http.Request, _ caller) (*reply, error) {
	g, err := s.store.GetGroupSnapshot(pathVar(r, "id"))
	if err != nil {
		return nil, err
	}
	return ok(g, g.Revision), nil
}

func (s *Server) deleteGroupSnapshot(r *http.Request, _ caller) (*reply, error) {
	id := pathVar(r, "id")
	if err := s.inject(r.Context(), faults.Call{Operation: cloud.OperationDeleteGroupSnapshot}); err != nil {
		return nil, err
	}
	rev, err := s.store.DeleteGroupSnapshot(id)
	if err != nil {
		return nil, err
	}
	return ok(cloud.RevisionResponse{Revision: rev}, rev), nil
}

func (s *Server) getQuotas(*http.Request, caller) (*reply, error) {
	q, err := s.store.Quotas()
	if err != nil {
		return nil, err
	}
	return ok(q, q.Revision), nil
}

func (s *Server) patchQuotas(r *http.Request, _ caller) (*reply, error) {
	var p cloud.QuotasPatch
	if err := decode(r, &p); err != nil {
		return nil, err
	}
	match, err := ifMatch(r)
	if err != nil {
		return nil, err
	}
	q, err := s.store.PatchQuotas(p, match)
	if err != nil {
		return nil, err
	}
	return ok(q, q.Revision), nil
}

func (s *Server) createFault(r *http.Request, _ caller) (*reply, error) {
	var rule cloud.FaultRule
	if err := decode(r, &rule); err != nil {
		return nil, err
	}
	added, rev, err := s.addFault(rule)
	if err != nil {
		return nil, err
	}
	return created(added, rev), nil
}

// addFault is POST /v1/faults once its request is read (and a scenario's fault step): the
// rule added, its FaultCreated event recorded; it returns the rule with its ID and the
// revision of the event. Codes: the engine's (InvalidArgument, ServerLimitExceeded).
func (s *Server) addFault(rule cloud.FaultRule) (cloud.FaultRule, uint64, error) {
	added, err := s.faults.Add(rule)
	if err != nil {
		return cloud.FaultRule{}, 0, err
	}
	rev, err := s.store.RecordMutation(cloud.Event{Type: "FaultCreated", InstanceID: added.InstanceID, VolumeID: added.VolumeID,
		Detail: fmt.Sprintf("rule=%s operation=%s error=%s latencyMs=%d", added.ID, added.Operation, added.Error, added.LatencyMS)})
	if err != nil {
		return cloud.FaultRule{}, 0, err
	}
	return added, rev, nil
}

// listFaults pages the live rules: maxResults (0: 100, at most 1000) after pageToken.
func (s *Server) listFaults(r *http.Request, _ caller) (*reply, error) {
	maxResults, token, err := pageQuery(r)
	if err != nil {
		return nil, err
	}
	list, err := s.faults.Page(maxResults, token)
	if err != nil {
		return nil, err
	}
	return ok(list, 0), nil
}

// getFault answers one live rule with its fired count; FaultNotFound for an unknown or
// expired ID.
func (s *Server) getFault(r *http.Request, _ caller) (*reply, error) {
	rule, err := s.faults.Get(pathVar(r, "id"))
	if err != nil {
		return nil, err
	}
	return ok(rule, 0), nil
}

func (s *Server) deleteFault(r *http.Request, _ caller) (*reply, error) {
	return revisionReply(s.removeFault(pathVar(r, "id")))
}

// removeFault is DELETE /v1/faults/{id} (and a scenario's deleteFault step): rule id removed,
// a transition it held woken, its FaultDeleted event recorded; it returns the event's
// revision. Codes: FaultNotFound.
func (s *Server) removeFault(id string) (uint64, error) {
	if err := s.faults.Delete(id); err != nil {
		return 0, err
	}
	s.kick() // a transition it held may complete now
	return s.store.RecordMutation(cloud.Event{Type: "FaultDeleted", Detail: "rule=" + id})
}

func (s *Server) clearFaults(*http.Request, caller) (*reply, error) {
	return revisionReply(s.removeFaults())
}

// removeFaults is DELETE /v1/faults (and a scenario's clearFaults step): every rule removed,
// the transitions they held woken, the FaultsCleared event recorded; it returns the event's
// revision.
func (s *Server) removeFaults() (uint64, error) {
	s.faults.Clear()
	s.kick()
	return s.store.RecordMutation(cloud.Event{Type: "FaultsCleared"})
}

// revisionReply answers a mutation that returns no resource with the revision after it.
func revisionReply(rev uint64, err error) (*reply, error) {
	if err != nil {
		return nil, err
	}
	return ok(cloud.RevisionResponse{Revision: rev}, rev), nil
}

// listEvents pages the audit log: events after sinceRevision or sinceSeq (exclusive),
// maxResults (0: 100, at most 1000) after pageToken.
func (s *Server) listEvents(r *http.Request, _ caller) (*reply, error) {
	q := r.URL.Query()
	if q.Has("sinceRevision") && q.Has("sinceSeq") {
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "sinceRevision and sinceSeq are exclusive")
	}
	var (
		eq  store.EventQuery
		err error
	)
	if eq.SinceSeq, err = queryUint(r, "sinceSeq"); err != nil {
		return nil, err
	}
	if eq.SinceRevision, err = queryUint(r, "sinceRevision"); err != nil {
		return nil, err
	}
	if eq.MaxResults, err = queryInt(r, "maxResults"); err != nil {
		return nil, err
	}
	if eq.PageToken, err = queryID(r, "pageToken"); err != nil {
		return nil, err
	}
	list, err := s.store.ListEvents(eq)
	if err != nil {
		return nil, err
	}
	return ok(list, 0), nil
}

func (s *Server) reset(*http.Request, caller) (*reply, error) {
	return revisionReply(s.resetToSeed())
}

// resetToSeed is POST /v1/reset (and a scenario's reset step): the store and the fault rules
// back to the seed; it returns the revision after it.
func (s *Server) resetToSeed() (uint64, error) {
	rev, err := s.store.Reset(s.cfg.Seed.state())
	if err != nil {
		return 0, err
	}
	if err := s.faults.Reset(s.cfg.Seed.Faults); err != nil {
		return 0, err
	}
	s.kick()
	return rev, nil
}
