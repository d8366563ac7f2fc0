package server

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/scenario"
)

// scenarioAPI is scenario.API served in process, for the steps of POST /v1/scenarios: each
// step calls its route's operation directly (applyInstancePatch, store.PatchQuotas, addFault,
// removeFault, removeFaults, resetToSeed), so it is validated, applied and recorded in the
// event log as the route's request is. Around the operation it does what the route does
// for a request (route): the route's role check, with the role of the scenario's caller;
// the request metrics and request-log line under the route's name; and the error answer,
// which it returns as cloud.Client returns one, "PATCH /v1/quotas: InvalidArgument: ...", so
// that a step's result (GET /v1/scenarios/{id}) and its ScenarioStep event read as they did
// when the steps went through the HTTP handler. An ID that is not an identifier is refused
// as the client refuses it, before anything (cloud.PathSegment).
type scenarioAPI struct {
	s      *Server
	caller caller
}

var _ scenario.API = scenarioAPI{}

// stepRequest is the request a step stands for, as its route would see it.
type stepRequest struct {
	// method and path are the request's as cloud.Client sends it, the path escaped.
	method, path string
	// id is the path's {id} as sent, "" for a route without one (the request log's id).
	id string
	// route and need are the route's name and role in the router.
	route string
	need  Role
	// status is the route's answer on success.
	status int
}

// call runs op as the route of req runs its handler: role check, op, metrics, log line,
// and an error as cloud.Client makes it of the error answer (responseError): the answer's
// code and bounded message, the request ID, the HTTP status and Retry-After.
func (a scenarioAPI) call(ctx context.Context, req stepRequest, op func() error) error {
	start := a.s.now()
	reqID := newRequestID()
	err := a.caller.role.permit(req.need)
	if err == nil {
		err = op()
	}
	status := req.status
	var answer cloud.Error
	if err != nil {
		answer = answerError(reqID, err)
		status = answer.Code.HTTPStatus()
	}
	took := a.s.now().Sub(start)
	a.s.metrics.observe(req.route, status, cloud.CodeOf(err), took)
	a.s.logRequest(klog.FromContext(ctx), req.method, req.id, req.route, status, reqID, took, err)
	if err == nil {
		return nil
	}
	answer.HTTPStatus = status
	if answer.Code == cloud.CodeThrottled {
		answer.RetryAfter = throttleRetryAfter
	}
	return fmt.Errorf("%s %s: %w", req.method, req.path, &answer)
}

// PatchInstance is PATCH /v1/instances/{id} (admin) without If-Match.
func (a scenarioAPI) PatchInstance(ctx context.Context, id string, p cloud.InstancePatch) (*cloud.Instance, error) {
	seg, err := cloud.PathSegment("instance ID", id)
	if err != nil {
		return nil, err
	}
	var inst *cloud.Instance
	err = a.call(ctx, stepRequest{method: http.MethodPatch, path: "/v1/instances/" + seg, id: seg, route: "patchInstance", need: RoleAdmin, status: http.StatusOK},
		func() (err error) {
			inst, err = a.s.applyInstancePatch(id, p, nil)
			return err
		})
	if err != nil {
		return nil, err
	}
	return inst, nil
}

// PatchQuotas is PATCH /v1/quotas (admin) without If-Match.
func (a scenarioAPI) PatchQuotas(ctx context.Context, p cloud.QuotasPatch) (*cloud.Quotas, error) {
	var q *cloud.Quotas
	err := a.call(ctx, stepRequest{method: http.MethodPatch, path: "/v1/quotas", route: "patchQuotas", need: RoleAdmin, status: http.StatusOK},
		func() (err error) {
			q, err = a.s.store.PatchQuotas(p, nil)
			return err
		})
	if err != nil {
		return nil, err
	}
	return q, nil
}

// CreateFault is POST /v1/faults (admin). The engine keeps the rule it is given: it gets its
// own copies of the rule's pointers, as it would decoding a request, not the scenario's.
func (a scenarioAPI) CreateFault(ctx context.Context, r cloud.FaultRule) (*cloud.FaultRule, error) {
	if r.Probability != nil {
		p := *r.Probability
		r.Probability = &p
	}
	if r.ExpiresAt != nil {
		t := *r.ExpiresAt
		r.ExpiresAt = &t
	}
	var added cloud.FaultRule
	err := a.call(ctx, stepRequest{method: http.MethodPost, path: "/v1/faults", route: "createFault", need: RoleAdmin, status: http.StatusCreated},
		func() (err error) {
			added, _, err = a.s.addFault(r)
			return err
		})
	if err != nil {
		return nil, err
	}
	return &added, nil
}

// DeleteFault is DELETE /v1/faults/{id} (admin).
func (a scenarioAPI) DeleteFault(ctx context.Context, id string) error {
	seg, err := cloud.PathSegment("fault rule ID", id)
	if err != nil {
		return err
	}
	return a.call(ctx, stepRequest{method: http.MethodDelete, path: "/v1/faults/" + seg, id: seg, route: "deleteFault", need: RoleAdmin, status: http.StatusOK},
		func() error {
			_, err := a.s.removeFault(id)
			return err
		})
}

// ClearFaults is DELETE /v1/faults (admin).
func (a scenarioAPI) ClearFaults(ctx context.Context) error {
	return a.call(ctx, stepRequest{method: http.MethodDelete, path: "/v1/faults", route: "clearFaults", need: RoleAdmin, status: http.StatusOK},
		func() error {
			_, err := a.s.removeFaults()
			return err
		})
}

// Reset is POST /v1/reset (admin).
func (a scenarioAPI) Reset(ctx context.Context) error {
	return a.call(ctx, stepRequest{method: http.MethodPost, path: "/v1/reset", route: "reset", need: RoleAdmin, status: http.StatusOK},
		func() error {
			_, err := a.s.resetToSeed()
			return err
		})
}
