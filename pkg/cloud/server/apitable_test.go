package server_test

// The table of the volume, attach and capacity API's answers through the driver's client
// (formerly the contract suite pkg/cloud/cloudtest, which held an in-memory fake and this
// server to it; the fake is gone: pkg/csi's unit tests run on this server, realcloud_test.go).
// The table is the synchronous cloud (zero attach and detach durations): attaches and
// detaches end within the call. The asynchronous state machine is transitions_test.go's.

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/admin"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
)

// Instance is an instance of a World: its ID, zone, effective attach limit and out-of-band
// slots (both in slots).
type Instance struct {
	ID             string
	Zone           string
	AttachLimit    int
	OutOfBandSlots int
}

// World is the state a case starts from: its instances, no volumes, and the account's quota
// limits (attachments and volumes are counts, CapacityBytes is bytes). Volumes created
// without a zone land in DefaultZone.
type World struct {
	Instances       []Instance
	AttachmentQuota int64
	VolumeQuota     int64
	CapacityQuota   int64
}

// DefaultZone is the zone of volumes created without one.
const DefaultZone = "zone-a"

// op is what a step does.
type op int

const (
	opCreate         op = iota // CreateVolume(vol, size, zone)
	opAttach                   // AttachVolume(vol, inst)
	opDetach                   // DetachVolume(vol, inst)
	opDelete                   // DeleteVolume(vol)
	opResize                   // ResizeVolume(vol, size)
	opModify                   // ModifyVolume(vol, typ, iops)
	opVolume                   // GetVolume(vol)
	opInstance                 // GetInstance(inst)
	opCapacity                 // GetCapacity(inst)
	opQuotas                   // GetQuotas
	opSnapshot                 // CreateSnapshot(snap, vol)
	opGetSnapshot              // GetSnapshot(snap)
	opDeleteSnapshot           // DeleteSnapshot(snap)
	opGroup                    // CreateGroupSnapshot(group, vols)
	opGetGroup                 // GetGroupSnapshot(group)
	opDeleteGroup              // DeleteGroupSnapshot(group)
	opRestore                  // CreateVolume(vol, size) from the snapshot snap
	opAttachRO                 // Attach(vol, inst) read-only
	opWait                     // WaitVolume(vol, inst, waitFor)
)

func (o op) String() string {
	return [...]string{"create", "attach", "detach", "delete", "resize", "modify", "volume", "instance", "capacity", "quotas",
		"snapshot", "get snapshot", "delete snapshot", "group", "get group", "delete group", "restore", "attach read-only", "wait"}[o]
}

// slots is the capacity a step expects: the facts and the slot formulas of cloud.Capacity.
type slots struct {
	limit, outOfBand, attached, free int
	headroom                         int64
	instances                        int
}

// used is the quota use a step expects.
type used struct {
	attachments, volumes, bytes int64
}

// step is one call and what it must answer. Volumes are named by their CreateVolume name
// (the suite keeps the IDs); a name never created stands for a missing volume.
type step struct {
	op   op
	vol  string
	inst string
	size int64
	zone string
	typ  string
	iops int
	// code is the error code the call must fail with; "" is success.
	code cloud.Code
	// state is the attach state an attach, detach or volume step expects (volume: "" is
	// not checked); on is the instance the volume must be bound to ("" unbound).
	state cloud.AttachState
	on    string
	// ro is the mode an attach or volume step expects of the attachment.
	ro bool
	// waitFor is the end a wait step waits for (attached or detached).
	waitFor cloud.AttachState
	// same: the create must return the volume created before under the name; unchanged:
	// the modify must leave the revision as it was.
	same, unchanged bool
	// wantZone, wantSize and wantType are the volume's zone, size and type a create,
	// resize, modify or volume step expects, when set.
	wantZone string
	wantSize int64
	wantType string
	// snap names a snapshot by its CreateSnapshot name, or the member of a group snapshot as
	// "<group>/<volume>"; group names a group snapshot by its name; vols are a group's
	// volumes (names), in the order the request lists them. A snap or group never created
	// stands for a missing one.
	snap  string
	group string
	vols  []string
	// attachments are the volumes (names) an instance step expects, in ID order.
	attachments []string
	capacity    *slots
	quotas      *used
}

// testCase is one row of the table.
type testCase struct {
	name  string
	world World
	steps []step
}

// world is the World most cases start from: two instances in zone-a with 4 slots (one
// out of band) and 2 slots, one in zone-b, and room in every quota.
func world() World {
	return World{
		Instances: []Instance{
			{ID: "node-1", Zone: "zone-a", AttachLimit: 4, OutOfBandSlots: 1},
			{ID: "node-2", Zone: "zone-a", AttachLimit: 2},
			{ID: "node-3", Zone: "zone-b", AttachLimit: 8},
		},
		AttachmentQuota: 40, VolumeQuota: 10, CapacityQuota: 1 << 30,
	}
}

func cases() []testCase {
	quotaWorld := world()
	quotaWorld.AttachmentQuota, quotaWorld.VolumeQuota, quotaWorld.CapacityQuota = 1, 2, 300
	return []testCase{
		{name: "a wait with nothing under way answers the volume as it is", world: world(), steps: []step{
			{op: opCreate, vol: "v1", size: 100},
			{op: opWait, vol: "v1", inst: "node-1", waitFor: cloud.StateAttached, state: cloud.StateDetached},
			{op: opAttach, vol: "v1", inst: "node-1", state: cloud.StateAttached, on: "node-1"},
			{op: opWait, vol: "v1", inst: "node-1", waitFor: cloud.StateAttached, state: cloud.StateAttached, on: "node-1"},
			{op: opWait, vol: "v1", inst: "node-2", waitFor: cloud.StateDetached, state: cloud.StateAttached, on: "node-1"},
			{op: opDetach, vol: "v1", inst: "node-1", state: cloud.StateDetached},
			{op: opWait, vol: "v1", inst: "node-1", waitFor: cloud.StateDetached, state: cloud.StateDetached},
			{op: opWait, vol: "v1", inst: "node-1", waitFor: cloud.StateAttaching, code: cloud.CodeInvalidArgument},
			{op: opWait, vol: "missing", inst: "node-1", waitFor: cloud.StateAttached, code: cloud.CodeVolumeNotFound},
		}},
		{name: "create is idempotent by name", world: world(), steps: []step{
			{op: opCreate, vol: "v1", size: 100, wantZone: DefaultZone, wantSize: 100},
			{op: opCreate, vol: "v1", size: 100, same: true},
			{op: opCreate, vol: "v1", size: 200, code: cloud.CodeAlreadyExists},
			{op: opCreate, vol: "v1", size: 100, zone: "zone-b", code: cloud.CodeAlreadyExists},
			{op: opCreate, vol: "v2", size: 100, zone: "zone-b", wantZone: "zone-b"},
			{op: opCreate, vol: "v2", size: 100, code: cloud.CodeAlreadyExists},
			{op: opCreate, vol: "v3", size: 100, zone: "zone-q", code: cloud.CodeInvalidArgument},
			{op: opCreate, vol: "v3", size: 0, code: cloud.CodeInvalidArgument},
			{op: opCreate, vol: "", size: 100, code: cloud.CodeInvalidArgument},
			{op: opVolume, vol: "v1", state: cloud.StateDetached, wantSize: 100},
			{op: opQuotas, quotas: &used{volumes: 2, bytes: 200}},
		}},
		{name: "create is refused past the volume and capacity quotas", world: quotaWorld, steps: []step{
			{op: opCreate, vol: "v1", size: 100},
			{op: opCreate, vol: "big", size: 201, code: cloud.CodeCapacityQuotaExceeded},
			{op: opCreate, vol: "v2", size: 200},
			{op: opCreate, vol: "v3", size: 1, code: cloud.CodeVolumeQuotaExceeded},
			{op: opQuotas, quotas: &used{volumes: 2, bytes: 300}},
		}},
		{name: "attach binds the volume and takes a slot", world: world(), steps: []step{
			{op: opCreate, vol: "v1", size: 1},
			{op: opCapacity, inst: "node-1", capacity: &slots{limit: 4, outOfBand: 1, attached: 0, free: 3, headroom: 40, instances: 3}},
			{op: opAttach, vol: "v1", inst: "node-1", state: cloud.StateAttached},
			{op: opVolume, vol: "v1", state: cloud.StateAttached, on: "node-1"},
			{op: opInstance, inst: "node-1", attachments: []string{"v1"}},
			{op: opCapacity, inst: "node-1", capacity: &slots{limit: 4, outOfBand: 1, attached: 1, free: 2, headroom: 39, instances: 3}},
			{op: opQuotas, quotas: &used{attachments: 1, volumes: 1, bytes: 1}},
		}},
		{name: "attach to the same instance is idempotent", world: world(), steps: []step{
			{op: opCreate, vol: "v1", size: 1},
			{op: opAttach, vol: "v1", inst: "node-1", state: cloud.StateAttached},
			{op: opAttach, vol: "v1", inst: "node-1", state: cloud.StateAttached},
			{op: opCapacity, inst: "node-1", capacity: &slots{limit: 4, outOfBand: 1, attached: 1, free: 2, headroom: 39, instances: 3}},
		}},
		{name: "attach elsewhere is VolumeInUse", world: world(), steps: []step{
			{op: opCreate, vol: "v1", size: 1},
			{op: opAttach, vol: "v1", inst: "node-1", state: cloud.StateAttached},
			{op: opAttach, vol: "v1", inst: "node-2", code: cloud.CodeVolumeInUse},
			{op: opVolume, vol: "v1", state: cloud.StateAttached, on: "node-1"},
			{op: opInstance, inst: "node-2", attachments: []string{}},
		}},
		{name: "attach across zones is ZoneMismatch", world: world(), steps: []step{
			{op: opCreate, vol: "v1", size: 1, zone: "zone-b"},
			{op: opAttach, vol: "v1", inst: "node-1", code: cloud.CodeZoneMismatch},
			{op: opVolume, vol: "v1", state: cloud.StateDetached},
			{op: opCapacity, inst: "node-1", capacity: &slots{limit: 4, outOfBand: 1, attached: 0, free: 3, headroom: 40, instances: 3}},
		}},
		{name: "attach past the free slots is AttachmentLimitExceeded", world: world(), steps: []step{
			{op: opCreate, vol: "v1", size: 1},
			{op: opCreate, vol: "v2", size: 1},
			{op: opCreate, vol: "v3", size: 1},
			{op: opAttach, vol: "v1", inst: "node-2", state: cloud.StateAttached},
			{op: opAttach, vol: "v2", inst: "node-2", state: cloud.StateAttached},
			{op: opCapacity, inst: "node-2", capacity: &slots{limit: 2, attached: 2, free: 0, headroom: 38, instances: 3}},
			{op: opAttach, vol: "v3", inst: "node-2", code: cloud.CodeAttachmentLimitExceeded},
			{op: opVolume, vol: "v3", state: cloud.StateDetached},
			{op: opInstance, inst: "node-2", attachments: []string{"v1", "v2"}},
			{op: opQuotas, quotas: &used{attachments: 2, volumes: 3, bytes: 3}},
		}},
		{name: "out-of-band slots count against the limit", world: World{
			Instances:       []Instance{{ID: "node-1", Zone: "zone-a", AttachLimit: 2, OutOfBandSlots: 2}},
			AttachmentQuota: 40, VolumeQuota: 10, CapacityQuota: 1 << 30,
		}, steps: []step{
			{op: opCreate, vol: "v1", size: 1},
			{op: opCapacity, inst: "node-1", capacity: &slots{limit: 2, outOfBand: 2, free: 0, headroom: 40, instances: 1}},
			{op: opAttach, vol: "v1", inst: "node-1", code: cloud.CodeAttachmentLimitExceeded},
		}},
		{name: "attach past the account quota is AttachmentQuotaExceeded", world: quotaWorld, steps: []step{
			{op: opCreate, vol: "v1", size: 1},
			{op: opCreate, vol: "v2", size: 1},
			{op: opAttach, vol: "v1", inst: "node-1", state: cloud.StateAttached},
			{op: opCapacity, inst: "node-2", capacity: &slots{limit: 2, free: 2, headroom: 0, instances: 3}},
			{op: opAttach, vol: "v2", inst: "node-2", code: cloud.CodeAttachmentQuotaExceeded},
			{op: opVolume, vol: "v2", state: cloud.StateDetached},
			{op: opQuotas, quotas: &used{attachments: 1, volumes: 2, bytes: 2}},
		}},
		{name: "attach and detach of a missing volume or to a missing instance", world: world(), steps: []step{
			{op: opCreate, vol: "v1", size: 1},
			{op: opAttach, vol: "missing", inst: "node-1", code: cloud.CodeVolumeNotFound},
			{op: opAttach, vol: "v1", inst: "node-9", code: cloud.CodeInstanceNotFound},
			// The instance is looked up first.
			{op: opAttach, vol: "missing", inst: "node-9", code: cloud.CodeInstanceNotFound},
			{op: opDetach, vol: "missing", inst: "node-1", code: cloud.CodeVolumeNotFound},
			// Not attached there, so detached there: the instance is not looked up.
			{op: opDetach, vol: "v1", inst: "node-9", state: cloud.StateDetached},
			{op: opDetach, vol: "missing", inst: "node-9", code: cloud.CodeVolumeNotFound},
			{op: opCapacity, inst: "node-9", code: cloud.CodeInstanceNotFound},
			{op: opInstance, inst: "node-9", code: cloud.CodeInstanceNotFound},
		}},
		{name: "detach frees the slot and is idempotent", world: world(), steps: []step{
			{op: opCreate, vol: "v1", size: 1},
			{op: opAttach, vol: "v1", inst: "node-1", state: cloud.StateAttached},
			{op: opDetach, vol: "v1", inst: "node-2", state: cloud.StateDetached},
			{op: opVolume, vol: "v1", state: cloud.StateAttached, on: "node-1"},
			{op: opDetach, vol: "v1", inst: "node-1", state: cloud.StateDetached},
			{op: opVolume, vol: "v1", state: cloud.StateDetached},
			{op: opDetach, vol: "v1", inst: "node-1", state: cloud.StateDetached},
			{op: opInstance, inst: "node-1", attachments: []string{}},
			{op: opCapacity, inst: "node-1", capacity: &slots{limit: 4, outOfBand: 1, free: 3, headroom: 40, instances: 3}},
			{op: opQuotas, quotas: &used{volumes: 1, bytes: 1}},
			{op: opAttach, vol: "v1", inst: "node-2", state: cloud.StateAttached},
			{op: opVolume, vol: "v1", state: cloud.StateAttached, on: "node-2"},
		}},
		{name: "a volume keeps its device across attaches", world: world(), steps: []step{
			{op: opCreate, vol: "v1", size: 1},
			{op: opCreate, vol: "v2", size: 1},
			{op: opAttach, vol: "v1", inst: "node-1", state: cloud.StateAttached},
			{op: opAttach, vol: "v2", inst: "node-1", state: cloud.StateAttached},
			{op: opVolume, vol: "v2", state: cloud.StateAttached, on: "node-1"},
			{op: opDetach, vol: "v1", inst: "node-1", state: cloud.StateDetached},
			{op: opDetach, vol: "v2", inst: "node-1", state: cloud.StateDetached},
			{op: opAttach, vol: "v2", inst: "node-1", state: cloud.StateAttached},
			{op: opDetach, vol: "v2", inst: "node-1", state: cloud.StateDetached},
			{op: opAttach, vol: "v2", inst: "node-2", state: cloud.StateAttached},
		}},
		{name: "delete is refused while attached", world: world(), steps: []step{
			{op: opCreate, vol: "v1", size: 100},
			{op: opAttach, vol: "v1", inst: "node-1", state: cloud.StateAttached},
			{op: opDelete, vol: "v1", code: cloud.CodeVolumeInUse},
			{op: opDetach, vol: "v1", inst: "node-1", state: cloud.StateDetached},
			{op: opDelete, vol: "v1"},
			{op: opVolume, vol: "v1", code: cloud.CodeVolumeNotFound},
			{op: opDelete, vol: "v1", code: cloud.CodeVolumeNotFound},
			{op: opQuotas, quotas: &used{}},
		}},
		{name: "resize grows within the capacity quota", world: quotaWorld, steps: []step{
			{op: opCreate, vol: "v1", size: 100},
			{op: opResize, vol: "v1", size: 100, wantSize: 100},
			{op: opResize, vol: "v1", size: 50, code: cloud.CodeInvalidArgument},
			{op: opResize, vol: "v1", size: 301, code: cloud.CodeCapacityQuotaExceeded},
			{op: opResize, vol: "v1", size: 300, wantSize: 300},
			{op: opVolume, vol: "v1", wantSize: 300},
			{op: opResize, vol: "missing", size: 300, code: cloud.CodeVolumeNotFound},
			{op: opQuotas, quotas: &used{volumes: 1, bytes: 300}},
		}},
		{name: "a group snapshot cuts every volume at one point, idempotent by name", world: world(), steps: []step{
			{op: opCreate, vol: "v1", size: 100},
			{op: opCreate, vol: "v2", size: 200},
			{op: opCreate, vol: "v3", size: 300},
			{op: opGroup, group: "g1", vols: []string{"v2", "v1", "v3"}},
			// Another order of the same volumes is the same group.
			{op: opGroup, group: "g1", vols: []string{"v3", "v1", "v2"}, same: true},
			{op: opGroup, group: "g1", vols: []string{"v1", "v2"}, code: cloud.CodeAlreadyExists},
			{op: opGetGroup, group: "g1", vols: []string{"v1", "v2", "v3"}},
			{op: opGetSnapshot, snap: "g1/v2", wantSize: 200},
			// A member restores like any snapshot.
			{op: opRestore, vol: "r2", snap: "g1/v2", size: 200, wantSize: 200},
			{op: opGroup, group: "g2", vols: []string{"v1"}},
			{op: opQuotas, quotas: &used{volumes: 4, bytes: 800}},
		}},
		{name: "a group snapshot refuses bad requests and changes nothing", world: world(), steps: []step{
			{op: opCreate, vol: "v1", size: 1},
			{op: opCreate, vol: "b1", size: 1, zone: "zone-b"},
			{op: opGroup, group: "", vols: []string{"v1"}, code: cloud.CodeInvalidArgument},
			{op: opGroup, group: "g", vols: nil, code: cloud.CodeInvalidArgument},
			{op: opGroup, group: "g", vols: []string{"v1", "v1"}, code: cloud.CodeInvalidArgument},
			{op: opGroup, group: "g", vols: tooManyVolumes(), code: cloud.CodeInvalidArgument},
			{op: opGroup, group: "g", vols: []string{"v1", "missing"}, code: cloud.CodeVolumeNotFound},
			{op: opGroup, group: "g", vols: []string{"v1", "b1"}, code: cloud.CodeZoneMismatch},
			{op: opGetGroup, group: "g", code: cloud.CodeGroupSnapshotNotFound},
			// The name was never taken: the same name with a good request is a new group.
			{op: opGroup, group: "g", vols: []string{"v1"}},
		}},
		{name: "a group's members go with the group only", world: world(), steps: []step{
			{op: opCreate, vol: "v1", size: 1},
			{op: opCreate, vol: "v2", size: 1},
			{op: opGroup, group: "g1", vols: []string{"v1", "v2"}},
			{op: opDeleteSnapshot, snap: "g1/v1", code: cloud.CodeSnapshotInGroup},
			{op: opGetSnapshot, snap: "g1/v1"},
			// A snapshot of its own may bear a member's name: members are not in the index.
			{op: opSnapshot, snap: "g1/v1", vol: "v1"},
			{op: opDeleteSnapshot, snap: "g1/v1"},
			{op: opDeleteGroup, group: "g1"},
			{op: opGetGroup, group: "g1", code: cloud.CodeGroupSnapshotNotFound},
			{op: opGetSnapshot, snap: "g1/v2", code: cloud.CodeSnapshotNotFound},
			{op: opDeleteGroup, group: "g1", code: cloud.CodeGroupSnapshotNotFound},
			// Deleted, the name is free again.
			{op: opGroup, group: "g1", vols: []string{"v1"}},
			// The source volumes may go; the group keeps its snapshots.
			{op: opDelete, vol: "v2"},
			{op: opGetGroup, group: "g1", vols: []string{"v1"}},
		}},
		{name: "a read-only attach is an attachment of its own mode", world: world(), steps: []step{
			{op: opCreate, vol: "v1", size: 1},
			{op: opAttachRO, vol: "v1", inst: "node-1", state: cloud.StateAttached, ro: true},
			{op: opAttachRO, vol: "v1", inst: "node-1", state: cloud.StateAttached, ro: true},
			{op: opVolume, vol: "v1", state: cloud.StateAttached, on: "node-1", ro: true},
			// The other mode on the same instance is another attachment: refused, nothing changes.
			{op: opAttach, vol: "v1", inst: "node-1", code: cloud.CodeAlreadyExists},
			{op: opVolume, vol: "v1", state: cloud.StateAttached, on: "node-1", ro: true},
			// It takes a slot like any attachment.
			{op: opCapacity, inst: "node-1", capacity: &slots{limit: 4, outOfBand: 1, attached: 1, free: 2, headroom: 39, instances: 3}},
			{op: opDetach, vol: "v1", inst: "node-1", state: cloud.StateDetached},
			{op: opVolume, vol: "v1", state: cloud.StateDetached},
			{op: opAttach, vol: "v1", inst: "node-1", state: cloud.StateAttached},
			{op: opAttachRO, vol: "v1", inst: "node-1", code: cloud.CodeAlreadyExists},
			{op: opVolume, vol: "v1", state: cloud.StateAttached, on: "node-1"},
		}},
		{name: "modify changes type and IOPS, the same values nothing", world: world(), steps: []step{
			{op: opCreate, vol: "v1", size: 1},
			{op: opModify, vol: "v1", typ: cloud.VolumeTypeStandard, unchanged: true},
			{op: opModify, vol: "v1", typ: cloud.VolumeTypeStandard, iops: 3000, code: cloud.CodeInvalidArgument},
			{op: opModify, vol: "v1", typ: "tape", code: cloud.CodeInvalidArgument},
			{op: opModify, vol: "v1", typ: cloud.VolumeTypeSSD, iops: 3000, wantType: cloud.VolumeTypeSSD},
			{op: opModify, vol: "v1", typ: cloud.VolumeTypeSSD, iops: 3000, unchanged: true, wantType: cloud.VolumeTypeSSD},
			{op: opVolume, vol: "v1", wantType: cloud.VolumeTypeSSD},
			{op: opModify, vol: "missing", typ: cloud.VolumeTypeSSD, code: cloud.CodeVolumeNotFound},
		}},
	}
}

// tooManyVolumes is one volume ID more than a group snapshot may hold.
func tooManyVolumes() []string {
	out := make([]string, 0, cloud.MaxGroupSnapshotMembers+1)
	for i := range cloud.MaxGroupSnapshotMembers + 1 {
		out = append(out, "v"+strconv.Itoa(i))
	}
	return out
}

// TestAPITable runs every case of the table as a subtest, each against a new cloud holding
// the case's World, through the driver's client.
func TestAPITable(t *testing.T) {
	for _, tc := range cases() {
		t.Run(tc.name, func(t *testing.T) {
			r := &runner{t: t, c: newWorldCloud(t, tc.world), ids: map[string]string{}, devices: map[string]string{},
				snaps: map[string]string{}, groups: map[string]*cloud.GroupSnapshot{}}
			for i, s := range tc.steps {
				r.step(i, s)
			}
		})
	}
}

// newWorldCloud starts a fake cloud holding w, with zero attach and detach durations, and
// returns its driver client.
func newWorldCloud(t *testing.T, w World) *admin.Client {
	seed := server.Seed{
		// Every instance sets its own limit; the type's only has to be valid.
		InstanceTypes: []cloud.InstanceType{{Name: "contract", MaxAttachments: 1}},
		Quotas:        &store.Limits{Attachments: w.AttachmentQuota, Volumes: w.VolumeQuota, CapacityBytes: w.CapacityQuota},
	}
	for _, in := range w.Instances {
		limit := in.AttachLimit
		seed.Instances = append(seed.Instances, store.SeedInstance{
			CreateInstanceRequest: cloud.CreateInstanceRequest{ID: in.ID, Zone: in.Zone, InstanceType: "contract", OutOfBandSlots: in.OutOfBandSlots},
			AttachLimit:           &limit,
		})
	}
	return startCloud(t, server.Config{Seed: seed, DefaultZone: DefaultZone}).driver
}

// runner runs the steps of one case, keeping the IDs of the volumes created by name and the
// device each volume was first attached as.
type runner struct {
	t       *testing.T
	c       *admin.Client
	ids     map[string]string
	devices map[string]string
	// snaps are the snapshot IDs by step name (see step.snap); groups the group snapshots
	// by name, as first created.
	snaps  map[string]string
	groups map[string]*cloud.GroupSnapshot
}

// snapID is the ID of the snapshot a step names, or one no cloud holds.
func (r *runner) snapID(name string) string {
	if id, ok := r.snaps[name]; ok {
		return id
	}
	return "snap-never-created"
}

// groupID is the ID of the group snapshot created under name, or one no cloud holds.
func (r *runner) groupID(name string) string {
	if g, ok := r.groups[name]; ok {
		return g.ID
	}
	return "gsnap-never-created"
}

// device checks that a volume attached as dev keeps the device of its first attach: the
// driver's publish_context carries it, the same for every publish of the volume.
func (r *runner) device(i int, s step, dev string) {
	r.t.Helper()
	if first, ok := r.devices[s.vol]; ok && dev != first {
		r.t.Errorf("step %d (%s %s): device %q, expected %q as at its first attach", i, s.op, s.vol, dev, first)
	}
	r.devices[s.vol] = dev
}

// id is the ID of the volume created under name, or a volume ID no cloud holds.
func (r *runner) id(name string) string {
	if id, ok := r.ids[name]; ok {
		return id
	}
	return "vol-" + name + "-never-created"
}

func (r *runner) step(i int, s step) {
	t, ctx := r.t, context.Background()
	t.Helper()
	var (
		err error
		v   *cloud.Volume
		a   *cloud.Attachment
	)
	switch s.op {
	case opCreate:
		v, err = r.c.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: s.vol, SizeBytes: s.size, Zone: s.zone})
	case opAttach:
		a, err = r.c.AttachVolume(ctx, r.id(s.vol), s.inst)
	case opAttachRO:
		a, err = r.c.Attach(ctx, r.id(s.vol), cloud.AttachRequest{InstanceID: s.inst, ReadOnly: true})
	case opDetach:
		a, err = r.c.DetachVolume(ctx, r.id(s.vol), s.inst)
	case opDelete:
		err = r.c.DeleteVolume(ctx, r.id(s.vol))
	case opResize:
		v, err = r.c.ResizeVolume(ctx, r.id(s.vol), s.size)
	case opModify:
		var before *cloud.Volume
		if s.unchanged {
			if before, err = r.c.GetVolume(ctx, r.id(s.vol)); err != nil {
				t.Fatalf("step %d (%s %s): read before: %v", i, s.op, s.vol, err)
			}
		}
		typ, iops := s.typ, s.iops
		v, err = r.c.ModifyVolume(ctx, r.id(s.vol), cloud.ModifyVolumeRequest{Type: &typ, IOPS: &iops})
		if err == nil && before != nil && v.Revision != before.Revision {
			t.Errorf("step %d (%s %s to %s/%d): revision %d -> %d, expected no change", i, s.op, s.vol, s.typ, s.iops, before.Revision, v.Revision)
		}
	case opVolume:
		v, err = r.c.GetVolume(ctx, r.id(s.vol))
	case opWait:
		// The table's clouds complete transitions within the request, so a wait finds
		// nothing under way and answers at once, however long it may wait.
		v, err = r.c.WaitVolume(ctx, r.id(s.vol), cloud.VolumeWait{For: s.waitFor, InstanceID: s.inst, Timeout: time.Minute})
	case opInstance:
		r.instance(i, s)
		return
	case opCapacity:
		r.capacity(i, s)
		return
	case opQuotas:
		r.quotas(i, s)
		return
	case opSnapshot, opGetSnapshot, opDeleteSnapshot:
		r.snapshot(i, s)
		return
	case opGroup, opGetGroup, opDeleteGroup:
		r.groupSnapshot(i, s)
		return
	case opRestore:
		v, err = r.c.CreateVolume(ctx, cloud.CreateVolumeRequest{Name: s.vol, SizeBytes: s.size, SourceSnapshotID: r.snapID(s.snap)})
		if err == nil && v.SourceSnapshotID != r.snapID(s.snap) {
			t.Errorf("step %d (restore %s from %s): source snapshot %q, expected %q", i, s.vol, s.snap, v.SourceSnapshotID, r.snapID(s.snap))
		}
	}
	if !r.wantCode(i, s, err) || err != nil {
		return
	}
	if v != nil {
		r.volume(i, s, v)
	}
	if a != nil {
		r.attachment(i, s, a)
	}
}

// wantCode reports whether err is what the step expects, failing the test when not.
func (r *runner) wantCode(i int, s step, err error) bool {
	r.t.Helper()
	if got := cloud.CodeOf(err); got != s.code || (s.code == "" && err != nil) {
		r.t.Errorf("step %d (%s vol=%s inst=%s): expected code %q, got %v", i, s.op, s.vol, s.inst, s.code, err)
		return false
	}
	return true
}

func (r *runner) volume(i int, s step, v *cloud.Volume) {
	t := r.t
	t.Helper()
	if s.op == opCreate || s.op == opRestore {
		if prev, ok := r.ids[s.vol]; s.same && (!ok || prev != v.ID) {
			t.Errorf("step %d: create %s again: expected the volume %s, got %s", i, s.vol, prev, v.ID)
		}
		r.ids[s.vol] = v.ID
		if v.Name != s.vol || v.SizeBytes != s.size || v.ID == "" {
			t.Errorf("step %d: create %s of %d bytes: got %+v", i, s.vol, s.size, v)
		}
		if v.AttachedTo != "" || v.Device != "" {
			t.Errorf("step %d: a new volume is on %q with device %q, expected unbound", i, v.AttachedTo, v.Device)
		}
		// The create answer is the volume as a GetVolume right after reads it. A create
		// found again by name answers the volume as it is now (it may be attached), so
		// only a new one is known to be detached and healthy.
		if !s.same && (v.State != cloud.StateDetached || v.Health != cloud.VolumeHealthOK) {
			t.Errorf("step %d: create %s answered state %q, health %q; expected %q, %q", i, s.vol, v.State, v.Health, cloud.StateDetached, cloud.VolumeHealthOK)
		}
	}
	if s.wantZone != "" && v.Zone != s.wantZone {
		t.Errorf("step %d (%s %s): zone %q, expected %q", i, s.op, s.vol, v.Zone, s.wantZone)
	}
	if s.wantSize != 0 && v.SizeBytes != s.wantSize {
		t.Errorf("step %d (%s %s): size %d, expected %d", i, s.op, s.vol, v.SizeBytes, s.wantSize)
	}
	if s.wantType != "" && v.Type != s.wantType {
		t.Errorf("step %d (%s %s): type %q, expected %q", i, s.op, s.vol, v.Type, s.wantType)
	}
	if s.op == opVolume && s.state != "" && (v.State != s.state || v.AttachedTo != s.on || v.ReadOnly != s.ro) {
		t.Errorf("step %d (volume %s): %q on %q read-only %v, expected %q on %q read-only %v", i, s.vol, v.State, v.AttachedTo, v.ReadOnly, s.state, s.on, s.ro)
	}
	// Not on create either: the real cloud's create answer carries no health.
	if s.op != opCreate && v.Health != cloud.VolumeHealthOK {
		t.Errorf("step %d (%s %s): health %q, expected %q (nothing set it)", i, s.op, s.vol, v.Health, cloud.VolumeHealthOK)
	}
	if s.op == opVolume && v.State == cloud.StateAttached {
		r.device(i, s, v.Device)
	}
}

func (r *runner) attachment(i int, s step, a *cloud.Attachment) {
	t := r.t
	t.Helper()
	if a.VolumeID != r.id(s.vol) || a.InstanceID != s.inst {
		t.Errorf("step %d (%s %s to %s): the attachment names %s on %s", i, s.op, s.vol, s.inst, a.VolumeID, a.InstanceID)
	}
	if a.State != s.state {
		t.Errorf("step %d (%s %s to %s): state %q, expected %q", i, s.op, s.vol, s.inst, a.State, s.state)
	}
	if s.op != opDetach && a.ReadOnly != s.ro {
		t.Errorf("step %d (%s %s to %s): read-only %v, expected %v", i, s.op, s.vol, s.inst, a.ReadOnly, s.ro)
	}
	attached := a.State == cloud.StateAttached
	if attached != (a.Device != "") {
		t.Errorf("step %d (%s %s to %s): %q with device %q: an attached volume has a device, a detached one none", i, s.op, s.vol, s.inst, a.State, a.Device)
	}
	if attached {
		r.device(i, s, a.Device)
	}
}

func (r *runner) instance(i int, s step) {
	t := r.t
	t.Helper()
	in, err := r.c.GetInstance(context.Background(), s.inst)
	if !r.wantCode(i, s, err) || err != nil {
		return
	}
	want := []string{}
	for _, name := range s.attachments {
		want = append(want, r.id(name))
	}
	slices.Sort(want)
	if in.Health != cloud.InstanceHealthOK {
		t.Errorf("step %d (instance %s): health %q, expected %q (nothing set it)", i, s.inst, in.Health, cloud.InstanceHealthOK)
	}
	if in.ID != s.inst || !slices.Equal(in.Attachments, want) {
		t.Errorf("step %d (instance %s): %s with attachments %v, expected %v", i, s.inst, in.ID, in.Attachments, want)
	}
}

func (r *runner) capacity(i int, s step) {
	t := r.t
	t.Helper()
	c, err := r.c.GetCapacity(context.Background(), s.inst)
	if !r.wantCode(i, s, err) || err != nil {
		return
	}
	w := s.capacity
	got := slots{limit: c.AttachLimit, outOfBand: c.OutOfBandSlots, attached: c.Attached, free: c.FreeSlots(), headroom: c.QuotaHeadroom, instances: c.Instances}
	if c.Health != cloud.InstanceHealthOK {
		t.Errorf("step %d (capacity of %s): health %q, expected %q (nothing set it)", i, s.inst, c.Health, cloud.InstanceHealthOK)
	}
	if c.InstanceID != s.inst || got != *w {
		t.Errorf("step %d (capacity of %s): got %s %+v, expected %+v", i, s.inst, c.InstanceID, got, *w)
	}
}

func (r *runner) quotas(i int, s step) {
	t := r.t
	t.Helper()
	q, err := r.c.GetQuotas(context.Background())
	if !r.wantCode(i, s, err) || err != nil {
		return
	}
	got := used{attachments: q.Attachments.Used, volumes: q.Volumes.Used, bytes: q.CapacityBytes.Used}
	if got != *s.quotas {
		t.Errorf("step %d (quotas): use %+v, expected %+v", i, got, *s.quotas)
	}
}

func (r *runner) snapshot(i int, s step) {
	t, ctx := r.t, context.Background()
	t.Helper()
	var (
		sn  *cloud.Snapshot
		err error
	)
	switch s.op {
	case opSnapshot:
		sn, err = r.c.CreateSnapshot(ctx, cloud.CreateSnapshotRequest{Name: s.snap, SourceVolumeID: r.id(s.vol)})
	case opGetSnapshot:
		sn, err = r.c.GetSnapshot(ctx, r.snapID(s.snap))
	case opDeleteSnapshot:
		err = r.c.DeleteSnapshot(ctx, r.snapID(s.snap))
	}
	if !r.wantCode(i, s, err) || sn == nil {
		return
	}
	if s.op == opSnapshot {
		if sn.Name != s.snap || sn.SourceVolumeID != r.id(s.vol) || sn.GroupSnapshotID != "" || !sn.ReadyToUse {
			t.Errorf("step %d (snapshot %s of %s): got %+v", i, s.snap, s.vol, sn)
		}
		r.snaps[s.snap] = sn.ID
	}
	if sn.ID != r.snapID(s.snap) {
		t.Errorf("step %d (%s %s): snapshot %s, expected %s", i, s.op, s.snap, sn.ID, r.snapID(s.snap))
	}
	if s.wantSize != 0 && sn.SizeBytes != s.wantSize {
		t.Errorf("step %d (%s %s): size %d, expected %d", i, s.op, s.snap, sn.SizeBytes, s.wantSize)
	}
}

func (r *runner) groupSnapshot(i int, s step) {
	t, ctx := r.t, context.Background()
	t.Helper()
	vols := make([]string, 0, len(s.vols))
	for _, name := range s.vols {
		vols = append(vols, r.id(name))
	}
	var (
		g   *cloud.GroupSnapshot
		err error
	)
	switch s.op {
	case opGroup:
		g, err = r.c.CreateGroupSnapshot(ctx, cloud.CreateGroupSnapshotRequest{Name: s.group, SourceVolumeIDs: vols})
	case opGetGroup:
		g, err = r.c.GetGroupSnapshot(ctx, r.groupID(s.group))
	case opDeleteGroup:
		err = r.c.DeleteGroupSnapshot(ctx, r.groupID(s.group))
		if err == nil {
			delete(r.groups, s.group)
		}
	}
	if !r.wantCode(i, s, err) || g == nil {
		return
	}
	if prev, ok := r.groups[s.group]; ok {
		if g.ID != prev.ID || !slices.Equal(g.SnapshotIDs(), prev.SnapshotIDs()) {
			t.Errorf("step %d (%s %s): group %s with members %v, expected %s with %v", i, s.op, s.group, g.ID, g.SnapshotIDs(), prev.ID, prev.SnapshotIDs())
		}
	} else if s.same || s.op != opGroup {
		t.Errorf("step %d (%s %s): a new group %s, expected the one created before", i, s.op, s.group, g.ID)
	}
	want := slices.Clone(vols)
	slices.Sort(want)
	if g.Name != s.group || g.ID == "" || !slices.Equal(g.SourceVolumeIDs, want) || len(g.Snapshots) != len(want) || !g.ReadyToUse {
		t.Errorf("step %d (%s %s of %v): got %+v, expected volumes %v and as many ready members", i, s.op, s.group, s.vols, g, want)
		return
	}
	// One point in time: every member has the group's revision and time, the member of
	// each volume in the order of SourceVolumeIDs, and that volume's size.
	for j, m := range g.Snapshots {
		src, err := r.c.GetVolume(ctx, want[j])
		switch {
		case m.SourceVolumeID != want[j] || m.GroupSnapshotID != g.ID || !m.ReadyToUse || m.ID == "":
			t.Errorf("step %d (%s %s): member %d is %+v, expected a ready snapshot of %s in group %s", i, s.op, s.group, j, m, want[j], g.ID)
		case m.Revision != g.Revision || !m.CreatedAt.Equal(g.CreatedAt):
			t.Errorf("step %d (%s %s): member %s at revision %d, %v; the group at %d, %v: not one point in time", i, s.op, s.group, m.ID, m.Revision, m.CreatedAt, g.Revision, g.CreatedAt)
		case err == nil && m.SizeBytes != src.SizeBytes:
			t.Errorf("step %d (%s %s): member %s of %d bytes, its volume has %d", i, s.op, s.group, m.ID, m.SizeBytes, src.SizeBytes)
		}
	}
	if _, ok := r.groups[s.group]; !ok {
		r.groups[s.group] = g
		for name, id := range r.ids {
			for _, m := range g.Snapshots {
				if m.SourceVolumeID == id {
					r.snaps[s.group+"/"+name] = m.ID
				}
			}
		}
	}
}
