package store_test

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
)

// BenchmarkStoreAttachDetach measures attach+detach on the store alone, on disk, with one
// caller and with 64, and reports mutations per commit: how well group commit shares fsyncs.
// bench/cloud measures the same through HTTP.
//
//	go test -run '^$' -bench StoreAttachDetach ./pkg/cloud/server/store/
func BenchmarkStoreAttachDetach(b *testing.B) {
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprint("callers-", callers), func(b *testing.B) {
			s, err := store.Open(b.TempDir(), store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			st := store.State{
				InstanceTypes: []cloud.InstanceType{{Name: "t", MaxAttachments: 16}},
				Quotas:        store.Limits{Attachments: 1000, Volumes: 1000, CapacityBytes: 1 << 40},
			}
			for i := range 8 {
				st.Instances = append(st.Instances, store.SeedInstance{CreateInstanceRequest: cloud.CreateInstanceRequest{ID: fmt.Sprint("n", i), Zone: "z", InstanceType: "t"}})
			}
			if _, err := s.SeedIfEmpty(st); err != nil {
				b.Fatal(err)
			}
			procs := runtime.GOMAXPROCS(0)
			par := (callers + procs - 1) / procs
			vols := make([]string, par*procs)
			for i := range vols {
				v, err := s.CreateVolume(cloud.CreateVolumeRequest{Name: fmt.Sprint("v", i), SizeBytes: 1, Zone: "z"})
				if err != nil {
					b.Fatal(err)
				}
				vols[i] = v.ID
			}
			tx0, err := store.LastTxID(s)
			if err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			start := time.Now()
			b.ResetTimer()
			cycle := func(i int) error {
				inst := fmt.Sprint("n", i%8)
				if _, err := s.Attach(vols[i], inst, nil, nil); err != nil {
					return err
				}
				_, err := s.Detach(vols[i], inst, nil)
				return err
			}
			if callers == 1 {
				for range b.N {
					if err := cycle(0); err != nil {
						b.Fatal(err)
					}
				}
			} else {
				b.SetParallelism(par)
				b.RunParallel(func(pb *testing.PB) {
					i := int(next.Add(1) - 1)
					for pb.Next() {
						if err := cycle(i); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			elapsed := time.Since(start)
			tx1, err := store.LastTxID(s)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(2*b.N)/elapsed.Seconds(), "ops/s")
			b.ReportMetric(float64(2*b.N)/float64(tx1-tx0), "mutations/commit")
		})
	}
}

// BenchmarkCompleteDue measures one pass of the transition worker over many transitions under
// way of which none is due (the common case: the worker woke to schedule a new one): the cost
// of reading the pending records, which carry their schedule so that no JSON is decoded.
//
//	go test -run '^$' -bench CompleteDue ./pkg/cloud/server/store/
func BenchmarkCompleteDue(b *testing.B) {
	for _, pending := range []int{10, 1000} {
		b.Run(fmt.Sprint("pending-", pending), func(b *testing.B) {
			s, err := store.Open("", store.Options{AttachDuration: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			st := store.State{
				InstanceTypes: []cloud.InstanceType{{Name: "t", MaxAttachments: 128}},
				Quotas:        store.Limits{Attachments: 100000, Volumes: 100000, CapacityBytes: 1 << 50},
			}
			for i := range (pending + 127) / 128 {
				st.Instances = append(st.Instances, store.SeedInstance{CreateInstanceRequest: cloud.CreateInstanceRequest{ID: fmt.Sprint("n", i), Zone: "z", InstanceType: "t"}})
			}
			if _, err := s.SeedIfEmpty(st); err != nil {
				b.Fatal(err)
			}
			for i := range pending {
				v, err := s.CreateVolume(cloud.CreateVolumeRequest{Name: fmt.Sprint("v", i), SizeBytes: 1, Zone: "z"})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.Attach(v.ID, fmt.Sprint("n", i/128), nil, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				if n, _, err := s.CompleteDue(nil); err != nil || n != 0 {
					b.Fatalf("CompleteDue: %d, %v", n, err)
				}
			}
		})
	}
}
