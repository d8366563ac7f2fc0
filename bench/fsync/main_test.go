package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
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
	if err := run([]string{"--dir", dir, "-n", "5"}, &out); err != nil {
		t.Fatal(err)
	}
	line := out.String()
	for _, want := range []string{"GOMAXPROCS ", "fdatasync p50 ", " p99 ", "(5 × 4 KiB, " + dir} {
		if !strings.Contains(line, want) {
			t.Errorf("output %q lacks %q", line, want)
		}
	}
	for _, args := range [][]string{{"-n", "0"}, {"--n=100001"}, {"--size", "0"}, {"--size", "2000000"}, {"--dir", dir + "/missing"}, {"extra"}, {"-size=1"}, {"-n", "x"}} {
		out.Reset()
		if err := run(append([]string{"--dir", dir}, args...), &out); err == nil || out.Len() > 0 {
			t.Errorf("run %q: error %v, output %q; want an error and no output", args, err, out.String())
		}
	}
}

// TestFlags: the flags land in the options with their defaults; bad values are refused
// with a message naming the flag (every problem at once); --help lists the flags and succeeds.
func TestFlags(t *testing.T) {
	var o options
	fs := pflag.NewFlagSet("fsync", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"-n=7"}); err != nil {
		t.Fatal(err)
	}
	if want := (options{Dir: os.TempDir(), N: 7, Size: 4096}); o != want {
		t.Errorf("options %+v, want %+v", o, want)
	}
	var out bytes.Buffer
	err := run([]string{"-n", "0", "--size=0"}, &out)
	if err == nil || !strings.Contains(err.Error(), "-n 0: want 1..100000") || !strings.Contains(err.Error(), "--size 0: want 1..1048576") {
		t.Errorf("bad values: %v, want both named", err)
	}
	err = run([]string{"--bogus"}, &out)
	if err == nil || err.Error() != "unknown flag: --bogus (fsync --help lists the flags)" {
		t.Errorf("unknown flag: %v", err)
	}
	out.Reset()
	if err := run([]string{"--help"}, &out); err != nil || !strings.Contains(out.String(), "--size int") || !strings.Contains(out.String(), "-n, --n int") {
		t.Errorf("--help: %v\n%s", err, out.String())
	}
}
