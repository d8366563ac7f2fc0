package matrix

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// The CSINode poll records the first gap, the count the driver came back with and the first
// sighting of the wanted count; settled looks at the last sample only.
func TestCSINodeSeen(t *testing.T) {
	type smp struct {
		count  int32
		listed bool
	}
	t0 := time.Date(2026, 12, 6, 19, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name               string
		samples            []smp
		wantGone, wantBack int // sample index, -1: none
		wantCountBack      int32
		wantAt             int
		wantSettled        bool
		wantLast           int32
		wantLastListed     bool
		want               int32
	}{
		{name: "changed in place", want: 2, samples: []smp{{3, true}, {3, true}, {2, true}},
			wantGone: -1, wantBack: -1, wantAt: 2, wantSettled: true, wantLast: 2, wantLastListed: true},
		{name: "gone and back with the new count", want: 2, samples: []smp{{3, true}, {0, false}, {0, false}, {2, true}},
			wantGone: 1, wantBack: 3, wantCountBack: 2, wantAt: 3, wantSettled: true, wantLast: 2, wantLastListed: true},
		{name: "gone for good", want: 2, samples: []smp{{3, true}, {0, false}, {0, false}},
			wantGone: 1, wantBack: -1, wantAt: -1, wantLast: 0},
		{name: "second gap not counted", want: 2, samples: []smp{{0, false}, {3, true}, {0, false}, {3, true}},
			wantGone: 0, wantBack: 1, wantCountBack: 3, wantAt: -1, wantLast: 3, wantLastListed: true},
		{name: "new count, then gone", want: 2, samples: []smp{{2, true}, {0, false}},
			wantGone: 1, wantBack: -1, wantAt: 0, wantLast: 0},
		{name: "no sample", want: 2, wantGone: -1, wantBack: -1, wantAt: -1},
	} {
		var s csinodeSeen
		at := func(i int) time.Time {
			if i < 0 {
				return time.Time{}
			}
			return t0.Add(time.Duration(i) * 100 * time.Millisecond)
		}
		for i, x := range tc.samples {
			s.sample(x.count, x.listed, tc.want, at(i))
		}
		if !s.goneAt.Equal(at(tc.wantGone)) || !s.backAt.Equal(at(tc.wantBack)) || !s.wantAt.Equal(at(tc.wantAt)) {
			t.Errorf("%s: gone %v back %v want %v; want samples %d, %d, %d", tc.name, s.goneAt, s.backAt, s.wantAt, tc.wantGone, tc.wantBack, tc.wantAt)
		}
		if s.countBack != tc.wantCountBack || s.last != tc.wantLast || s.lastListed != tc.wantLastListed {
			t.Errorf("%s: count back %d, last %d listed %v; want %d, %d, %v", tc.name, s.countBack, s.last, s.lastListed, tc.wantCountBack, tc.wantLast, tc.wantLastListed)
		}
		if got := s.settled(tc.want); got != tc.wantSettled {
			t.Errorf("%s: settled %v, want %v", tc.name, got, tc.wantSettled)
		}
	}
}

// record turns the poll's times into seconds from the restart.
func TestKubeletRestartRecord(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 19, 0, 0, 0, time.UTC)
	sec := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	for _, tc := range []struct {
		name string
		seen csinodeSeen
		want KubeletRestart
	}{
		{name: "never gone, new count", seen: csinodeSeen{wantAt: sec(4), last: 2, lastListed: true, sampled: true},
			want: KubeletRestart{NewCountSeconds: ptr(4.0), CountEnd: ptr[int32](2)}},
		{name: "gone and back", seen: csinodeSeen{goneAt: sec(3), backAt: sec(4.5), countBack: 2, wantAt: sec(4.5), last: 2, lastListed: true, sampled: true},
			want: KubeletRestart{Vanished: true, VanishedAfterSeconds: ptr(3.0), GapSeconds: ptr(1.5), CountBack: ptr[int32](2), NewCountSeconds: ptr(4.5), CountEnd: ptr[int32](2)}},
		{name: "gone for good", seen: csinodeSeen{goneAt: sec(5), sampled: true},
			want: KubeletRestart{Vanished: true, VanishedAfterSeconds: ptr(5.0)}},
	} {
		var got KubeletRestart
		got.record(tc.seen, t0)
		if g, w := kubeletRestartText(&got), kubeletRestartText(&tc.want); g != w || got.Vanished != tc.want.Vanished {
			t.Errorf("%s: recorded %q (vanished %v), want %q (%v)", tc.name, g, got.Vanished, w, tc.want.Vanished)
		}
	}
}

// The column says what happened in words, never a pass for a check that did not run; every
// table row has the header's columns.
func TestKubeletRestartText(t *testing.T) {
	for _, tc := range []struct {
		name string
		k    *KubeletRestart
		want string
	}{
		{name: "row from before the check", k: nil, want: "—"},
		{name: "kubeconfig mode", k: &KubeletRestart{NotMeasured: notHere}, want: "not measured: " + notHere},
		{name: "changed in place", k: &KubeletRestart{CountBefore: 3, CountNew: 2, CountAtRestart: 3, NewCountSeconds: ptr(4.2), CountEnd: ptr[int32](2), WindowSeconds: 60},
			want: "count 3 → 2: never gone, new count 4.2 s after the restart"},
		{name: "refused, gone for good, put back", k: &KubeletRestart{CountBefore: 3, CountNew: 2, CountAtRestart: 3, Vanished: true, VanishedAfterSeconds: ptr(3.4),
			WindowSeconds: 60, PutBackByPluginRestart: true, PutBackSeconds: ptr(1.1)},
			want: "count 3 → 2: gone 3.4 s after the restart, not back within 60 s, not listed at the end; put back by a plugin re-registration (1.1 s)"},
		{name: "gone and back with the new count", k: &KubeletRestart{CountBefore: 3, CountNew: 2, CountAtRestart: 3, Vanished: true, VanishedAfterSeconds: ptr(3.0),
			GapSeconds: ptr(1.5), CountBack: ptr[int32](2), NewCountSeconds: ptr(4.5), CountEnd: ptr[int32](2), WindowSeconds: 60},
			want: "count 3 → 2: gone 3.0 s after the restart for 1.5 s, back with 2, new count 4.5 s after the restart"},
		{name: "refreshed before the restart, stuck at another", k: &KubeletRestart{CountBefore: 3, CountNew: 2, CountAtRestart: 2, CountEnd: ptr[int32](3), WindowSeconds: 60},
			want: "count 3 → 2 (2 at the restart): never gone, ended at 3 (not the new count) after 60 s"},
	} {
		if got := kubeletRestartText(tc.k); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
		c := cell("k")
		table := Table([]Cell{c, cell("planned")}, []Row{{Cell: c, Date: time.Now(), KubeletRestart: tc.k, Outcome: "as expected"}})
		lines := strings.Split(strings.TrimSpace(table), "\n")
		if len(lines) != 4 {
			t.Fatalf("%s: table has %d lines:\n%s", tc.name, len(lines), table)
		}
		if !strings.Contains(lines[2], "| "+tc.want+" | as expected |") {
			t.Errorf("%s: row lacks the column before the outcome: %s", tc.name, lines[2])
		}
		for _, l := range lines[1:] {
			if got, want := strings.Count(l, "|"), strings.Count(lines[0], "|"); got != want {
				t.Errorf("%s: %d bars in %q, the header has %d", tc.name, got, l, want)
			}
		}
	}
}

// fakeNode is node "a" of a fake cluster: its CSINode lists the driver with the count its
// kubelet last registered; the driver answers the cloud's count (4 slots minus the
// out-of-band ones) read at its start (answer); onKubeletRestart is what the new kubelet does
// with the entry; a plugin re-registration restarts the driver and replaces the entry.
type fakeNode struct {
	t                *testing.T
	cs               *fake.Clientset
	fc               *fakeCloud
	onKubeletRestart func(f *fakeNode)
	mu               sync.Mutex
	answer           int32
	kubelets         int
	drivers          int
	plugins          int
}

// setCount makes the CSINode list the driver with count (nil: not listed).
func (f *fakeNode) setCount(count *int32) {
	cn := csiNode("a", count)
	if _, err := f.cs.StorageV1().CSINodes().Update(context.Background(), cn, metav1.UpdateOptions{}); err != nil {
		f.t.Error(err)
	}
}

func (f *fakeNode) truth() *int32 { return ptr(int32(4 - f.fc.oob())) }

func (f *fakeNode) restartKubelet(ctx context.Context, node string) error {
	f.mu.Lock()
	f.kubelets++
	f.mu.Unlock()
	n := checkNode(node, "zone-a", "v1.35.4", false)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
	if _, err := f.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		return err
	}
	f.onKubeletRestart(f)
	return nil
}

func (f *fakeNode) restart(context.Context, string) error {
	f.mu.Lock()
	f.plugins++
	f.answer = *f.truth()
	f.mu.Unlock()
	f.setCount(f.truth())
	return nil
}

func (f *fakeNode) restartDriver(context.Context, string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drivers++
	f.answer = *f.truth()
	return nil
}

func (f *fakeNode) getJSON(_ context.Context, _, path string, v any) error {
	if path != "/debug/capacity" {
		return errors.New("no such debug endpoint")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return json.Unmarshal(fmt.Appendf(nil, `{"reported":%d}`, f.answer), v)
}

// The check on a fake node: the kubelet changes the entry in place (API server gate on), or
// the API server refuses that and the kubelet removes the entry (gate off), or the harness
// cannot restart kubelets. Each time the cloud and the entry are as found afterwards.
func TestKubeletRestartCheck(t *testing.T) {
	for _, tc := range []struct {
		name             string
		noRestarter      bool
		onKubeletRestart func(f *fakeNode)
		follows          bool // the count follows a cloud change (a period set, gates on)
		want             string
		wantPlugins      int
	}{
		{name: "gate on: changed in place", onKubeletRestart: func(f *fakeNode) { f.setCount(ptr(f.answer)) }, follows: true,
			want: "count 3 → 2: never gone, new count"},
		{name: "gate off: refused, unregistered", onKubeletRestart: func(f *fakeNode) { f.setCount(nil) },
			want: "count 3 → 2: gone", wantPlugins: 1},
		{name: "kubeconfig mode", noRestarter: true, want: "not measured: " + notHere},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := &fakeCloud{in: cloud.Instance{ID: "a", Zone: "zone-a", AttachLimit: 4, OutOfBandSlots: 1}}
			cs := fake.NewClientset(checkNode("a", "zone-a", "v1.35.4", false), csiNode("a", ptr[int32](3)))
			f := &fakeNode{t: t, cs: cs, fc: fc, onKubeletRestart: tc.onKubeletRestart, answer: 3}
			if tc.follows {
				// The restarted kubelet's refresh (not the old one's: the restart must see the
				// change). afterPatch runs under the fake cloud's lock: read the slots directly.
				fc.afterPatch = func() {
					f.mu.Lock()
					restarted := f.kubelets > 0
					f.mu.Unlock()
					if restarted {
						f.setCount(ptr(int32(4 - fc.in.OutOfBandSlots)))
					}
				}
			}
			var out bytes.Buffer
			r := &cellRun{o: Options{Out: &out}, cs: cs, cloud: startFakeCloud(t, fc), plugins: f, target: "a",
				row: &Row{Cell: cell("k")}, kubeletWindow: 300 * time.Millisecond}
			if !tc.noRestarter {
				r.kubelets = f
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := r.kubeletRestart(ctx); err != nil {
				t.Fatalf("kubeletRestart: %v\n%s", err, out.String())
			}
			if got := kubeletRestartText(r.row.KubeletRestart); !strings.HasPrefix(got, tc.want) {
				t.Errorf("recorded %q, want it to start with %q", got, tc.want)
			}
			if k := r.row.KubeletRestart; k.PutBackByPluginRestart != (tc.wantPlugins > 0) || f.plugins != tc.wantPlugins {
				t.Errorf("put back by a plugin restart %v after %d plugin restarts, want %d", k.PutBackByPluginRestart, f.plugins, tc.wantPlugins)
			}
			if want := map[bool]int{true: 0, false: 1}[tc.noRestarter]; f.kubelets != want || f.drivers != want {
				t.Errorf("%d kubelet and %d driver restarts, want %d each", f.kubelets, f.drivers, want)
			}
			if c, listed, _ := r.count(ctx); fc.oob() != 1 || !listed || c != 3 {
				t.Errorf("after the check: out-of-band slots %d, CSINode count %d (listed %v); want 1 and 3 as found", fc.oob(), c, listed)
			}
		})
	}
}
