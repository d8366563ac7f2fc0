package matrix

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fakecloud/fakecloud-csi/tests/e2e/localcluster"
)

// The kubelet restart check (issue 27): the cloud changes node-1's count, node-1's driver
// process restarts alone (its registration socket stays served, as when only the driver
// container of the pod restarts: the kubelet keeps the registration and CSINode its entry),
// so that the driver answers the new count (a static count is read from the cloud once, at
// start), then node-1's kubelet restarts in place: the new kubelet registers the driver with a
// count that differs from CSINode's entry, which was not removed first. The kubelet's
// RegisterPlugin calls InstallCSIDriver, which updates the entry in place; an API server whose
// MutableCSINodeAllocatableCount gate is off refuses that as immutable, and the kubelet then
// unregisters the driver (UninstallCSIDriver removes the entry) and tells the registrar the
// registration failed.

// kubeletRestartWindow bounds the wait for node-1's CSINode to list the driver at the new
// count after the kubelet restart began: the old kubelet's stop (SIGTERM, SIGKILL after 10 s),
// the new one's start and first plugin-watcher pass, the registration's CSINode update (4 tries
// in about 1.6 s, nodeinfomanager's updateBackoff) and the plugin manager's 1 s reconcile take
// seconds; a minute, as reregWindow, covers the loaded 2-core machine.
const kubeletRestartWindow = time.Minute

// pluginWatcherSettle is three passes of the kubelet's plugin manager reconciler (its
// loopSleepDuration, 1 s): a registration socket served again by an earlier check (the
// re-registration check returns once the new socket is served) is unregistered and
// registered again within it, so that it does not mix with this check's events.
const pluginWatcherSettle = 3 * time.Second

// nodeReadyWindow bounds the wait for the restarted kubelet's Ready heartbeat.
const nodeReadyWindow = 2 * time.Minute

// notHere is why the kubeconfig mode does not measure the kubelet restart.
const notHere = "the cluster was not started by the harness: it cannot restart a kubelet in place"

// kubeletRestarter restarts a node's kubelet in place (same root dir, flags and Node name),
// and its driver process alone: only a cluster the harness started can (the local cluster's
// hollow kubelets and plugin processes).
type kubeletRestarter interface {
	// restartKubelet returns once the new kubelet process runs.
	restartKubelet(ctx context.Context, node string) error
	// restartDriver restarts node's driver process, its registration socket kept served, and
	// returns once the new one is ready.
	restartDriver(ctx context.Context, node string) error
}

// restartKubelet restarts node's hollow kubelet from the binary it runs now.
func (l localPlugins) restartKubelet(ctx context.Context, node string) error {
	return l.c.RestartKubelet(ctx, node, "")
}

// restartDriver restarts node's plugin process without re-registration.
func (l localPlugins) restartDriver(ctx context.Context, node string) error {
	return l.c.RestartNodePlugin(ctx, node, localcluster.NodePluginRestart{})
}

// kubeletRestart takes one more of node-1's slots out of band, restarts node-1's driver alone
// until it answers the new count, restarts node-1's kubelet in place and measures what CSINode lists (KubeletRestart), then gives the slot back and puts
// the driver back at its count when it is not (a plugin re-registration). Without a
// restarter it records the check as not measured.
func (r *cellRun) kubeletRestart(ctx context.Context) error {
	if r.kubelets == nil {
		r.row.KubeletRestart = &KubeletRestart{NotMeasured: notHere}
		r.logf("kubelet restart: not measured (%s)", notHere)
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(r.settle()):
	}
	before, err := r.countAbove1(ctx)
	if err != nil {
		return err
	}
	in, err := r.cloud.GetInstance(ctx, r.target)
	if err != nil {
		return err
	}
	res := &KubeletRestart{CountBefore: before, CountNew: before - 1, WindowSeconds: r.restartWindow().Seconds()}
	r.row.KubeletRestart = res
	if err := r.setOOB(ctx, in.OutOfBandSlots+1); err != nil {
		return err
	}
	err = r.driverAnswers(ctx, res.CountNew)
	if err == nil {
		err = r.measureKubeletRestart(ctx, res)
	}
	return errors.Join(err, r.putBackKubeletRestart(ctx, in.OutOfBandSlots, res))
}

// settle is pluginWatcherSettle unless a test set cellRun.kubeletWindow (then none).
func (r *cellRun) settle() time.Duration {
	if r.kubeletWindow > 0 {
		return 0
	}
	return pluginWatcherSettle
}

// restartWindow is kubeletRestartWindow unless a test set cellRun.kubeletWindow.
func (r *cellRun) restartWindow() time.Duration {
	if r.kubeletWindow > 0 {
		return r.kubeletWindow
	}
	return kubeletRestartWindow
}

// countAbove1 waits up to a minute for node-1's CSINode to list the driver with a count above
// 1 (the check takes one slot) and returns it.
func (r *cellRun) countAbove1(ctx context.Context) (int32, error) {
	var c int32
	if _, ok := waitFor(ctx, time.Minute, func() bool {
		var listed bool
		c, listed, _ = r.count(ctx)
		return listed && c > 1
	}); !ok {
		return 0, fmt.Errorf("CSINode %s lists no count above 1 (seen %d)", r.target, c)
	}
	return c, nil
}

// driverAnswers restarts node-1's driver process alone and waits up to followWindow for it
// to answer want (/debug/capacity's "reported": a static count is read at start, the capacity
// policy's within a lookup interval).
func (r *cellRun) driverAnswers(ctx context.Context, want int32) error {
	if err := r.kubelets.restartDriver(ctx, r.target); err != nil {
		return err
	}
	var d struct {
		Reported int64 `json:"reported"`
	}
	var last error
	if _, ok := waitFor(ctx, followWindow, func() bool {
		last = r.getJSON(ctx, "/debug/capacity", &d)
		return last == nil && d.Reported == int64(want)
	}); !ok {
		return fmt.Errorf("the restarted driver of %s does not answer count %d within %s (reported %d; last error %v)", r.target, want, followWindow, d.Reported, last) //nolint:errorlint // the wait is the failure; the last read error, often nil, is context
	}
	return nil
}

// measureKubeletRestart restarts node-1's kubelet, polls its CSINode every 100 ms until it
// lists the driver at res.CountNew or the window passed, records it in res, and waits for the
// new kubelet's Ready heartbeat.
func (r *cellRun) measureKubeletRestart(ctx context.Context, res *KubeletRestart) error {
	res.CountAtRestart, _, _ = r.count(ctx)
	w := r.watchCSINode(ctx, res.CountNew)
	start := time.Now()
	err := r.kubelets.restartKubelet(ctx, r.target)
	if err == nil {
		waitFor(ctx, r.restartWindow(), func() bool { return w.now().settled(res.CountNew) })
	}
	res.record(w.end(), start)
	r.logf("kubelet restart with count %d → %d (%d at the restart): %s", res.CountBefore, res.CountNew, res.CountAtRestart, kubeletRestartText(res))
	if err != nil {
		return err
	}
	return r.waitNodeReady(ctx, start)
}

// waitNodeReady waits up to nodeReadyWindow for node-1's Ready condition to be true with a
// heartbeat of a kubelet started at or after since (heartbeats have a 1 s resolution).
func (r *cellRun) waitNodeReady(ctx context.Context, since time.Time) error {
	since = since.Truncate(time.Second)
	if _, ok := waitFor(ctx, nodeReadyWindow, func() bool {
		n, err := r.cs.CoreV1().Nodes().Get(ctx, r.target, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue && !c.LastHeartbeatTime.Time.Before(since)
			}
		}
		return false
	}); !ok {
		return fmt.Errorf("node %s not Ready with a heartbeat of the restarted kubelet within %s", r.target, nodeReadyWindow)
	}
	return nil
}

// putBackKubeletRestart gives node-1 its out-of-band slots oob back and waits (followWindow)
// for CSINode to list the driver at res.CountBefore again; when it does not (the driver not
// listed, or a count the kubelet cannot change in place), it restarts node-1's plugin with
// re-registration (the driver reads the cloud again; the entry is removed before it is added
// with the driver's count), as a node-driver-registrar's exit after a refused registration
// and its container's restart do, and waits reregWindow.
func (r *cellRun) putBackKubeletRestart(ctx context.Context, oob int, res *KubeletRestart) error {
	if err := r.setOOB(ctx, oob); err != nil {
		return fmt.Errorf("put back %s's out-of-band slots (%d): %w", r.target, oob, err)
	}
	at := func() bool { c, listed, _ := r.count(ctx); return listed && c == res.CountBefore }
	if _, listed, _ := r.count(ctx); listed {
		if _, ok := waitFor(ctx, followWindow, at); ok {
			return nil
		}
	}
	res.PutBackByPluginRestart = true
	start := time.Now()
	if err := r.plugins.restart(ctx, r.target); err != nil {
		return fmt.Errorf("put back the driver: %w", err)
	}
	if _, ok := waitFor(ctx, reregWindow, at); !ok {
		c, listed, _ := r.count(ctx)
		return fmt.Errorf("put back the driver: after a plugin re-registration CSINode %s lists it %v with count %d, want %d", r.target, listed, c, res.CountBefore)
	}
	res.PutBackSeconds = seconds(time.Since(start))
	r.logf("kubelet restart: the driver put back at count %d by a plugin re-registration in %s", res.CountBefore, secs(res.PutBackSeconds))
	return nil
}

// record fills k from what the CSINode watch saw after the restart began at start.
func (k *KubeletRestart) record(s csinodeSeen, start time.Time) {
	k.Vanished = !s.goneAt.IsZero()
	if k.Vanished {
		k.VanishedAfterSeconds = seconds(s.goneAt.Sub(start))
		if !s.backAt.IsZero() {
			k.GapSeconds = seconds(s.backAt.Sub(s.goneAt))
			back := s.countBack
			k.CountBack = &back
		}
	}
	if !s.wantAt.IsZero() {
		k.NewCountSeconds = seconds(s.wantAt.Sub(start))
	}
	if s.lastListed {
		end := s.last
		k.CountEnd = &end
	}
}

// csinodeSeen is what polling node-1's CSINode saw: when the driver first went, when it was
// first listed again and with which count, when it was first listed at the wanted count, and
// the last sample.
type csinodeSeen struct {
	goneAt, backAt, wantAt time.Time
	countBack, last        int32
	lastListed, sampled    bool
}

// sample adds one poll's answer (count, listed) at now; want is the count whose first
// sighting is recorded.
func (s *csinodeSeen) sample(count int32, listed bool, want int32, now time.Time) {
	switch {
	case !listed && s.goneAt.IsZero():
		s.goneAt = now
	case listed && !s.goneAt.IsZero() && s.backAt.IsZero():
		s.backAt, s.countBack = now, count
	}
	if listed && count == want && s.wantAt.IsZero() {
		s.wantAt = now
	}
	s.last, s.lastListed, s.sampled = count, listed, true
}

// settled: the last sample listed the driver at want.
func (s csinodeSeen) settled(want int32) bool { return s.sampled && s.lastListed && s.last == want }

// csinodeWatch polls node-1's CSINode every 100 ms in the background until end.
type csinodeWatch struct {
	want       int32
	mu         sync.Mutex
	seen       csinodeSeen
	stop, done chan struct{}
}

// watchCSINode starts polling node-1's CSINode; want is the count whose first sighting is
// recorded (the re-registration check, which wants none, passes -1).
func (r *cellRun) watchCSINode(ctx context.Context, want int32) *csinodeWatch {
	w := &csinodeWatch{want: want, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			c, listed, _ := r.count(ctx)
			w.mu.Lock()
			w.seen.sample(c, listed, w.want, time.Now())
			w.mu.Unlock()
			select {
			case <-w.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return w
}

// now is what the watch saw so far.
func (w *csinodeWatch) now() csinodeSeen {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}

// end stops the polling and returns what it saw.
func (w *csinodeWatch) end() csinodeSeen {
	close(w.stop)
	<-w.done
	return w.now()
}
