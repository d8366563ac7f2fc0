package capacityplot

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// MaxRecordingBytes bounds a recording ReadRecording accepts: a 10-minute run
// of 100 nodes sampled every 2 s is about 10 MB.
const MaxRecordingBytes = 64 << 20

// WriteRecording writes rec as indented JSON (the Recording's JSON form: times
// RFC 3339, Interval in nanoseconds; Lags left out, ReadRecording derives them).
func WriteRecording(w io.Writer, rec *Recording) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	if err := enc.Encode(rec); err != nil {
		return fmt.Errorf("capacity recording: %w", err)
	}
	return nil
}

// ReadRecording reads a recording WriteRecording wrote, at most
// MaxRecordingBytes, checks that it is consistent (every problem at once) and
// computes its Lags, so that WriteHTML and WriteSummary draw it as they drew
// the run.
func ReadRecording(r io.Reader) (*Recording, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxRecordingBytes+1))
	if err != nil {
		return nil, fmt.Errorf("capacity recording: %w", err)
	}
	if len(data) > MaxRecordingBytes {
		return nil, fmt.Errorf("capacity recording: over %d bytes", MaxRecordingBytes)
	}
	var rec Recording
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("capacity recording: %w", err)
	}
	if err := rec.validate(); err != nil {
		return nil, fmt.Errorf("capacity recording: %w", err)
	}
	rec.computeLags()
	return &rec, nil
}

// validate reports what would make the plot lie or fail: no nodes, an end
// before the start, data of a node the recording does not list.
func (r *Recording) validate() error {
	var errs []error
	if r.Driver == "" {
		errs = append(errs, errors.New("no driver"))
	}
	if len(r.Nodes) == 0 {
		errs = append(errs, errors.New("no nodes"))
	}
	if r.End.Before(r.Start) {
		errs = append(errs, fmt.Errorf("end %s before start %s", r.End, r.Start))
	}
	if r.Interval <= 0 {
		errs = append(errs, fmt.Errorf("intervalNs must be > 0, got %d", r.Interval))
	}
	known := func(what, n string) {
		if !slices.Contains(r.Nodes, n) {
			errs = append(errs, fmt.Errorf("%s of node %q, which nodes does not list", what, n))
		}
	}
	for n := range r.Truth {
		known("truth", n)
	}
	for _, c := range r.Changes {
		known("count change", c.Node)
	}
	for _, s := range r.Samples {
		known("sample", s.Node)
	}
	if len(errs) > 5 {
		errs = append(errs[:5], fmt.Errorf("... %d problems in all", len(errs)))
	}
	return errors.Join(errs...)
}
