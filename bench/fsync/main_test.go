package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"median of odd", ms(1, 2, 3, 4, 5), 0.5, 3 * time.Millisecond},
		{"p99 of 100 is the 99th", ms(make([]int, 98)...), 0.99, 0},
		{"p99 of 5 is the largest", ms(1, 2, 3, 4, 50), 0.99, 50 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := quantile(tc.sorted, tc.q); got != tc.want {
				t.Errorf("quantile(%v, %v) = %v, want %v", tc.sorted, tc.q, got, tc.want)
			}
		})
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run([]string{"-dir", dir, "-n", "5"}, &out); err != nil {
		t.Fatal(err)
	}
	line := out.String()
	for _, want := range []string{"GOMAXPROCS ", "fdatasync p50 ", " p99 ", "(5 × 4 KiB, " + dir} {
		if !strings.Contains(line, want) {
			t.Errorf("output %q lacks %q", line, want)
		}
	}
	for _, args := range [][]string{{"-n", "0"}, {"-n", "100001"}, {"-size", "0"}, {"-size", "2000000"}, {"-dir", dir + "/missing"}, {"extra"}} {
		out.Reset()
		if err := run(append([]string{"-dir", dir}, args...), &out); err == nil || out.Len() > 0 {
			t.Errorf("run %q: error %v, output %q; want an error and no output", args, err, out.String())
		}
	}
}
