package csi

import (
	"context"
	"errors"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// TestRealCloudHeldTransitionsHoldSlots: SetAsync, FailTransitions and Complete drive the real cloud's
// transitions, and its slot counts follow docs/attach.md: a volume holds its slot from the
// start of attaching to the end of detaching, a failed detach keeps it, a failed attach gives
// it back; TransitionsStarted counts each started transition once, a joining repeat none.
func TestRealCloudHeldTransitionsHoldSlots(t *testing.T) {
	ctx := context.Background()
	type counts struct{ attached, attaching, detaching, failed int }
	f := newRealCloud(t)
	f.AddInstance("i-1", realCloudZone, 4, 0)
	f.SetAsync(true)
	var vols []string
	for _, name := range []string{"a", "b"} {
		v, err := f.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: name, SizeBytes: 1})
		if err != nil {
			t.Fatal(err)
		}
		vols = append(vols, v.ID)
	}
	attach := func(id string) error { _, err := f.AttachVolume(ctx, id, "i-1"); return err }
	detach := func(id string) error { _, err := f.DetachVolume(ctx, id, "i-1"); return err }
	steps := []struct {
		name string
		do   func() error
		want counts
	}{
		{"attaching", func() error { return errors.Join(attach(vols[0]), attach(vols[1]), attach(vols[1])) }, counts{attached: 2, attaching: 2}},
		{"attached", func() error {
			if n := f.Complete(); n != 2 {
				t.Errorf("Complete ended %d transitions, want 2", n)
			}
			return nil
		}, counts{attached: 2}},
		{"detaching", func() error { return detach(vols[0]) }, counts{attached: 2, detaching: 1}},
		{"detach failed", func() error {
			f.Complete()
			f.FailTransitions(cloud.CodeInternalError)
			if err := detach(vols[1]); err != nil {
				return err
			}
			f.Complete()
			return nil
		}, counts{attached: 1, failed: 1}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		c, err := f.GetCapacity(ctx, "i-1")
		if err != nil {
			t.Fatal(err)
		}
		if got := (counts{c.Attached, c.Attaching, c.Detaching, c.Failed}); got != s.want {
			t.Errorf("%s: capacity counts %+v, want %+v", s.name, got, s.want)
		}
	}
	if got := f.TransitionsStarted(); got != 4 {
		t.Errorf("%d transitions started, want 4 (2 attaches, 2 detaches)", got)
	}
}

// TestRealCloudFailNext: a cloud code on a faultable operation is the cloud's answer through a fault
// rule, once; other errors come from the wrapper; Calls counts every call.
func TestRealCloudFailNext(t *testing.T) {
	ctx := context.Background()
	f := newRealCloud(t)
	f.AddInstance("i-1", realCloudZone, 4, 0)
	f.FailNext(cloud.OperationGetInstance, cloud.NewError(cloud.CodeThrottled, "slow down"))
	if _, err := f.GetInstance(ctx, "i-1"); cloud.CodeOf(err) != cloud.CodeThrottled {
		t.Fatalf("GetInstance: %v, want Throttled", err)
	}
	if rules, err := f.Admin().ListFaults(ctx); err != nil || len(rules) != 1 || rules[0].Fired != 1 {
		t.Fatalf("fault rules %+v, %v: want the one that answered", rules, err)
	}
	if _, err := f.GetInstance(ctx, "i-1"); err != nil {
		t.Fatalf("GetInstance after the injected failure: %v", err)
	}
	f.FailNext(cloudOpWaitVolume, cloud.ErrWaitUnsupported)
	if _, err := f.WaitVolume(ctx, "vol-x", cloud.VolumeWait{For: cloud.StateAttached, InstanceID: "i-1"}); !errors.Is(err, cloud.ErrWaitUnsupported) {
		t.Fatalf("WaitVolume: %v, want the injected sentinel", err)
	}
	if got := f.Calls(cloud.OperationGetInstance); got != 2 {
		t.Errorf("GetInstance calls %d, want 2", got)
	}
}
