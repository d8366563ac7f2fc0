package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
)

// childEnv makes the test binary run the fakecloud command (run) with its arguments instead
// of the tests: the process the crash tests kill with SIGKILL.
const childEnv = "FAKECLOUD_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// cloudProcess is a fakecloud process on loopback over a data dir.
type cloudProcess struct {
	t    *testing.T
	cmd  *exec.Cmd
	addr string
	c    *admin.Client
}

// startCloud starts the fakecloud command as a child process on addr (a free port when
// empty) and waits until it is ready; args are flags on top of --data-dir and --auth=none.
func startCloud(t *testing.T, dir, addr string, args ...string) *cloudProcess {
	t.Helper()
	if addr == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = ln.Addr().String()
		_ = ln.Close()
	}
	log, err := os.OpenFile(filepath.Join(dir, "fakecloud.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(os.Args[0], append([]string{"--listen=" + addr, "--data-dir=" + filepath.Join(dir, "data"), "--auth=none",
		"--seed=../../examples/seed.yaml", "-v=4"}, args...)...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &cloudProcess{t: t, cmd: cmd, addr: addr}
	t.Cleanup(func() { p.kill() })
	p.c, err = admin.NewClient("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	for range 500 {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "fakecloud.log"))
	t.Fatalf("fakecloud never became ready on %s:\n%s", addr, data)
	return nil
}

// kill sends SIGKILL and reaps the process: no shutdown code runs.
func (p *cloudProcess) kill() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Kill()
	_, _ = p.cmd.Process.Wait()
	p.cmd.ProcessState = &os.ProcessState{}
}

// waitState polls the volume until it is in state want (an explicit wait on state, with a
// generous bound so that a slow machine only waits longer).
func (p *cloudProcess) waitState(id string, want cloud.AttachState) *cloud.Volume {
	p.t.Helper()
	var last *cloud.Volume
	for range 3000 {
		v, err := p.c.GetVolume(context.Background(), id)
		if err == nil {
			last = v
			if v.State == want {
				return v
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.t.Fatalf("volume %s never became %s; last seen %+v", id, want, last)
	return nil
}

// volumeEvents counts the events of one volume by type.
func (p *cloudProcess) volumeEvents(id string) map[string]int {
	p.t.Helper()
	events, err := p.c.ListEvents(context.Background(), 0)
	if err != nil {
		p.t.Fatal(err)
	}
	n := map[string]int{}
	for _, ev := range events {
		if ev.VolumeID == id {
			n[ev.Type]++
		}
	}
	return n
}

// TestKillMidTransition kills the fakecloud process with SIGKILL while a volume is in each
// state, attaching or detaching (plain, slowed or held by a fault rule), attached, or in
// error, and restarts it on the same data dir: the acknowledged transition is not lost (the
// volume is still in it, or past it), completes once (one start and one end event), and the
// slots and quota are right afterwards.
func TestKillMidTransition(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills fakecloud processes")
	}
	tests := []struct {
		name string
		args []string
		// detach: the killed transition is the detach (the attach completes first).
		detach bool
		// rule is a fault rule created before the transition starts.
		rule *cloud.FaultRule
		// after is the state the request answers (default: attaching, or detaching for a
		// detach); end the state after the restart (default: where after leads).
		after, end cloud.AttachState
		// events the volume must have, exactly, once all is over.
		want map[string]int
		held int
	}{
		{name: "attached", args: []string{"--attach-duration=0s"}, after: cloud.StateAttached, end: cloud.StateAttached,
			want: map[string]int{"VolumeAttached": 1}, held: 1},
		{name: "error after a failed detach", args: []string{"--attach-duration=0s", "--detach-duration=0s"}, detach: true,
			rule:  &cloud.FaultRule{Operation: cloud.OperationDetachVolume, Transition: cloud.TransitionFail, Error: cloud.CodeUnavailable},
			after: cloud.StateError, end: cloud.StateError,
			want: map[string]int{"VolumeAttached": 1, "FaultFired": 1, "VolumeDetachFailed": 1}, held: 1},
		{name: "attaching", args: []string{"--attach-duration=1500ms"},
			want: map[string]int{"VolumeAttaching": 1, "VolumeAttached": 1}, held: 1},
		{name: "detaching", args: []string{"--attach-duration=0s", "--detach-duration=1500ms"}, detach: true,
			want: map[string]int{"VolumeAttached": 1, "VolumeDetaching": 1, "VolumeDetached": 1}, held: 0},
		{name: "attaching slowed by a rule", args: []string{"--attach-duration=0s"},
			rule: &cloud.FaultRule{Operation: cloud.OperationAttachVolume, Transition: cloud.TransitionSlow, DurationMS: 1500},
			want: map[string]int{"FaultFired": 1, "VolumeAttaching": 1, "VolumeAttached": 1}, held: 1},
		{name: "detaching held by a stick rule", args: []string{"--attach-duration=0s", "--detach-duration=200ms"}, detach: true,
			rule: &cloud.FaultRule{Operation: cloud.OperationDetachVolume, Transition: cloud.TransitionStick},
			want: map[string]int{"VolumeAttached": 1, "FaultFired": 1, "VolumeDetaching": 1, "TransitionReleased": 1, "VolumeDetached": 1}, held: 0},
		{name: "attaching failed by a rule", args: []string{"--attach-duration=1500ms"},
			rule: &cloud.FaultRule{Operation: cloud.OperationAttachVolume, Transition: cloud.TransitionFail, Error: cloud.CodeInternalError},
			want: map[string]int{"FaultFired": 1, "VolumeAttaching": 1, "VolumeAttachFailed": 1}, held: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			p := startCloud(t, dir, "", tc.args...)
			v, err := p.c.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: "crash", SizeBytes: 1 << 30, Zone: "zone-a"})
			if err != nil {
				t.Fatal(err)
			}
			if tc.detach {
				if att, err := p.c.AttachVolume(ctx, v.ID, "node-a1"); err != nil || att.State != cloud.StateAttached {
					t.Fatalf("attach: %+v, %v", att, err)
				}
			}
			if tc.rule != nil {
				if _, err := p.c.CreateFault(ctx, *tc.rule); err != nil {
					t.Fatal(err)
				}
			}
			var att *cloud.Attachment
			want := cloud.StateAttaching
			if tc.detach {
				att, err = p.c.DetachVolume(ctx, v.ID, "node-a1")
				want = cloud.StateDetaching
			} else {
				att, err = p.c.AttachVolume(ctx, v.ID, "node-a1")
			}
			if tc.after != "" {
				want = tc.after
			}
			if err != nil || att.State != want {
				t.Fatalf("transition: %+v, %v; want %s", att, err, want)
			}
			p.kill()

			p = startCloud(t, dir, p.addr, tc.args...)
			got, err := p.c.GetVolume(ctx, v.ID)
			if err != nil {
				t.Fatal(err)
			}
			// Acknowledged means durable: the restarted cloud has the transition or its end.
			if got.State == cloud.StateDetached && !tc.detach {
				t.Fatalf("after restart: %+v; the acknowledged attach is lost", got)
			}
			end := cloud.StateAttached
			switch {
			case tc.detach:
				end = cloud.StateDetached
			case tc.rule != nil && tc.rule.Transition == cloud.TransitionFail:
				end = cloud.StateError
			}
			if tc.end != "" {
				end = tc.end
			}
			p.waitState(v.ID, end)
			// Another restart changes nothing: nothing is completed twice.
			p.kill()
			p = startCloud(t, dir, p.addr, tc.args...)
			p.waitState(v.ID, end)
			events := p.volumeEvents(v.ID)
			delete(events, "VolumeCreated")
			delete(events, "FaultCreated")
			if fmt.Sprint(events) != fmt.Sprint(tc.want) {
				t.Errorf("events of %s: %v, want %v", v.ID, events, tc.want)
			}
			c, err := p.c.GetCapacity(ctx, "node-a1")
			if err != nil {
				t.Fatal(err)
			}
			q, err := p.c.GetQuotas(ctx)
			if err != nil {
				t.Fatal(err)
			}
			failed := 0
			if end == cloud.StateError && tc.held == 1 {
				failed = 1 // a failed detach keeps its slot
			}
			if c.Attached != tc.held || c.Attaching+c.Detaching != 0 || c.Failed != failed || q.Attachments.Used != int64(tc.held) {
				t.Errorf("capacity %+v, quota used %d; want %d held, %d failed, none in transition", c, q.Attachments.Used, tc.held, failed)
			}
			if t.Failed() {
				data, _ := os.ReadFile(filepath.Join(dir, "fakecloud.log"))
				t.Logf("fakecloud log:\n%s", strings.TrimSpace(string(data)))
			}
		})
	}
}
