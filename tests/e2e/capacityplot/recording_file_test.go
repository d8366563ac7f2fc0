package capacityplot

import (
	"bytes"
	"flag"
	"io"
	"os"
	"strings"
	"testing"
)

// TestRecordingRoundTrip: a recording read back draws the same page as the run did.
func TestRecordingRoundTrip(t *testing.T) {
	rec := synthRecording()
	rec.Samples[3].Plugin = i64(4)
	var file, want, got bytes.Buffer
	if err := WriteRecording(&file, rec); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(file.Bytes(), []byte(`"Lags"`)) || bytes.Contains(file.Bytes(), []byte(`"lags"`)) {
		t.Error("the lags are derived: the file must not hold them")
	}
	back, err := ReadRecording(&file)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&want, rec); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&got, back); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want.Bytes(), got.Bytes()) {
		t.Errorf("the page of the recording read back differs from the run's:\n%s\n----\n%s", got.String(), want.String())
	}
}

func TestReadRecordingRejects(t *testing.T) {
	tests := []struct {
		name string
		in   io.Reader
		want []string
	}{
		{"not JSON", strings.NewReader("<html>"), []string{"capacity recording: invalid character"}},
		{"empty object: every problem at once", strings.NewReader(`{}`), []string{"no driver", "no nodes", "intervalNs must be > 0"}},
		{"end before start, data of an unknown node", strings.NewReader(`{"driver":"d","nodes":["n1"],"intervalNs":1,
			"start":"2026-01-01T00:00:10Z","end":"2026-01-01T00:00:00Z",
			"truth":{"n9":[]},"changes":[{"node":"n8"}],"samples":[{"node":"n7"}]}`),
			[]string{"end 2026-01-01 00:00:00 +0000 UTC before start", `truth of node "n9"`, `count change of node "n8"`, `sample of node "n7"`}},
		{"over the bound", io.MultiReader(strings.NewReader(`{"notes":["`), io.LimitReader(zeros{}, MaxRecordingBytes)),
			[]string{"over 67108864 bytes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadRecording(tc.in)
			if err == nil {
				t.Fatal("expected an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// zeros reads as an endless run of '0'.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '0'
	}
	return len(p), nil
}

// updateDocs rewrites docs/capacity-plot.html from docs/capacity-plot.json.
var updateDocs = flag.Bool("update-docs", false, "rewrite docs/capacity-plot.html from docs/capacity-plot.json")

// TestDocsPlotCurrent checks that docs/capacity-plot.html is what this package draws from the
// recording beside it, docs/capacity-plot.json (the plot of docs/local-cluster.md): a change to the page
// needs `go test ./capacityplot -run TestDocsPlotCurrent -update-docs` and then the PNG
// (make test-browser BROWSER_ARGS='-run TestRenderCapacityPlot -render-plot').
func TestDocsPlotCurrent(t *testing.T) {
	const recording, page = "../../../docs/capacity-plot.json", "../../../docs/capacity-plot.html"
	f, err := os.Open(recording)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rec, err := ReadRecording(f)
	if err != nil {
		t.Fatalf("%s: %v", recording, err)
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, rec); err != nil {
		t.Fatal(err)
	}
	if *updateDocs {
		if err := os.WriteFile(page, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s; now render its PNG: make test-browser BROWSER_ARGS='-run TestRenderCapacityPlot -render-plot'", page)
		return
	}
	old, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(old, buf.Bytes()) {
		t.Errorf("%s is not what this package draws from %s: run go test ./capacityplot -run TestDocsPlotCurrent -update-docs (in tests/e2e), then render the PNG", page, recording)
	}
}
