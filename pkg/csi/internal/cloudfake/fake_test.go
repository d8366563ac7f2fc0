package cloudfake_test

import (
	"context"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/internal/cloudfake"
)

// TestAsyncCapacity checks the slot counts of the asynchronous fake, which the synchronous
// contract (cloudtest) does not reach: as in the real cloud (docs/attach.md), a volume holds
// its slot from the start of attaching to the end of detaching, a failed detach keeps it and
// a failed attach gives it back, and Attaching, Detaching and Failed say how many are in
// those states.
func TestAsyncCapacity(t *testing.T) {
	ctx := context.Background()
	type counts struct{ attached, attaching, detaching, failed int }
	f := cloudfake.New()
	f.AddInstance("i-1", cloudfake.DefaultZone, 4, 0)
	f.SetAsync(true)
	var vols []string
	for _, name := range []string{"a", "b"} {
		v, err := f.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: name, SizeBytes: 1})
		if err != nil {
			t.Fatal(err)
		}
		vols = append(vols, v.ID)
	}
	steps := []struct {
		name string
		do   func() error
		want counts
	}{
		{"attaching", func() error {
			for _, id := range vols {
				if _, err := f.AttachVolume(ctx, id, "i-1"); err != nil {
					return err
				}
			}
			return nil
		}, counts{attached: 2, attaching: 2}},
		{"attached", func() error { f.Complete(""); return nil }, counts{attached: 2}},
		{"detaching", func() error { _, err := f.DetachVolume(ctx, vols[0], "i-1"); return err }, counts{attached: 2, detaching: 1}},
		{"detach failed", func() error { f.Complete(cloud.CodeInternalError); return nil }, counts{attached: 2, failed: 1}},
		{"attach failed", func() error {
			if _, err := f.DetachVolume(ctx, vols[1], "i-1"); err != nil {
				return err
			}
			f.Complete("")
			if _, err := f.AttachVolume(ctx, vols[1], "i-1"); err != nil {
				return err
			}
			f.Complete(cloud.CodeInternalError)
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
			t.Errorf("%s: capacity counts %+v, expected %+v", s.name, got, s.want)
		}
	}
}
