package store

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

func ptr(v int) *int { return &v }

// phases are records the store writes (attach, detach, a held or failed transition) and
// ones only encoding/json may write (escapes, HTML characters, non-ASCII, another zone, a
// year JSON refuses).
func recordPhases() []phase {
	now := time.Date(2026, 12, 1, 22, 15, 4, 123456789, time.UTC)
	return []phase{
		{},
		{State: cloud.StateAttached, Since: now},
		{State: cloud.StateAttaching, Since: now, Due: now.Add(300 * time.Millisecond), ReadOnly: true},
		{State: cloud.StateDetaching, Since: now.Truncate(time.Second), Due: now.Add(time.Hour), Stuck: true, Rule: "fault-12"},
		{State: cloud.StateError, Since: now, Fail: cloud.CodeInternalError, Instance: "node-a1", From: cloud.StateAttaching, Rule: "fault-1"},
		{State: cloud.StateAttached, Since: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		{State: cloud.StateAttached, Instance: `a"b\c`},
		{State: cloud.StateAttached, Rule: "<rule>&"},
		{State: cloud.StateAttached, Instance: "nöde"},
		{State: cloud.StateAttached, Instance: "tab\there"},
		{State: cloud.StateAttached, Since: now.In(time.FixedZone("x", 2*3600))},
		{State: cloud.StateAttached, Since: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	}
}

// encodePhase writes exactly encoding/json's bytes, and what it writes reads back as
// encoding/json reads it, through the fast path for the store's own records.
func TestPhaseRecordsMatchEncodingJSON(t *testing.T) {
	phases := recordPhases()
	rng := rand.New(rand.NewPCG(1, 2))
	states := []cloud.AttachState{cloud.StateAttaching, cloud.StateAttached, cloud.StateDetaching, cloud.StateDetached, cloud.StateError, ""}
	for range 500 {
		p := phase{State: states[rng.IntN(len(states))], Stuck: rng.IntN(2) == 0, ReadOnly: rng.IntN(2) == 0}
		if rng.IntN(3) > 0 {
			p.Since = time.Unix(rng.Int64N(1<<33), rng.Int64N(1e9)).UTC()
		}
		if rng.IntN(2) == 0 {
			p.Due = time.Unix(rng.Int64N(1<<33), rng.Int64N(1e9)/1000*1000).UTC()
		}
		if rng.IntN(2) == 0 {
			p.Rule = "fault-" + string(rune('a'+rng.IntN(26)))
		}
		phases = append(phases, p)
	}
	fast := 0
	for i, p := range phases {
		want, wantErr := json.Marshal(p)
		got, err := encodePhase(p)
		if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
			t.Errorf("phase %d %+v: encodePhase = %s, %v; json.Marshal = %s, %v", i, p, got, err, want, wantErr)
			continue
		}
		if err != nil {
			continue
		}
		checkDecode(t, got)
		if _, ok := parsePhase(got); ok {
			fast++
		}
	}
	// Every record but the five only encoding/json writes takes the fast path.
	if want := len(phases) - 6; fast < want {
		t.Errorf("%d of %d records read on the fast path, want at least %d", fast, len(phases), want)
	}
}

// checkDecode asserts that decodePhase(data) is json.Unmarshal's value and error.
func checkDecode(t *testing.T, data []byte) {
	t.Helper()
	var want phase
	wantErr := json.Unmarshal(data, &want)
	got, err := decodePhase(data)
	if (err != nil) != (wantErr != nil) {
		t.Errorf("decodePhase(%q) error %v, json.Unmarshal %v", data, err, wantErr)
		return
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Errorf("decodePhase(%q) = %+v, json.Unmarshal = %+v", data, got, want)
	}
}

// What only encoding/json reads is left to it, with its answer.
func TestDecodePhaseOddRecords(t *testing.T) {
	for _, s := range []string{
		`{}`, `{"s":"attached"}`, `{ "s":"attached"}`, `{"s":"attached","s":"detached"}`, `{"S":"attached"}`,
		`{"s":"attached","x":1}`, `{"s":"a\"b"}`, `{"s":"\u003c"}`, `{"k":false,"ro":true}`, `{"k":1}`,
		`{"t":"2026-12-01T22:15:04+02:00"}`, `{"t":"2026-12-01T22:15:04.5Z","d":"2026-12-01T22:15:05Z"}`, `{"t":"yesterday"}`,
		`{"t":null}`, `{"s":"attached"} `, `{"s":"attached"}x`, `{"s":"attached",}`, `{"s":"attached"`, `[]`, ``, `null`,
		`{"ro":true,"s":"detaching"}`, `{"s":"nöde"}`,
	} {
		checkDecode(t, []byte(s))
	}
}

func FuzzDecodePhase(f *testing.F) {
	for _, p := range recordPhases() {
		if data, err := json.Marshal(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"s":"attached","s":"x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data)
	})
}

// encodeEvent writes exactly encoding/json's bytes for the events attach and detach append
// and for the odd ones.
func TestEncodeEventMatchesJSON(t *testing.T) {
	now := time.Date(2026, 12, 1, 22, 15, 4, 120000000, time.UTC)
	for i, ev := range []cloud.Event{
		{Seq: 1, Revision: 1, Time: now, Type: "VolumeAttaching", VolumeID: "vol-0000002a", InstanceID: "node-1", Attached: ptr(3), Limit: ptr(8)},
		{Seq: 1 << 40, Revision: 7, Time: now, Type: "QuotasChanged", Detail: "attachments=10 volumes=20"},
		{Seq: 2, Revision: 2, Time: now, Type: "VolumeDetached", VolumeID: "vol-1", InstanceID: "node-1", Attached: ptr(0), Limit: ptr(-1)},
		{Seq: 3, Time: now, Type: "FaultFired", Detail: "rule=fault-1 operation=AttachVolume error=Throttled latencyMs=0"},
		{Seq: 4, Time: now, Type: "FaultFired", Detail: `say "<hi>" & go`},
		{Seq: 5, Time: now.In(time.FixedZone("x", -3600)), Type: "X"},
		{Seq: 6, Type: "X"},
		{Seq: 7, Time: now, Type: "X", Detail: "naïve"},
	} {
		want, wantErr := json.Marshal(ev)
		got, err := encodeEvent(ev)
		if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
			t.Errorf("event %d: encodeEvent = %s, %v; json.Marshal = %s, %v", i, got, err, want, wantErr)
		}
	}
}

func TestPlainString(t *testing.T) {
	for s, want := range map[string]bool{"": true, "vol-0000002a": true, "rule=a op=b": true, "~!@#$%^*()": true,
		`"`: false, `\`: false, "<": false, ">": false, "&": false, "\x7f": false, "\n": false, "é": false} {
		if got := plainString(s); got != want {
			t.Errorf("plainString(%q) = %v, want %v", s, got, want)
		}
	}
}
