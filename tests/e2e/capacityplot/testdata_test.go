package capacityplot

import (
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

func i64(v int64) *int64 { return &v }

func step(sec float64, rev uint64, cause string, truth int64, attached int) TruthStep {
	return TruthStep{At: at(sec), Revision: rev, Cause: cause, Truth: truth, Attached: attached}
}

// synthRecording is two nodes over 60 s: node-1's truth goes 7 → 5 → 7 and
// CSINode follows 4 s and 5 s later; node-2 has no cloud change and one
// floor write.
func synthRecording() *Recording {
	rec := &Recording{
		Title: "synthetic <run>", Driver: "disk.fakecloud.dev", Start: t0, End: at(60), Interval: 2 * time.Second,
		Nodes:   []string{"node-1", "node-2"},
		NodeIDs: map[string]string{"node-1": "node-1", "node-2": "i-2"},
		Truth: map[string][]TruthStep{
			"node-1": {step(0, 10, "baseline", 7, 0), step(10, 11, "InstancePatched", 5, 0), step(20, 12, "VolumeAttached", 5, 1), step(30, 13, "InstancePatched", 7, 1)},
			"node-2": {step(0, 10, "baseline", 3, 0)},
		},
		Initial: map[string]*int64{"node-1": i64(7), "node-2": i64(3)},
		Writes:  map[string]int{"node-1": 3, "node-2": 1},
		Changes: []CountChange{
			{Node: "node-1", At: at(14), ResourceVersion: "101", Old: i64(7), New: i64(5)},
			{Node: "node-2", At: at(40), ResourceVersion: "102", Old: i64(3), New: i64(1)},
			{Node: "node-1", At: at(35), ResourceVersion: "103", Old: i64(5), New: i64(7)},
		},
		Notes: []string{"a note & <escape>"},
	}
	for i := range 31 {
		sec := float64(2 * i)
		for _, n := range rec.Nodes {
			tr, _ := TruthAt(rec.Truth[n], at(sec))
			s := Sample{At: at(sec), Node: n, Truth: tr.Truth, Scheduled: min(i/5, 3),
				Cloud: &cloud.Capacity{InstanceID: rec.NodeIDs[n], Attached: tr.Attached, Revision: tr.Revision}}
			rec.Samples = append(rec.Samples, s)
		}
	}
	rec.Lags = map[string][]Lag{}
	for _, n := range rec.Nodes {
		var cs []CountChange
		for _, c := range rec.Changes {
			if c.Node == n {
				cs = append(cs, c)
			}
		}
		rec.Lags[n] = ComputeLags(rec.Truth[n], cs)
	}
	return rec
}
