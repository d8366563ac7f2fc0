package store_test

import (
	"strings"
	"testing"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
)

// TestMessagesCountInTheSingular: a count of one is worded in the singular in what the
// cloud answers and records (issue 26, "the first hour": "1 slots", "1 instance types").
func TestMessagesCountInTheSingular(t *testing.T) {
	s, err := store.Open("", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	st := store.State{
		InstanceTypes: []cloud.InstanceType{{Name: "tiny", MaxAttachments: 2}},
		Instances:     []store.SeedInstance{{CreateInstanceRequest: cloud.CreateInstanceRequest{ID: "n", Zone: "z", InstanceType: "tiny", OutOfBandSlots: 1}}},
		Quotas:        store.Limits{Attachments: 10, Volumes: 10, CapacityBytes: 1 << 30},
	}
	if _, err := s.Reset(st); err != nil {
		t.Fatal(err)
	}
	events, _, err := s.Events(0)
	if err != nil || len(events) == 0 {
		t.Fatalf("events %v, %v", events, err)
	}
	if got, want := events[len(events)-1].Detail, "1 instance type, 1 instance"; got != want {
		t.Errorf("the reset's event detail is %q, want %q", got, want)
	}
	var ids []string
	for _, name := range []string{"a", "b"} {
		v, err := s.CreateVolume(cloud.CreateVolumeRequest{Name: name, SizeBytes: 1, Zone: "z"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v.ID)
	}
	if _, err := s.Attach(ids[0], "n", nil, nil); err != nil {
		t.Fatal(err)
	}
	_, err = s.Attach(ids[1], "n", nil, nil)
	want := `instance "n": 1 slot held by volumes + 1 out-of-band slot of limit 2`
	if cloud.CodeOf(err) != cloud.CodeAttachmentLimitExceeded || !strings.Contains(err.Error(), want) {
		t.Errorf("attach to the full instance: %v, want AttachmentLimitExceeded with %q", err, want)
	}
}
