package csi

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

// TestStageCloneCopiesTheSourceOnce: the first stage of a clone copies its source's backing
// data (files and the sparse block file); a later stage keeps what the clone wrote since; a
// source that has no data gives an empty clone; a source that cannot name a volume is
// INVALID_ARGUMENT before anything is touched.
func TestStageCloneCopiesTheSourceOnce(t *testing.T) {
	ctx := context.Background()
	e := newNode(t, mount.NewFake(), nil)
	n := e.srv
	// The cloud's records say what each clone was made from (the node checks them).
	srcVol := e.fake.AddVolume(cloud.CreateVolumeRequest{Name: "src", SizeBytes: GiB, Zone: "zone-a"}).ID
	if err := os.MkdirAll(filepath.Join(n.dataDir(srcVol), "sub"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.dataDir(srcVol), "sub", "f"), []byte("source data"), 0o640); err != nil {
		t.Fatal(err)
	}
	// A 64 MiB sparse block file with 4 KiB written at 32 MiB.
	block, err := os.Create(n.blockFile(srcVol))
	if err != nil {
		t.Fatal(err)
	}
	if err := block.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	if _, err := block.WriteAt(bytes.Repeat([]byte{7}, 4096), 32<<20); err != nil {
		t.Fatal(err)
	}
	block.Close()

	never := e.fake.AddVolume(cloud.CreateVolumeRequest{Name: "never-staged", SizeBytes: GiB, Zone: "zone-a"}).ID
	clone := e.fake.AddVolume(cloud.CreateVolumeRequest{Name: "clone", SizeBytes: GiB, Zone: "zone-a", SourceVolumeID: srcVol}).ID
	emptyClone := e.fake.AddVolume(cloud.CreateVolumeRequest{Name: "empty-clone", SizeBytes: GiB, Zone: "zone-a", SourceVolumeID: never}).ID
	stage := func(id, src string) error {
		vc := map[string]string{}
		if src != "" {
			vc[VolumeContextSourceVolume] = src
		}
		_, err := n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: filepath.Join(e.dir, "staging", id),
			VolumeCapability: rwo, VolumeContext: vc})
		return err
	}
	wantCode(t, stage(clone, srcVol), codes.OK)
	got, err := os.ReadFile(filepath.Join(n.dataDir(clone), "sub", "f"))
	if err != nil || string(got) != "source data" {
		t.Fatalf("clone's file = %q, %v; want the source's", got, err)
	}
	cb, err := os.ReadFile(n.blockFile(clone))
	if err != nil || len(cb) != 64<<20 || cb[32<<20] != 7 || cb[32<<20+4095] != 7 || cb[32<<20+4096] != 0 || cb[0] != 0 {
		t.Fatalf("clone's block file: %d bytes, %v; want the source's 64 MiB with its 4 KiB of 7s", len(cb), err)
	}
	var st unix.Stat_t
	if err := unix.Stat(n.blockFile(clone), &st); err != nil || st.Blocks*512 > 8<<20 {
		t.Errorf("clone's block file takes %d bytes on disk (%v); want it sparse", st.Blocks*512, err)
	}
	// The clone writes; staging it again copies nothing over it.
	if err := os.WriteFile(filepath.Join(n.dataDir(clone), "sub", "f"), []byte("clone data"), 0o640); err != nil {
		t.Fatal(err)
	}
	wantCode(t, stage(clone, srcVol), codes.OK)
	if got, _ := os.ReadFile(filepath.Join(n.dataDir(clone), "sub", "f")); string(got) != "clone data" {
		t.Errorf("restage overwrote the clone's data: %q", got)
	}
	wantCode(t, stage(emptyClone, never), codes.OK)
	if entries, err := os.ReadDir(n.dataDir(emptyClone)); err != nil || len(entries) != 0 {
		t.Errorf("clone of a source without data: %v, %v; want an empty data folder", entries, err)
	}
	for _, src := range []string{"../" + srcVol, "vol-bad", "a\x00"} {
		id := "vol-bad"
		wantCode(t, stage(id, src), codes.InvalidArgument)
		if _, err := os.Stat(n.backingDir(id)); !os.IsNotExist(err) {
			t.Errorf("refused clone of %q left a backing folder (%v)", src, err)
		}
	}
}
