// Command fsync measures the machine's fdatasync latency where the store benchmarks keep
// their bbolt files, and prints it with the Go version and GOMAXPROCS: the header line of
// `make bench` (hack/bench.sh), against which every figure it prints is read. A durable
// commit costs two fdatasyncs, so this latency bounds the store's commits per second; it
// varies tenfold between machines and with other writes to the same disk (issue 28: 32-35 µs
// on a quiet development VM, 0.10-0.33 ms p50 on a busy one).
//
//	go run ./bench/fsync [--dir=$TMPDIR] [-n=200] [--size=4096]
//
// It writes size bytes at the start of a new temporary file in dir and fdatasyncs it, n
// times, and prints the p50 and p99 of the write+fdatasync, for example
//
//	go1.26.0, GOMAXPROCS 2, fdatasync p50 182 µs p99 1.9 ms (200 × 4 KiB, /tmp, ext4)
//
// dir defaults to os.TempDir(), where testing.B.TempDir puts the benchmarks' stores.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"syscall"
	"time"

	"github.com/fakecloud/fakecloud-csi/internal/cli"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Bounds of the flags: enough samples for a p99, few enough to take seconds on a slow disk.
const (
	maxWrites = 100000
	maxSize   = 1 << 20
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fsync:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	// Dir is the directory on the filesystem to measure.
	Dir string
	// N is the number of writes+fdatasyncs to time, 1..maxWrites; Size the bytes written
	// before each, 1..maxSize.
	N, Size int
}

// AddFlags adds the command's flags to fs.
func (o *options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Dir, "dir", os.TempDir(), "directory on the filesystem to measure (a temporary file is created there and removed)")
	fs.IntVarP(&o.N, "n", "n", 200, fmt.Sprintf("writes+fdatasyncs to time, 1..%d", maxWrites))
	fs.IntVar(&o.Size, "size", 4096, fmt.Sprintf("bytes written before each fdatasync, 1..%d (bbolt's page is 4 KiB)", maxSize))
}

// Validate reports every problem of o at once.
func (o *options) Validate() error {
	var errs []error
	if o.N < 1 || o.N > maxWrites {
		errs = append(errs, fmt.Errorf("-n %d: want 1..%d", o.N, maxWrites))
	}
	if o.Size < 1 || o.Size > maxSize {
		errs = append(errs, fmt.Errorf("--size %d: want 1..%d", o.Size, maxSize))
	}
	return errors.Join(errs...)
}

// run parses args, measures and prints the header line on out.
func run(args []string, out io.Writer) error {
	var o options
	cmd := cli.NewRoot(&cobra.Command{
		Use:   "fsync",
		Short: "Measure the fdatasync latency where the store benchmarks keep their bbolt files (the header line of make bench)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			lat, err := measure(o.Dir, o.N, o.Size)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(out, "%s, GOMAXPROCS %d, fdatasync p50 %s p99 %s (%d × %s, %s, %s)\n",
				runtime.Version(), runtime.GOMAXPROCS(0), short(quantile(lat, 0.50)), short(quantile(lat, 0.99)),
				o.N, sizeName(o.Size), o.Dir, fsType(o.Dir))
			return err
		},
	}, out, os.Stderr) // cobra's default stderr, as before
	o.AddFlags(cmd.Flags())
	return cli.Execute(context.Background(), cmd, args)
}

// measure writes size bytes to a new file in dir and fdatasyncs it, n times, and returns how
// long each write+fdatasync took, sorted. The file is removed.
func measure(dir string, n, size int) ([]time.Duration, error) {
	if n < 1 || n > maxWrites {
		return nil, fmt.Errorf("-n %d: want 1..%d", n, maxWrites)
	}
	if size < 1 || size > maxSize {
		return nil, fmt.Errorf("-size %d: want 1..%d", size, maxSize)
	}
	f, err := os.CreateTemp(dir, "fdatasync-*.bin")
	if err != nil {
		return nil, fmt.Errorf("create the file to time: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, size)
	lat := make([]time.Duration, 0, n)
	for i := range n {
		buf[0] = byte(i) // a changed page every time, as a commit's
		start := time.Now()
		if _, err := f.WriteAt(buf, 0); err != nil {
			return nil, fmt.Errorf("write %s: %w", f.Name(), err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return nil, fmt.Errorf("fdatasync %s: %w", f.Name(), err)
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	return lat, errors.Join(f.Close(), os.Remove(f.Name()))
}

// quantile is the q-quantile (0..1) of sorted, the nearest rank; 0 when empty.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted)-1) + 0.5)
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// short prints d in µs below a millisecond and in ms with one decimal above.
func short(d time.Duration) string {
	if d < time.Millisecond {
		return fmt.Sprintf("%d µs", d.Microseconds())
	}
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

func sizeName(size int) string {
	if size%1024 == 0 {
		return fmt.Sprintf("%d KiB", size/1024)
	}
	return fmt.Sprintf("%d B", size)
}

// fsType names dir's filesystem from its statfs magic number (Linux), or gives the number.
func fsType(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "filesystem unknown"
	}
	names := map[int64]string{0xEF53: "ext4", 0x58465342: "xfs", 0x9123683E: "btrfs", 0x01021994: "tmpfs (fdatasync does nothing)", 0x794C7630: "overlayfs", 0x2FC12FC1: "zfs", 0xF2F52010: "f2fs"}
	if name, ok := names[int64(st.Type)]; ok {
		return name
	}
	return fmt.Sprintf("filesystem 0x%x", st.Type)
}
