package store

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// writeV1 writes a data dir in format 1, record for record as the previous store wrote it:
// the instance with its attachment list and revision inline, the volume with attachedTo,
// device and revision inline, the quotas as JSON, and no format key.
func writeV1(t *testing.T, dir string, created time.Time) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, DBFileName), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	put := func(tx *bolt.Tx, bucket, key string, v any) {
		data, ok := v.([]byte)
		if !ok {
			if data, err = json.Marshal(v); err != nil {
				t.Fatal(err)
			}
		}
		b, err := tx.CreateBucketIfNotExists([]byte(bucket))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Put([]byte(key), data); err != nil {
			t.Fatal(err)
		}
	}
	eight := 8
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range []string{"meta", "events", "instanceTypes", "instances", "volumes", "volumeNames", "snapshots", "snapshotNames"} {
			if _, err := tx.CreateBucketIfNotExists([]byte(b)); err != nil {
				return err
			}
		}
		put(tx, "meta", "epoch", []byte("20260101T000000Z-00000000000000aa"))
		put(tx, "meta", "revision", uintKey(7))
		put(tx, "meta", "seq", uintKey(7))
		put(tx, "meta", "nextVolume", uintKey(3))
		put(tx, "meta", "seeded", []byte("1"))
		put(tx, "meta", "quotas", cloud.Quotas{
			Attachments:   cloud.Quota{Limit: 10, Used: 2},
			Volumes:       cloud.Quota{Limit: 20, Used: 3},
			CapacityBytes: cloud.Quota{Limit: 100, Used: 6},
			Revision:      7,
		})
		put(tx, "instanceTypes", "small", cloud.InstanceType{Name: "small", MaxAttachments: 4})
		put(tx, "instances", "a", cloud.Instance{ID: "a", Zone: "z", InstanceType: "small", OutOfBandSlots: 2,
			Attachments: []string{"vol-00000001", "vol-00000003"}, CreatedAt: created, Revision: 7})
		put(tx, "instances", "b", cloud.Instance{ID: "b", Zone: "z", InstanceType: "small", AttachLimitOverride: &eight,
			Attachments: []string{}, CreatedAt: created, Revision: 1})
		for i, v := range []v1Volume{
			{Volume: cloud.Volume{ID: "vol-00000001", Name: "one", SizeBytes: 1, Zone: "z", AttachedTo: "a",
				Device: DevicePrefix + "vol-00000001", State: cloud.StateAttached, CreatedAt: created, Revision: 6}, RequestedSizeBytes: 1},
			{Volume: cloud.Volume{ID: "vol-00000002", Name: "two", SizeBytes: 3, Zone: "z", State: cloud.StateDetached, StateSince: &created, CreatedAt: created, Revision: 4},
				RequestedSizeBytes: 2},
			{Volume: cloud.Volume{ID: "vol-00000003", Name: "three", SizeBytes: 2, Zone: "z", AttachedTo: "a",
				Device: DevicePrefix + "vol-00000003", State: cloud.StateAttached, CreatedAt: created, Revision: 7}, RequestedSizeBytes: 2},
		} {
			put(tx, "volumes", v.ID, v)
			put(tx, "volumeNames", v.Name, []byte(v.ID))
			put(tx, "events", string(uintKey(uint64(i+1))), cloud.Event{Seq: uint64(i + 1), Revision: uint64(i + 1), Time: created,
				Type: "VolumeCreated", VolumeID: v.ID})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestOpenMigratesFormat1 opens a data dir the previous store wrote: every instance, volume,
// quota, revision, event and the epoch read back as before, and the store goes on from there.
func TestOpenMigratesFormat1(t *testing.T) {
	dir := t.TempDir()
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	writeV1(t, dir, created)
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("open format 1 store: %v", err)
	}
	defer s.Close()

	if s.Epoch() != "20260101T000000Z-00000000000000aa" {
		t.Errorf("epoch %q, want the stored one", s.Epoch())
	}
	if rev, err := s.Revision(); err != nil || rev != 7 {
		t.Errorf("revision %d, %v; want 7", rev, err)
	}
	eight := 8
	wantInst := []cloud.Instance{
		{ID: "a", Zone: "z", InstanceType: "small", AttachLimit: 4, OutOfBandSlots: 2,
			Attachments: []string{"vol-00000001", "vol-00000003"}, CreatedAt: created, Revision: 7},
		{ID: "b", Zone: "z", InstanceType: "small", AttachLimitOverride: &eight, AttachLimit: 8,
			Attachments: []string{}, CreatedAt: created, Revision: 1},
	}
	if got, err := s.ListInstances(); err != nil || !reflect.DeepEqual(got, wantInst) {
		t.Errorf("instances\n got %+v, %v\nwant %+v", got, err, wantInst)
	}
	wantVol := []cloud.Volume{
		{ID: "vol-00000001", Name: "one", SizeBytes: 1, Zone: "z", AttachedTo: "a", Device: DevicePrefix + "vol-00000001", State: cloud.StateAttached, CreatedAt: created, Revision: 6},
		{ID: "vol-00000002", Name: "two", SizeBytes: 3, Zone: "z", State: cloud.StateDetached, StateSince: &created, CreatedAt: created, Revision: 4},
		{ID: "vol-00000003", Name: "three", SizeBytes: 2, Zone: "z", AttachedTo: "a", Device: DevicePrefix + "vol-00000003", State: cloud.StateAttached, CreatedAt: created, Revision: 7},
	}
	if got, err := s.ListVolumes(0, ""); err != nil || !reflect.DeepEqual(got.Volumes, wantVol) {
		t.Errorf("volumes\n got %+v, %v\nwant %+v", got, err, wantVol)
	}
	wantQ := &cloud.Quotas{Attachments: cloud.Quota{Limit: 10, Used: 2}, Volumes: cloud.Quota{Limit: 20, Used: 3},
		CapacityBytes: cloud.Quota{Limit: 100, Used: 6}, Revision: 7}
	if got, err := s.Quotas(); err != nil || !reflect.DeepEqual(got, wantQ) {
		t.Errorf("quotas %+v, %v; want %+v", got, err, wantQ)
	}
	if events, _, err := s.Events(0); err != nil || len(events) != 3 || events[2].VolumeID != "vol-00000003" {
		t.Errorf("events %+v, %v; want the 3 stored ones", events, err)
	}
	// The requested size survives: a repeated create of "two" is the same request.
	if v, err := s.CreateVolume(cloud.CreateVolumeRequest{Name: "two", SizeBytes: 2, Zone: "z"}); err != nil || v.ID != "vol-00000002" {
		t.Errorf("repeated create of a migrated volume: %+v, %v", v, err)
	}

	// It goes on: the slots and counts carried over are enforced and kept up.
	if _, err := s.Attach("vol-00000002", "a", nil, nil); cloud.CodeOf(err) != cloud.CodeAttachmentLimitExceeded {
		t.Errorf("attach to a full migrated instance: %v, want AttachmentLimitExceeded (2 attached + 2 out-of-band of 4)", err)
	}
	if _, err := s.Detach("vol-00000001", "a", nil); err != nil {
		t.Fatal(err)
	}
	att, err := s.Attach("vol-00000002", "a", nil, nil)
	if err != nil || att.Revision != 9 {
		t.Fatalf("attach after detach: %+v, %v; want revision 9", att, err)
	}
	inst, err := s.GetInstance("a")
	if err != nil || !reflect.DeepEqual(inst.Attachments, []string{"vol-00000002", "vol-00000003"}) || inst.Revision != 9 {
		t.Errorf("instance a after detach+attach: %+v, %v", inst, err)
	}
	if c, err := s.Capacity("a"); err != nil || c.Attached != 2 || c.QuotaHeadroom != 8 {
		t.Errorf("capacity %+v, %v; want 2 attached, headroom 8", c, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopening finds format 2 and leaves it alone.
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if inst2, err := s.GetInstance("a"); err != nil || !reflect.DeepEqual(inst2, inst) {
		t.Errorf("instance after reopen %+v, %v; want %+v", inst2, err, inst)
	}
}

// TestOpenRefusesLaterFormat: a data dir from a newer fakecloud is refused with a message that
// says what to do, and left as it was.
func TestOpenRefusesLaterFormat(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyFormat, uintKey(Format+1)) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, DBFileName)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, Options{})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("on-disk format %d", Format+1)) || !strings.Contains(err.Error(), "new data dir") {
		t.Fatalf("open of a format %d store: %v; want a clear refusal", Format+1, err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before, after) {
		t.Error("the refused store file was changed")
	}
}
