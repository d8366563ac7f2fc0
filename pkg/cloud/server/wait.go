package server

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/fakecloud/fakecloud-csi/internal/fieldnames"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// DefaultMaxWaits is how many waits of GET /v1/volumes/{id}?waitFor= are open at once unless
// Config.MaxWaits says otherwise, with the default connection bound: half the connections
// served at once (Config.MaxConnections, at least 1), so waiting callers can never hold
// every connection. A wait beyond it is answered 429 Throttled at once, with X-Wait: busy.
const DefaultMaxWaits = DefaultMaxConnections / 2

// volumeWait is a validated wait: while the volume is want's transient state (attaching
// for attached, detaching for detached) bound to instanceID, for at most timeout.
type volumeWait struct {
	want       cloud.AttachState
	instanceID string
	timeout    time.Duration
}

// waiting reports whether v is still in the transition w waits for the end of.
func (w *volumeWait) waiting(v *cloud.Volume) bool {
	from := cloud.StateAttaching
	if w.want == cloud.StateDetached {
		from = cloud.StateDetaching
	}
	return v.State == from && v.AttachedTo == w.instanceID
}

// parseVolumeWait reads the query of GET /v1/volumes/{id}: nil without waitFor (a plain
// read). Every parameter is checked before anything waits or reads: a waitFor other than
// attached or detached, a missing or malformed instanceId, a timeoutMs that is not a whole
// number in [0, cloud.MaxWaitMS], or instanceId or timeoutMs without waitFor are 400
// InvalidArgument naming it. An unknown parameter, or one given twice, the route refused
// before (routeOpts.query: waitFor, instanceId and timeoutMs).
func parseVolumeWait(r *http.Request) (*volumeWait, error) {
	// url.ParseQuery, not URL.Query: Query drops a pair with a semicolon without a word, so
	// "waitFor=attached;instanceId=x" read as a plain GET and "timeoutMs=5;x" as the default.
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "the query %s does not parse (separate parameters with &, not ;): %v",
			cloud.Quote(r.URL.RawQuery), err)
	}
	if len(q) == 0 {
		return nil, nil
	}
	if !q.Has("waitFor") {
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "instanceId and timeoutMs go with waitFor=attached or waitFor=detached")
	}
	w := &volumeWait{timeout: cloud.DefaultWaitMS * time.Millisecond}
	switch v := q.Get("waitFor"); v {
	case string(cloud.StateAttached), string(cloud.StateDetached):
		w.want = cloud.AttachState(v)
	default:
		msg := "waitFor must be attached or detached, got " + cloud.Quote(v)
		if s := fieldnames.Closest(v, []string{string(cloud.StateAttached), string(cloud.StateDetached)}); s != "" {
			msg += "; did you mean " + strconv.Quote(s) + "?"
		}
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "%s", msg)
	}
	if !q.Has("instanceId") {
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "waitFor needs instanceId, the instance whose attach or detach to wait for")
	}
	w.instanceID = q.Get("instanceId")
	if err := cloud.CheckID("instanceId", w.instanceID); err != nil {
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "%v", err)
	}
	if q.Has("timeoutMs") {
		v := q.Get("timeoutMs")
		ms, err := strconv.Atoi(v)
		if err != nil || ms < 0 || ms > cloud.MaxWaitMS {
			return nil, cloud.NewError(cloud.CodeInvalidArgument, "timeoutMs must be a whole number of milliseconds in [0, %d], got %s", cloud.MaxWaitMS, cloud.Quote(v))
		}
		w.timeout = time.Duration(ms) * time.Millisecond
	}
	return w, nil
}

// waitVolume answers a wait: the volume as soon as it is no longer in the transition w waits
// for the end of (X-Wait: changed; it may be so at once), or as it is when w's timeout is
// over (X-Wait: timeout; the caller asks again). A volume deleted meanwhile is 404
// VolumeNotFound, as a read of it would be. The wake-up is the store's (WatchVolume): each
// commit that changes the volume's attachment wakes the wait, which reads the volume again.
// At most cap(s.waits) waits are open at once: one more is 429 Throttled with X-Wait: busy,
// at once. A caller that leaves, or the server's shutdown, ends the wait (Unavailable).
func (s *Server) waitVolume(r *http.Request, id string, w *volumeWait) (*reply, error) {
	rep := &reply{route: "waitVolume", header: http.Header{}}
	select {
	case s.waits <- struct{}{}:
		defer func() { <-s.waits }()
	default:
		rep.header.Set(cloud.WaitHeader, cloud.WaitBusy)
		return rep, cloud.NewError(cloud.CodeThrottled, "%d waits for an attach or detach are open, the most this cloud holds at once; retry later, or read the volume without waitFor", cap(s.waits))
	}
	timer := time.NewTimer(w.timeout)
	defer timer.Stop()
	for {
		changed, stop := s.store.WatchVolume(id)
		v, err := s.store.GetVolume(id)
		if err != nil {
			stop()
			return rep, err
		}
		outcome := ""
		if !w.waiting(v) {
			outcome = cloud.WaitChanged
		} else {
			select {
			case <-changed:
			case <-timer.C:
				outcome = cloud.WaitTimeout
			case <-r.Context().Done():
				stop()
				return rep, cloud.NewError(cloud.CodeUnavailable, "wait for volume %s interrupted: %v", id, r.Context().Err())
			}
		}
		stop()
		if outcome != "" {
			s.volumeHealth(s.faults.Health(), v)
			rep.status, rep.body, rep.rev = http.StatusOK, v, v.Revision
			rep.header.Set(cloud.WaitHeader, outcome)
			return rep, nil
		}
	}
}
