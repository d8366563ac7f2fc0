package store

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// Every attach and detach writes a volume's phase and one or two events, and reads the
// phase: JSON records of on-disk format 3, which encoding/json turned into about a tenth of
// the durable cloud's CPU per request (reflection, and a time parse through the decoder).
// The functions here write and read the same bytes by hand for the records those requests
// make: plain ASCII strings and UTC times. Anything else (a string that JSON escapes, a
// time in another zone, a record written by hand) goes through encoding/json as before, so
// the stored bytes and the decoded values are exactly encoding/json's; the tests hold the
// fast paths to it.

// plainString reports whether encoding/json writes s as is between quotes: printable ASCII
// without the characters it escapes (", \ and, as Marshal escapes HTML, <, > and &).
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// fastTime reports whether appendTime writes t as encoding/json does: a UTC time in years
// 0-9999 (time.Time.MarshalJSON refuses other years).
func fastTime(t time.Time) bool {
	return t.Location() == time.UTC && t.Year() >= 0 && t.Year() <= 9999
}

func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendTime is time.Time.MarshalJSON of a time fastTime accepts.
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// encodePhase is json.Marshal(p).
func encodePhase(p phase) ([]byte, error) {
	if !plainString(string(p.State)) || !plainString(p.Rule) || !plainString(string(p.Fail)) || !plainString(p.Instance) ||
		!plainString(string(p.From)) || (!p.Since.IsZero() && !fastTime(p.Since)) || (!p.Due.IsZero() && !fastTime(p.Due)) {
		return json.Marshal(p)
	}
	b := make([]byte, 0, 96)
	b = appendString(append(b, `{"s":`...), string(p.State))
	if !p.Since.IsZero() {
		b = appendTime(append(b, `,"t":`...), p.Since)
	}
	if !p.Due.IsZero() {
		b = appendTime(append(b, `,"d":`...), p.Due)
	}
	if p.Stuck {
		b = append(b, `,"k":true`...)
	}
	if p.Rule != "" {
		b = appendString(append(b, `,"r":`...), p.Rule)
	}
	if p.Fail != "" {
		b = appendString(append(b, `,"f":`...), string(p.Fail))
	}
	if p.Instance != "" {
		b = appendString(append(b, `,"i":`...), p.Instance)
	}
	if p.From != "" {
		b = appendString(append(b, `,"o":`...), string(p.From))
	}
	if p.ReadOnly {
		b = append(b, `,"ro":true`...)
	}
	return append(b, '}'), nil
}

// decodePhase is json.Unmarshal(data, &p) for a fresh p.
func decodePhase(data []byte) (phase, error) {
	if p, ok := parsePhase(data); ok {
		return p, nil
	}
	var p phase
	err := json.Unmarshal(data, &p)
	return p, err
}

// phaseKey is the index of a phase record's key in encodePhase's order, -1 for another
// key: parsePhase refuses a key seen twice (encoding/json keeps the last).
func phaseKey(key string) int {
	switch key {
	case "s":
		return 0
	case "t":
		return 1
	case "d":
		return 2
	case "k":
		return 3
	case "r":
		return 4
	case "f":
		return 5
	case "i":
		return 6
	case "o":
		return 7
	case "ro":
		return 8
	}
	return -1
}

// parsePhase reads what encodePhase writes on its fast path, each key at most once in any
// order, and reports false for anything else (escapes, spaces, unknown keys, other types),
// which encoding/json then reads.
func parsePhase(data []byte) (phase, bool) {
	var p phase
	r := recReader{b: data}
	if !r.byte('{') {
		return p, false
	}
	if r.byte('}') {
		return p, r.end()
	}
	var seen uint16
	for {
		key, ok := r.str()
		if !ok || !r.byte(':') {
			return p, false
		}
		k := phaseKey(key)
		if k < 0 || seen&(1<<k) != 0 {
			return p, false
		}
		seen |= 1 << k
		switch key {
		case "s", "r", "f", "i", "o":
			v, ok := r.str()
			if !ok {
				return p, false
			}
			switch key {
			case "s":
				p.State = cloud.AttachState(v)
			case "r":
				p.Rule = v
			case "f":
				p.Fail = cloud.Code(v)
			case "i":
				p.Instance = v
			case "o":
				p.From = cloud.AttachState(v)
			}
		case "t", "d":
			v, ok := r.str()
			if !ok {
				return p, false
			}
			var t time.Time
			// What Time.UnmarshalJSON does with the quoted string.
			if err := t.UnmarshalText([]byte(v)); err != nil {
				return p, false
			}
			if key == "t" {
				p.Since = t
			} else {
				p.Due = t
			}
		case "k", "ro":
			v, ok := r.boolean()
			if !ok {
				return p, false
			}
			if key == "k" {
				p.Stuck = v
			} else {
				p.ReadOnly = v
			}
		}
		if r.byte('}') {
			return p, r.end()
		}
		if !r.byte(',') {
			return p, false
		}
	}
}

// recReader reads the JSON that the fast encoders write: no whitespace, strings without
// escapes.
type recReader struct {
	b []byte
	i int
}

func (r *recReader) end() bool { return r.i == len(r.b) }

// byte consumes c if it comes next.
func (r *recReader) byte(c byte) bool {
	if r.i < len(r.b) && r.b[r.i] == c {
		r.i++
		return true
	}
	return false
}

// str reads a string of printable ASCII without escapes (plainString's alphabet less the
// HTML characters, which encoding/json reads back the same; they are refused anyway, as the
// encoder never writes them raw).
func (r *recReader) str() (string, bool) {
	if !r.byte('"') {
		return "", false
	}
	start := r.i
	for ; r.i < len(r.b); r.i++ {
		c := r.b[r.i]
		if c == '"' {
			s := string(r.b[start:r.i])
			r.i++
			return s, true
		}
		if c < 0x20 || c > 0x7e || c == '\\' || c == '<' || c == '>' || c == '&' {
			return "", false
		}
	}
	return "", false
}

func (r *recReader) boolean() (bool, bool) {
	rest := r.b[r.i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		r.i += 4
		return true, true
	case len(rest) >= 5 && string(rest[:5]) == "false":
		r.i += 5
		return false, true
	}
	return false, false
}

// encodeEvent is json.Marshal(ev).
func encodeEvent(ev cloud.Event) ([]byte, error) {
	if !plainString(ev.Type) || !plainString(ev.VolumeID) || !plainString(ev.InstanceID) || !plainString(ev.Detail) || !fastTime(ev.Time) {
		return json.Marshal(ev)
	}
	b := make([]byte, 0, 160+len(ev.Detail))
	b = strconv.AppendUint(append(b, `{"seq":`...), ev.Seq, 10)
	b = strconv.AppendUint(append(b, `,"revision":`...), ev.Revision, 10)
	b = appendTime(append(b, `,"time":`...), ev.Time)
	b = appendString(append(b, `,"type":`...), ev.Type)
	if ev.VolumeID != "" {
		b = appendString(append(b, `,"volumeId":`...), ev.VolumeID)
	}
	if ev.InstanceID != "" {
		b = appendString(append(b, `,"instanceId":`...), ev.InstanceID)
	}
	if ev.Attached != nil {
		b = strconv.AppendInt(append(b, `,"attached":`...), int64(*ev.Attached), 10)
	}
	if ev.Limit != nil {
		b = strconv.AppendInt(append(b, `,"limit":`...), int64(*ev.Limit), 10)
	}
	if ev.Detail != "" {
		b = appendString(append(b, `,"detail":`...), ev.Detail)
	}
	return append(b, '}'), nil
}
