package admin

import (
	"context"
	"net/http"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// ListInstances calls GET /v1/instances (reader): every instance, sorted by ID. Codes: Unauthenticated, AccessDenied.
func (c *Client) ListInstances(ctx context.Context) ([]cloud.Instance, error) {
	var out cloud.InstanceList
	if err := c.Do(ctx, cloud.Request{Method: http.MethodGet, Path: "/v1/instances"}, &out); err != nil {
		return nil, err
	}
	return out.Instances, nil
}

// CreateInstance calls POST /v1/instances (admin), idempotent on ID. Codes: InvalidArgument
// (see cloud.CreateInstanceRequest: bad ID or zone, unknown type, slots below 0 or above the type's
// limit), AlreadyExists (same ID, other fields), ServerLimitExceeded (10,000 instances by
// default), Unauthenticated, AccessDenied.
func (c *Client) CreateInstance(ctx context.Context, req cloud.CreateInstanceRequest) (*cloud.Instance, error) {
	var out cloud.Instance
	if err := c.Do(ctx, cloud.Request{Method: http.MethodPost, Path: "/v1/instances", Body: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PatchInstance calls PATCH /v1/instances/{id} (admin) without a precondition; see
// PatchInstanceIfMatch. Codes: InvalidArgument (400, see cloud.InstancePatch and its Check: an
// empty patch, a limit outside [1, cloud.MaxAttachSlots], out-of-band slots outside [0,
// cloud.MaxAttachSlots] or above the limit, an unknown type), InstanceNotFound (404),
// Unauthenticated (401), AccessDenied (403).
func (c *Client) PatchInstance(ctx context.Context, id string, p cloud.InstancePatch) (*cloud.Instance, error) {
	return c.PatchInstanceIfMatch(ctx, id, p, 0)
}

// PatchInstanceIfMatch is PatchInstance with If-Match: the instance's Revision must still be
// rev (0: no precondition), else PreconditionFailed (412).
func (c *Client) PatchInstanceIfMatch(ctx context.Context, id string, p cloud.InstancePatch, rev uint64) (*cloud.Instance, error) {
	seg, err := cloud.PathSegment("instance ID", id)
	if err != nil {
		return nil, err
	}
	var out cloud.Instance
	if err := c.Do(ctx, cloud.Request{Method: http.MethodPatch, Path: "/v1/instances/" + seg, Body: p, Header: ifMatchHeader(rev)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListInstanceTypes calls GET /v1/instance-types (reader): every instance type, sorted by
// name. Codes: Unauthenticated, AccessDenied.
func (c *Client) ListInstanceTypes(ctx context.Context) ([]cloud.InstanceType, error) {
	var out cloud.InstanceTypeList
	if err := c.Do(ctx, cloud.Request{Method: http.MethodGet, Path: "/v1/instance-types"}, &out); err != nil {
		return nil, err
	}
	return out.InstanceTypes, nil
}

// SetInstanceHealth calls PUT /v1/instances/{id}/health (admin), as SetVolumeHealth for an
// instance; an impaired or stopped instance refuses attaches with InstanceImpaired or
// InstanceStopped (409, retryable). Codes: InvalidArgument, InstanceNotFound,
// ServerLimitExceeded, Unauthenticated, AccessDenied.
func (c *Client) SetInstanceHealth(ctx context.Context, instanceID string, h cloud.InstanceHealth, message string) (*cloud.Instance, error) {
	seg, err := cloud.PathSegment("instance ID", instanceID)
	if err != nil {
		return nil, err
	}
	var out cloud.Instance
	if err := c.Do(ctx, cloud.Request{Method: http.MethodPut, Path: "/v1/instances/" + seg + "/health", Body: cloud.HealthRequest{Health: string(h), Message: message}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetVolumeHealth calls PUT /v1/volumes/{id}/health (admin): the volume reads with health h
// and message until set again or the cloud is reset; cloud.VolumeHealthOK clears it. Codes:
// InvalidArgument (no such health, message over cloud.MaxHealthMessageBytes), VolumeNotFound,
// ServerLimitExceeded, Unauthenticated, AccessDenied.
func (c *Client) SetVolumeHealth(ctx context.Context, volumeID string, h cloud.VolumeHealth, message string) (*cloud.Volume, error) {
	seg, err := cloud.PathSegment("volume ID", volumeID)
	if err != nil {
		return nil, err
	}
	var out cloud.Volume
	if err := c.Do(ctx, cloud.Request{Method: http.MethodPut, Path: "/v1/volumes/" + seg + "/health", Body: cloud.HealthRequest{Health: string(h), Message: message}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PatchQuotas calls PATCH /v1/quotas (admin) without a precondition; see
// PatchQuotasIfMatch. Codes: InvalidArgument (400, see cloud.QuotasPatch and its Check: an
// empty patch, a count outside [0, cloud.MaxQuotaCount], bytes outside [0,
// cloud.MaxQuotaBytes]),
// Unauthenticated (401), AccessDenied (403).
func (c *Client) PatchQuotas(ctx context.Context, p cloud.QuotasPatch) (*cloud.Quotas, error) {
	return c.PatchQuotasIfMatch(ctx, p, 0)
}

// PatchQuotasIfMatch is PatchQuotas with If-Match: the quotas' Revision must still be rev
// (0: no precondition), else PreconditionFailed (412).
func (c *Client) PatchQuotasIfMatch(ctx context.Context, p cloud.QuotasPatch, rev uint64) (*cloud.Quotas, error) {
	var out cloud.Quotas
	if err := c.Do(ctx, cloud.Request{Method: http.MethodPatch, Path: "/v1/quotas", Body: p, Header: ifMatchHeader(rev)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Reset calls POST /v1/reset (admin): back to the seeded state and seeded fault rules; the
// revision keeps growing. Codes: Unauthenticated, AccessDenied.
func (c *Client) Reset(ctx context.Context) error {
	return c.Do(ctx, cloud.Request{Method: http.MethodPost, Path: "/v1/reset"}, nil)
}
