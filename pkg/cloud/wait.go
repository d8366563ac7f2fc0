package cloud

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Bounds of a wait, GET /v1/volumes/{id}?waitFor= (docs/fakecloud-api.md, "Waiting for an
// attach or detach"), in milliseconds: timeoutMs is at most MaxWaitMS and DefaultWaitMS
// when absent. MaxWaitMS stays well under DefaultTimeout, the client's bound of one
// request, and under the server's write timeout.
const (
	MaxWaitMS     = 20_000
	DefaultWaitMS = 10_000
)

// WaitHeader is the answer header of a wait, saying how it ended: WaitChanged (the volume is
// no longer in the transition waited for: the body is the volume then), WaitTimeout (the
// bound came first: the body is the volume as last read, still in it), or WaitBusy (with 429
// Throttled: too many waits are open; nothing waited). A server that answers GET
// /v1/volumes/{id}?waitFor= without it did not wait: a fake cloud from before waits, which
// ignored the query.
const (
	WaitHeader  = "X-Wait"
	WaitChanged = "changed"
	WaitTimeout = "timeout"
	WaitBusy    = "busy"
)

// ErrWaitUnsupported is WaitVolume's error when the server answered without waiting (no
// WaitHeader): it does not know waits, so the caller polls GetVolume instead.
var ErrWaitUnsupported = errors.New("the cloud does not support waiting for a volume (GET /v1/volumes/{id}?waitFor=): poll instead")

// ErrWaitBusy is WaitVolume's error when the cloud holds as many waits as it may (429
// Throttled with X-Wait: busy): the wait did not start; the *Error is wrapped too. Poll or
// wait again later: it says nothing of the volume.
var ErrWaitBusy = errors.New("the cloud holds the most waits it may")

// VolumeWait is what WaitVolume waits for: the end of the attach (For: StateAttached) or
// detach (For: StateDetached) of the volume to InstanceID, for at most Timeout (clamped to
// [0, MaxWaitMS ms], and to what is left of the context's deadline and the client's own
// request timeout).
type VolumeWait struct {
	For        AttachState
	InstanceID string
	Timeout    time.Duration
}

// waitMargin is how much of the client's own request timeout (WithTimeout) a wait leaves for
// the answer to come back in.
const waitMargin = 5 * time.Second

// WaitVolume calls GET /v1/volumes/{id}?waitFor=&instanceId=&timeoutMs=: it returns the volume
// as soon as it is no longer attaching (For: StateAttached) or detaching (For:
// StateDetached) to w.InstanceID, which it may be at once (attached, detached, error, bound
// elsewhere), or as it still is when the wait's bound is over: check State and AttachedTo,
// and call again to wait more. Codes: VolumeNotFound (also when the volume is deleted during
// the wait), InvalidArgument (a For other than attached or detached, a malformed instance
// ID: refused by the client, not sent), Unavailable (the cloud stopped during the wait),
// plus faults injected on GetVolume (any code). ErrWaitBusy and ErrWaitUnsupported say the
// cloud did not wait (see them).
func (c *Client) WaitVolume(ctx context.Context, id string, w VolumeWait) (*Volume, error) {
	seg, err := PathSegment("volume ID", id)
	if err != nil {
		return nil, err
	}
	if w.For != StateAttached && w.For != StateDetached {
		return nil, NewError(CodeInvalidArgument, "wait for %s: want attached or detached (refused by the client, not sent)", Quote(string(w.For)))
	}
	if err := CheckID("instanceId", w.InstanceID); err != nil {
		return nil, NewError(CodeInvalidArgument, "%v (refused by the client, not sent)", err)
	}
	timeout := min(max(w.Timeout, 0), MaxWaitMS*time.Millisecond)
	if deadline, ok := ctx.Deadline(); ok {
		timeout = min(timeout, max(time.Until(deadline), 0))
	}
	if c.http.Timeout > 0 {
		timeout = min(timeout, max(c.http.Timeout-waitMargin, c.http.Timeout/2))
	}
	q := url.Values{"waitFor": {string(w.For)}, "instanceId": {w.InstanceID}, "timeoutMs": {strconv.FormatInt(timeout.Milliseconds(), 10)}}
	var (
		out    Volume
		header http.Header
	)
	if err := c.doHeader(ctx, http.MethodGet, "/v1/volumes/"+seg, q, nil, &out, nil, &header); err != nil {
		if header.Get(WaitHeader) == WaitBusy {
			return nil, fmt.Errorf("%w: %w", ErrWaitBusy, err)
		}
		return nil, err
	}
	switch header.Get(WaitHeader) {
	case WaitChanged, WaitTimeout:
		return &out, nil
	default:
		return nil, ErrWaitUnsupported
	}
}
