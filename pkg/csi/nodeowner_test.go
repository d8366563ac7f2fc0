package csi

// Regression tests of the node's ownership of its paths: a stage, publish or unstage acts
// only on this volume's own stage (its stage record, with the access type, and a mount that
// is provably of this volume's data folder or loop device), never on another volume's mount
// or on a pod's data.

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/fakecloud/fakecloud-csi/pkg/csi/mount"
)

// ownerVol is one volume of these tests, staged as mount or block.
type ownerVol struct {
	id    string
	block bool
}

func (v ownerVol) cap() *csi.VolumeCapability {
	if v.block {
		return blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
	}
	return rwo
}

func (v ownerVol) stageReq(staging string) *csi.NodeStageVolumeRequest {
	r := &csi.NodeStageVolumeRequest{VolumeId: v.id, StagingTargetPath: staging, VolumeCapability: v.cap()}
	if v.block {
		r.VolumeContext = map[string]string{VolumeContextSizeBytes: "1048576"}
	}
	return r
}

// stagedAt is the staged mount point of v at staging.
func (v ownerVol) stagedAt(staging string) string {
	if v.block {
		return filepath.Join(staging, stagedBlockFile)
	}
	return staging
}

func (v ownerVol) String() string { return v.id + "/" + accessType(v.block) }

// wantStagedMount fails unless the mount at p is v's own: its loop device, or its data
// folder (on the real mounter, a file written in the data folder shows at p).
func wantStagedMount(t *testing.T, e *nodeEnv, v ownerVol, p string) {
	t.Helper()
	mp, err := e.mounter.MountPoint(p)
	if err != nil || mp == nil {
		t.Fatalf("%s: %s is not mounted (%+v, %v)", v, p, mp, err)
	}
	if v.block {
		if lp := wantLoop(t, e.mounter, e.srv.blockFile(v.id), true); mp.Device != lp.Device {
			t.Fatalf("%s: %s is a mount of device %q, want its loop %s", v, p, mp.Device, lp.Device)
		}
		return
	}
	if e.real {
		probe := filepath.Join(e.srv.dataDir(v.id), "probe-"+v.id)
		if err := os.WriteFile(probe, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(probe)
		if _, err := os.Stat(filepath.Join(p, "probe-"+v.id)); err != nil {
			t.Fatalf("%s: %s does not show its data folder: %v", v, p, err)
		}
	} else if mp.Root != e.srv.dataDir(v.id) {
		t.Fatalf("%s: %s is a mount of %s, want %s", v, p, mp.Root, e.srv.dataDir(v.id))
	}
}

// TestNodeUnstageLeavesPodEntryNamedBlock: before, NodeUnstageVolume of a MOUNT volume always
// unmounted and removed <staging>/block, which for a mount volume is the pod's own data at
// the volume's root: a pod's file, empty file, link or empty folder named "block" was
// deleted by a plain unpublish + unstage, and a folder "block" with contents made every
// unstage fail INTERNAL, so the volume was never unstaged. Now only a block stage (its stage
// record says so, or, without a record, the mount at <staging>/block is the volume's own
// loop device) touches <staging>/block. Also checked without a stage record (a lost marker):
// the staging mount, proved to be the volume's data folder, is unmounted, and block stays.
func TestNodeUnstageLeavesPodEntryNamedBlock(t *testing.T) {
	entries := map[string]func(p string) error{
		"file with data": func(p string) error { return os.WriteFile(p, []byte("the pod's data"), 0o644) },
		"empty file":     func(p string) error { return os.WriteFile(p, nil, 0o644) },
		"symlink":        func(p string) error { return os.Symlink("/etc/hostname", p) },
		"empty folder":   func(p string) error { return os.Mkdir(p, 0o755) },
		"full folder":    func(p string) error { return os.MkdirAll(filepath.Join(p, "x"), 0o755) },
	}
	for name, mk := range entries {
		for _, lostRecord := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "", true: "/no stage record"}[lostRecord], func(t *testing.T) {
				mounters(t, func(t *testing.T, m mount.Mounter) {
					ctx := context.Background()
					e := newNode(t, m, nil)
					v := ownerVol{id: "vol-1"}
					staging, target := filepath.Join(e.dir, "staging"), filepath.Join(e.dir, "pods", "p")
					cleanupMounts(t, m, target, staging)
					_, err := e.srv.NodeStageVolume(ctx, v.stageReq(staging))
					wantCode(t, err, codes.OK)
					_, err = e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: v.id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: rwo})
					wantCode(t, err, codes.OK)
					entry := filepath.Join(e.srv.dataDir(v.id), stagedBlockFile)
					if err := mk(entry); err != nil {
						t.Fatal(err)
					}
					before, err := os.Lstat(entry)
					if err != nil {
						t.Fatal(err)
					}
					_, err = e.srv.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: v.id, TargetPath: target})
					wantCode(t, err, codes.OK)
					srv := e.srv
					if lostRecord {
						if err := os.Remove(e.srv.dir.StagedMarker(v.id)); err != nil {
							t.Fatal(err)
						}
						// A restarted plugin: it reads the (now missing) records again.
						srv = NewNodeServer(e.srv.cfg)
					}
					_, err = srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: v.id, StagingTargetPath: staging})
					wantCode(t, err, codes.OK)
					after, err := os.Lstat(entry)
					if err != nil || after.Mode() != before.Mode() || after.Size() != before.Size() {
						t.Errorf("the pod's %q at the volume's root is %v, %v after unstage; want it untouched (%v)", stagedBlockFile, after, err, before)
					}
					if mp, _ := m.MountPoint(staging); mp != nil {
						t.Errorf("staging still mounted after unstage: %+v", mp)
					}
				})
			})
		}
	}
}

// TestNodeStageOrPublishAtAnotherVolumesStage: before, NodePublishVolume(B) with
// staging_target_path = volume A's staging path answered OK and published A's data (or A's
// loop device) as B's, and NodeStageVolume(B) there answered OK and adopted A's mount (block:
// A's device bind was replaced by B's loop). Now a publish needs B's own stage record at
// exactly that path, of the same access type, and the mount there must be B's (its data
// folder or loop device); a stage refuses a path where another volume is recorded or
// mounted: FAILED_PRECONDITION, and A's stage is untouched.
func TestNodeStageOrPublishAtAnotherVolumesStage(t *testing.T) {
	for _, a := range []ownerVol{{id: "vol-a"}, {id: "vol-a", block: true}} {
		for _, b := range []ownerVol{{id: "vol-b"}, {id: "vol-b", block: true}} {
			t.Run(a.String()+" then "+b.String(), func(t *testing.T) {
				mounters(t, func(t *testing.T, m mount.Mounter) {
					ctx := context.Background()
					e := newNode(t, m, nil)
					sa, tb := filepath.Join(e.dir, "sa"), filepath.Join(e.dir, "pods", "b")
					cleanupLoops(t, m, e.srv.blockFile(a.id), e.srv.blockFile(b.id))
					cleanupMounts(t, m, tb, a.stagedAt(sa), b.stagedAt(sa))
					_, err := e.srv.NodeStageVolume(ctx, a.stageReq(sa))
					wantCode(t, err, codes.OK)
					_, err = e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: b.id, StagingTargetPath: sa, TargetPath: tb, VolumeCapability: b.cap()})
					wantCode(t, err, codes.FailedPrecondition)
					if mp, _ := m.MountPoint(tb); mp != nil {
						t.Errorf("publish of %s from %s's staging path mounted %+v", b, a, mp)
					}
					_, err = e.srv.NodeStageVolume(ctx, b.stageReq(sa))
					wantCode(t, err, codes.FailedPrecondition)
					wantStagedMount(t, e, a, a.stagedAt(sa))
					if a.block != b.block {
						if mp, _ := m.MountPoint(b.stagedAt(sa)); mp != nil && !b.block {
							t.Errorf("stage of %s mounted over %s's staging path: %+v", b, a, mp)
						}
					}
					_, err = e.srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: a.id, StagingTargetPath: sa})
					wantCode(t, err, codes.OK)
					if mp, _ := m.MountPoint(a.stagedAt(sa)); mp != nil {
						t.Errorf("%s still mounted after unstage: %+v", a.stagedAt(sa), mp)
					}
				})
			})
		}
	}
}

// TestNodePublishOnlyFromItsOwnStage: a publish whose staging_target_path is not where the
// volume is recorded as staged (it is staged elsewhere), or whose staging mount is not the
// volume's own (someone mounted another volume's data there), is FAILED_PRECONDITION and
// mounts nothing. Before, both published whatever was mounted at that path.
func TestNodePublishOnlyFromItsOwnStage(t *testing.T) {
	mounters(t, func(t *testing.T, m mount.Mounter) {
		ctx := context.Background()
		e := newNode(t, m, nil)
		a, b := ownerVol{id: "vol-a"}, ownerVol{id: "vol-b"}
		sa, sb, tb := filepath.Join(e.dir, "sa"), filepath.Join(e.dir, "sb"), filepath.Join(e.dir, "pods", "b")
		cleanupMounts(t, m, tb, sa, sb)
		for _, s := range []struct {
			v ownerVol
			p string
		}{{a, sa}, {b, sb}} {
			_, err := e.srv.NodeStageVolume(ctx, s.v.stageReq(s.p))
			wantCode(t, err, codes.OK)
		}
		pub := &csi.NodePublishVolumeRequest{VolumeId: b.id, StagingTargetPath: sa, TargetPath: tb, VolumeCapability: rwo}
		_, err := e.srv.NodePublishVolume(ctx, pub)
		wantCode(t, err, codes.FailedPrecondition)
		// B's staging mount swapped for A's data: B's record still says sb.
		if err := m.Unmount(sb); err != nil {
			t.Fatal(err)
		}
		if err := m.BindMount(e.srv.dataDir(a.id), sb, false); err != nil {
			t.Fatal(err)
		}
		pub.StagingTargetPath = sb
		_, err = e.srv.NodePublishVolume(ctx, pub)
		wantCode(t, err, codes.FailedPrecondition)
		if mp, _ := m.MountPoint(tb); mp != nil {
			t.Errorf("publish of %s mounted %+v", b, mp)
		}
	})
}

// TestNodeUnstageUnknownVolumeTouchesNothing: before, NodeUnstageVolume of a volume not staged
// on this node at another volume's publish target answered OK and unmounted that publish
// (and removed <target>/block from its data); at a folder inside another volume's staging
// mount it deleted the pod's file <folder>/block. Now, without a stage record, only a mount
// that is provably this volume's is undone: the call answers OK (CSI: unstage is idempotent)
// and touches nothing else.
func TestNodeUnstageUnknownVolumeTouchesNothing(t *testing.T) {
	for _, a := range []ownerVol{{id: "vol-a"}, {id: "vol-a", block: true}} {
		t.Run(a.String(), func(t *testing.T) {
			mounters(t, func(t *testing.T, m mount.Mounter) {
				ctx := context.Background()
				e := newNode(t, m, nil)
				sa, ta := filepath.Join(e.dir, "sa"), filepath.Join(e.dir, "pods", "a")
				cleanupLoops(t, m, e.srv.blockFile(a.id))
				cleanupMounts(t, m, ta, a.stagedAt(sa))
				_, err := e.srv.NodeStageVolume(ctx, a.stageReq(sa))
				wantCode(t, err, codes.OK)
				_, err = e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: a.id, StagingTargetPath: sa, TargetPath: ta, VolumeCapability: a.cap()})
				wantCode(t, err, codes.OK)
				paths := []string{ta, sa}
				var podFile string
				if !a.block {
					// A pod's folder "sub" with a file "block" in it, inside A's data.
					sub := filepath.Join(e.srv.dataDir(a.id), "sub")
					podFile = filepath.Join(sub, stagedBlockFile)
					if err := os.MkdirAll(sub, 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(podFile, nil, 0o644); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(e.srv.dataDir(a.id), stagedBlockFile), nil, 0o644); err != nil {
						t.Fatal(err)
					}
					paths = append(paths, filepath.Join(sa, "sub"), filepath.Join(ta, "sub"))
				}
				for _, p := range paths {
					_, err := e.srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-z", StagingTargetPath: p})
					wantCode(t, err, codes.OK)
				}
				wantStagedMount(t, e, a, a.stagedAt(sa))
				wantStagedMount(t, e, a, ta)
				if podFile != "" {
					for _, f := range []string{podFile, filepath.Join(e.srv.dataDir(a.id), stagedBlockFile)} {
						if _, err := os.Lstat(f); err != nil {
							t.Errorf("the pod's file %s is gone: %v", f, err)
						}
					}
				}
				_, err = e.srv.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: a.id, TargetPath: ta})
				wantCode(t, err, codes.OK)
				_, err = e.srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: a.id, StagingTargetPath: sa})
				wantCode(t, err, codes.OK)
			})
		})
	}
}

// TestNodeStageSecondPathRefused: before, staging a volume at a second path answered OK and
// replaced its stage record, so the CO's unstage of the first path was a no-op OK and that
// mount leaked (block: the device bind outlived the loop's detach). Now a second stage at
// a different path is FAILED_PRECONDITION (CSI spec, NodeStageVolume errors: "Volume
// already staged at a different staging_target_path") and mounts nothing; after the unstage
// of the first path nothing is left, and the volume may be staged at the second.
func TestNodeStageSecondPathRefused(t *testing.T) {
	for _, v := range []ownerVol{{id: "vol-a"}, {id: "vol-a", block: true}} {
		t.Run(v.String(), func(t *testing.T) {
			mounters(t, func(t *testing.T, m mount.Mounter) {
				ctx := context.Background()
				e := newNode(t, m, nil)
				s1, s2 := filepath.Join(e.dir, "s1"), filepath.Join(e.dir, "s2")
				cleanupLoops(t, m, e.srv.blockFile(v.id))
				cleanupMounts(t, m, v.stagedAt(s1), v.stagedAt(s2))
				_, err := e.srv.NodeStageVolume(ctx, v.stageReq(s1))
				wantCode(t, err, codes.OK)
				_, err = e.srv.NodeStageVolume(ctx, v.stageReq(s2))
				wantCode(t, err, codes.FailedPrecondition)
				if mp, _ := m.MountPoint(v.stagedAt(s2)); mp != nil {
					t.Errorf("the refused second stage mounted %+v", mp)
				}
				for _, s := range []string{s2, s1} {
					_, err := e.srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: v.id, StagingTargetPath: s})
					wantCode(t, err, codes.OK)
				}
				if mp, _ := m.MountPoint(v.stagedAt(s1)); mp != nil {
					t.Errorf("%s still mounted after the CO unstaged it: %+v", s1, mp)
				}
				if v.block {
					wantLoop(t, m, e.srv.blockFile(v.id), false)
				}
				_, err = e.srv.NodeStageVolume(ctx, v.stageReq(s2))
				wantCode(t, err, codes.OK)
				_, err = e.srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: v.id, StagingTargetPath: s2})
				wantCode(t, err, codes.OK)
			})
		})
	}
}

// TestNodeBlockBackingFileMustBeItsOwn: before, a block.img that was a hard link to another
// file (another volume's backing file: the same data under two names), or a bind mount of
// another file over block.img, passed as the volume's regular backing file and was sized and
// attached: the stage served someone else's data. Now the backing file must have one link and
// be on the same mount as its folder; else FAILED_PRECONDITION and no loop device.
func TestNodeBlockBackingFileMustBeItsOwn(t *testing.T) {
	cases := map[string]struct {
		realOnly bool
		make     func(t *testing.T, m mount.Mounter, img, other string)
	}{
		"hard link": {make: func(t *testing.T, _ mount.Mounter, img, other string) {
			if err := os.Link(other, img); err != nil {
				t.Fatal(err)
			}
		}},
		"bind mount over it": {realOnly: true, make: func(t *testing.T, m mount.Mounter, img, other string) {
			if err := os.WriteFile(img, nil, 0o640); err != nil {
				t.Fatal(err)
			}
			if err := m.BindMount(other, img, false); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.Unmount(img) })
		}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			mounters(t, func(t *testing.T, m mount.Mounter) {
				e := newNode(t, m, nil)
				if c.realOnly && !e.real {
					t.Skip("the fake mounter makes no mount the file system sees")
				}
				ctx := context.Background()
				v := ownerVol{id: "vol-1", block: true}
				staging := filepath.Join(e.dir, "staging")
				img, other := e.srv.blockFile(v.id), filepath.Join(e.dir, "other.img")
				cleanupLoops(t, m, img, other)
				cleanupMounts(t, m, v.stagedAt(staging))
				if err := os.WriteFile(other, make([]byte, 1<<20), 0o640); err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(filepath.Dir(img), 0o750); err != nil {
					t.Fatal(err)
				}
				c.make(t, m, img, other)
				_, err := e.srv.NodeStageVolume(ctx, v.stageReq(staging))
				wantCode(t, err, codes.FailedPrecondition)
				wantLoop(t, m, other, false)
				if mp, _ := m.MountPoint(v.stagedAt(staging)); mp != nil {
					t.Errorf("stage mounted %+v", mp)
				}
			})
		})
	}
}

// TestNodeRefusesIDsTheCloudNeverMakes: before, the node staged any cloud-shaped volume_id
// without asking the cloud, a snapshot's ID (snap-…) or "vol-X.clone", which is also the
// temporary folder seedFrom copies a clone into, so two volumes could share one folder. Now
// a well-formed ID that is not "vol-" and letters, digits, '-' or '_' is NOT_FOUND (no such
// volume; after the INVALID_ARGUMENT checks, so csi-sanity's "fake-vol-id-…" stays NOT_FOUND)
// and nothing is created; as a clone source it is INVALID_ARGUMENT.
func TestNodeRefusesIDsTheCloudNeverMakes(t *testing.T) {
	ctx := context.Background()
	e := newNode(t, mount.NewFake(), nil)
	staging, target := filepath.Join(e.dir, "staging"), filepath.Join(e.dir, "target")
	for _, id := range []string{"snap-00000015", "vol-1.clone", "vol-1:x", "fake-vol-id-0123456789", "vol-", "VOL-1"} {
		t.Run(id, func(t *testing.T) {
			_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: rwo})
			wantCode(t, err, codes.NotFound)
			_, err = e.srv.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: rwo})
			wantCode(t, err, codes.NotFound)
			_, err = e.srv.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging})
			wantCode(t, err, codes.NotFound)
			_, err = e.srv.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target})
			wantCode(t, err, codes.NotFound)
			_, err = e.srv.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: staging})
			wantCode(t, err, codes.NotFound)
			_, err = e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-2", StagingTargetPath: staging, VolumeCapability: rwo,
				VolumeContext: map[string]string{VolumeContextSourceVolume: id}})
			wantCode(t, err, codes.InvalidArgument)
			for _, p := range []string{staging, target, e.srv.backingDir(id)} {
				if _, err := os.Lstat(p); !os.IsNotExist(err) {
					t.Errorf("%s was created: %v", p, err)
				}
			}
		})
	}
	_, err := e.srv.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-0000002a", StagingTargetPath: staging, VolumeCapability: rwo})
	wantCode(t, err, codes.OK)
}
