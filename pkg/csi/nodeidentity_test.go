package csi

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/capacity"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/clustercheck"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/nodestate"
)

// cloudDown makes every GetInstance and GetCapacity of f fail as an unreachable cloud would.
func cloudDown(f *realCloud) {
	down := func(context.Context) error { return cloud.NewError(cloud.CodeUnavailable, "cloud is down") }
	f.SetHook(cloud.OperationGetInstance, down)
	f.SetHook(cloud.OperationGetCapacity, down)
}

// writeJSON writes v as the JSON file path, as a previous plugin process would have.
func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o640); err != nil {
		t.Fatal(err)
	}
}

// persistedCapacity is the capacity state of node i-1 a previous process left: 5 slots,
// trusted a minute ago.
func persistedCapacity() capacity.PersistedState {
	return capacity.PersistedState{Version: 1, InstanceID: "i-1", Reported: 5, Revision: 9, Attached: 2, GoodAt: time.Now().Add(-time.Minute)}
}

// TestNodeGetInfoFromPersistedIdentityWhileTheCloudIsDown restarts a node plugin with the
// cloud down and asserts NodeGetInfo answers from the state dir exactly when the state dir
// holds this node's identity.
func TestNodeGetInfoFromPersistedIdentityWhileTheCloudIsDown(t *testing.T) {
	tests := []struct {
		name      string
		identity  any    // written to node.json; nil: no file
		raw       string // written to node.json instead, when set
		capacity  bool   // capacity.json of this node present
		wantCode  codes.Code
		wantZone  string
		wantSlots int64
	}{
		{name: "identity and capacity persisted", identity: nodestate.Identity{Version: 1, NodeID: "i-1", Zone: "zone-p", SavedAt: time.Now()},
			capacity: true, wantZone: "zone-p", wantSlots: 5},
		{name: "identity persisted, capacity not: the conservative floor, never 0",
			identity: nodestate.Identity{Version: 1, NodeID: "i-1", Zone: "zone-p", SavedAt: time.Now()}, wantZone: "zone-p", wantSlots: 1},
		{name: "nothing persisted", capacity: true, wantCode: codes.Unavailable},
		{name: "identity of another node", identity: nodestate.Identity{Version: 1, NodeID: "i-2", Zone: "zone-p", SavedAt: time.Now()},
			capacity: true, wantCode: codes.Unavailable},
		{name: "identity without a zone", identity: nodestate.Identity{Version: 1, NodeID: "i-1"}, capacity: true, wantCode: codes.Unavailable},
		{name: "corrupt identity", raw: `{"version":1,"nodeId":`, capacity: true, wantCode: codes.Unavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stateDir := filepath.Join(t.TempDir(), "state")
			switch {
			case tc.raw != "":
				if err := os.MkdirAll(stateDir, 0o750); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(nodestate.NewDir(stateDir).IdentityFile(), []byte(tc.raw), 0o640); err != nil {
					t.Fatal(err)
				}
			case tc.identity != nil:
				writeJSON(t, nodestate.NewDir(stateDir).IdentityFile(), tc.identity)
			}
			cfg := capacity.DefaultConfig()
			cfg.StatePath = filepath.Join(stateDir, "capacity.json")
			cfg.AnswerBound, cfg.LookupTimeout = time.Second, time.Second
			if tc.capacity {
				writeJSON(t, cfg.StatePath, persistedCapacity())
			}
			f := newRealCloud(t)
			f.AddInstance("i-1", "zone-cloud", 8, 1)
			cloudDown(f)
			rep, err := capacity.NewReporter(cfg, f, "i-1", nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			rep.Restore(context.Background()) // Driver.Run's start-up step
			var ready atomic.Int32
			n := NewNodeServer(NodeConfig{NodeID: "i-1", StateDir: stateDir, Cloud: f, Mounter: mount.NewFake(), Capacity: rep,
				TopologyReady: func() { ready.Add(1) }})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp, err := n.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
			wantCode(t, err, tc.wantCode)
			if err != nil {
				if ready.Load() != 0 {
					t.Error("TopologyReady called without a zone")
				}
				return
			}
			if resp.GetNodeId() != "i-1" || resp.GetAccessibleTopology().GetSegments()[TopologyZoneKey] != tc.wantZone ||
				resp.GetMaxVolumesPerNode() != tc.wantSlots {
				t.Errorf("NodeGetInfo = %v, want i-1, %s, %d slots", resp, tc.wantZone, tc.wantSlots)
			}
			if ready.Load() != 1 {
				t.Errorf("TopologyReady called %d times, want 1", ready.Load())
			}
		})
	}
}

func TestNodeIdentityIsPersistedAfterTheFirstLookup(t *testing.T) {
	stateDir := filepath.Join(t.TempDir(), "state")
	f := newRealCloud(t)
	f.AddInstance("i-1", "zone-a", 8, 1)
	// A stale file of another node ID on this state dir is replaced.
	writeJSON(t, nodestate.NewDir(stateDir).IdentityFile(), nodestate.Identity{Version: 1, NodeID: "i-old", Zone: "zone-old", SavedAt: time.Now()})
	newServer := func() *NodeServer {
		return NewNodeServer(NodeConfig{NodeID: "i-1", StateDir: stateDir, Cloud: f, Mounter: mount.NewFake(), Capacity: &fixedCapacity{slots: 7}})
	}
	ctx := context.Background()
	if z, err := newServer().topo.Zone(ctx); err != nil || z != "zone-a" {
		t.Fatalf("Zone = %q, %v; want zone-a", z, err)
	}
	id, ok, err := nodestate.NewDir(stateDir).LoadIdentity()
	if err != nil || !ok || id.NodeID != "i-1" || id.Zone != "zone-a" || id.Version != 1 || id.SavedAt.IsZero() {
		t.Fatalf("persisted identity = %+v, %v, %v", id, ok, err)
	}
	// The next process answers without the cloud.
	cloudDown(f)
	calls := f.Calls(cloud.OperationGetInstance)
	resp, err := newServer().NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	wantCode(t, err, codes.OK)
	if z := resp.GetAccessibleTopology().GetSegments()[TopologyZoneKey]; z != "zone-a" || resp.GetMaxVolumesPerNode() != 7 {
		t.Errorf("NodeGetInfo after restart = %v, want zone-a and 7", resp)
	}
	if got := f.Calls(cloud.OperationGetInstance); got != calls {
		t.Errorf("NodeGetInfo asked the cloud %d times with the identity persisted", got-calls)
	}
}

// TestNodePersistedZoneIsKeptWhenTheCloudDisagrees checks the background check against the
// cloud: a matching zone is confirmed, a different one logged and NOT reported, and neither
// rewrites the persisted identity.
func TestNodePersistedZoneIsKeptWhenTheCloudDisagrees(t *testing.T) {
	for _, cloudZone := range []string{"zone-p", "zone-moved"} {
		t.Run(cloudZone, func(t *testing.T) {
			stateDir := filepath.Join(t.TempDir(), "state")
			path := nodestate.NewDir(stateDir).IdentityFile()
			writeJSON(t, path, nodestate.Identity{Version: 1, NodeID: "i-1", Zone: "zone-p", SavedAt: time.Now()})
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f := newRealCloud(t)
			f.AddInstance("i-1", cloudZone, 8, 1)
			f.FailNext(cloud.OperationGetInstance, cloud.NewError(cloud.CodeUnavailable, "down once"))
			n := NewNodeServer(NodeConfig{NodeID: "i-1", StateDir: stateDir, Cloud: f, Mounter: mount.NewFake(), Capacity: &fixedCapacity{slots: 3}})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			// Returns once the cloud has answered the check: one failure, one success.
			n.topo.Fetch(ctx)
			if ctx.Err() != nil {
				t.Fatal("Fetch did not finish")
			}
			if got := f.Calls(cloud.OperationGetInstance); got != 2 {
				t.Errorf("GetInstance called %d times, want 2", got)
			}
			resp, err := n.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
			wantCode(t, err, codes.OK)
			if z := resp.GetAccessibleTopology().GetSegments()[TopologyZoneKey]; z != "zone-p" {
				t.Errorf("zone = %q after the cloud said %q, want the persisted zone-p", z, cloudZone)
			}
			if after, _ := os.ReadFile(path); string(after) != string(before) {
				t.Errorf("persisted identity rewritten: %s", after)
			}
		})
	}
}

// TestDriverRestartsWithTheCloudDown runs a whole node plugin (NewForCloud, the real capacity
// reporter) on a state dir a previous process left, with the cloud unreachable: Probe turns
// ready and NodeGetInfo answers with the persisted zone and last trusted count.
func TestDriverRestartsWithTheCloudDown(t *testing.T) {
	dir := shortDir(t)
	stateDir := filepath.Join(dir, "state")
	writeJSON(t, nodestate.NewDir(stateDir).IdentityFile(), nodestate.Identity{Version: 1, NodeID: "i-1", Zone: "zone-p", SavedAt: time.Now()})
	writeJSON(t, filepath.Join(stateDir, "capacity.json"), persistedCapacity())
	f := newRealCloud(t)
	cloudDown(f)
	opts := DefaultOptions()
	opts.Mode, opts.NodeID, opts.StateDir = ModeNode, "i-1", stateDir
	sock := filepath.Join(dir, "csi.sock")
	opts.Endpoint = "unix://" + sock
	d, err := NewForCloud(opts, f, clustercheck.Decide(context.Background(), opts.ClusterCheckConfig(), nil, nil), mount.NewFake(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
	defer ccancel()
	for {
		p, err := csi.NewIdentityClient(conn).Probe(cctx, &csi.ProbeRequest{}, grpc.WaitForReady(true))
		wantCode(t, err, codes.OK)
		if p.GetReady().GetValue() {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, err := csi.NewNodeClient(conn).NodeGetInfo(cctx, &csi.NodeGetInfoRequest{})
	wantCode(t, err, codes.OK)
	if resp.GetAccessibleTopology().GetSegments()[TopologyZoneKey] != "zone-p" || resp.GetMaxVolumesPerNode() != 5 {
		t.Errorf("NodeGetInfo = %v, want zone-p and the persisted 5", resp)
	}

	// A second plugin on the same state dir is refused before it touches anything.
	opts2 := opts
	opts2.Endpoint = "unix://" + filepath.Join(dir, "other.sock")
	d2, err := NewForCloud(opts2, f, clustercheck.Decide(context.Background(), opts2.ClusterCheckConfig(), nil, nil), mount.NewFake(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	err = d2.Run(cctx)
	if err == nil || !contains(err.Error(), stateDir, "in use") {
		t.Errorf("second Run on the same state dir = %v, want an in-use error naming %s", err, stateDir)
	}
	if _, err := os.Lstat(filepath.Join(dir, "other.sock")); !os.IsNotExist(err) {
		t.Errorf("the refused plugin created its socket: %v", err)
	}
}

func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
