package csi

import (
	"context"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

// memoryCapacity is a fixedCapacity that also answers from memory (cachedCapacity) when
// inMemory is set, and records whether each MaxVolumesPerNode call's context had a deadline.
type memoryCapacity struct {
	fixedCapacity
	inMemory  bool
	deadlines []bool
}

func (c *memoryCapacity) CachedMaxVolumesPerNode(context.Context) (int64, bool) {
	return c.slots, c.inMemory
}

func (c *memoryCapacity) MaxVolumesPerNode(ctx context.Context) (int64, error) {
	_, ok := ctx.Deadline()
	c.deadlines = append(c.deadlines, ok)
	return c.fixedCapacity.MaxVolumesPerNode(ctx)
}

// TestNodeGetInfoFromMemory asserts the kubelet's periodic NodeGetInfo, once the zone is
// known and the reporter needs no lookup, is answered from memory: the same answer, no call
// that may wait (MaxVolumesPerNode), and no per-call work but the response (no timeout
// context, no topology map). When a lookup is due the call is bounded as before:
// MaxVolumesPerNode sees DefaultNodeInfoTimeout's deadline although the caller set none.
func TestNodeGetInfoFromMemory(t *testing.T) {
	tests := []struct {
		name      string
		capacity  *memoryCapacity
		wantSlots int64
		// wantMaxCalls is how many MaxVolumesPerNode calls the calls after the first make.
		wantMaxCalls int
	}{
		{name: "in memory", capacity: &memoryCapacity{fixedCapacity: fixedCapacity{slots: 7}, inMemory: true}, wantSlots: 7},
		{name: "in memory, zero becomes one", capacity: &memoryCapacity{fixedCapacity: fixedCapacity{slots: 0}, inMemory: true}, wantSlots: 1},
		{name: "lookup due", capacity: &memoryCapacity{fixedCapacity: fixedCapacity{slots: 5}}, wantSlots: 5, wantMaxCalls: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newNode(t, mount.NewFake(), tc.capacity)
			ctx := context.Background() // no deadline, as the benchmark's calls
			check := func() {
				t.Helper()
				resp, err := e.srv.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
				wantCode(t, err, codes.OK)
				if resp.GetMaxVolumesPerNode() != tc.wantSlots || resp.GetNodeId() != "i-1" ||
					len(resp.GetAccessibleTopology().GetSegments()) != 1 ||
					resp.GetAccessibleTopology().GetSegments()[TopologyZoneKey] != "zone-a" {
					t.Fatalf("NodeGetInfo = %v, want i-1, zone-a, %d slots", resp, tc.wantSlots)
				}
			}
			check() // learns the zone from the cloud: the bounded path
			if len(tc.capacity.deadlines) != 1 || !tc.capacity.deadlines[0] {
				t.Fatalf("first call: MaxVolumesPerNode deadlines = %v, want [true]", tc.capacity.deadlines)
			}
			tc.capacity.deadlines = nil
			for range 3 {
				check()
			}
			if len(tc.capacity.deadlines) != tc.wantMaxCalls {
				t.Fatalf("MaxVolumesPerNode called %d times after the zone was known, want %d", len(tc.capacity.deadlines), tc.wantMaxCalls)
			}
			for i, ok := range tc.capacity.deadlines {
				if !ok {
					t.Fatalf("MaxVolumesPerNode call %d had no deadline: NodeGetInfo must bound a call that may wait", i)
				}
			}
			if tc.wantMaxCalls > 0 || tc.capacity.slots < 1 { // (a reporter bug is logged, on purpose)
				return
			}
			// The response is the only allocation: no timeout context, timer or map.
			allocs := testing.AllocsPerRun(100, func() {
				if _, err := e.srv.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{}); err != nil {
					t.Fatal(err)
				}
			})
			if allocs > 1 {
				t.Errorf("NodeGetInfo from memory allocates %v times per call, want at most 1 (the response)", allocs)
			}
		})
	}
}
