// Command volumecheck is the workload of the e2e scenario S15 (data follows the volume): in
// a pod with the volume mounted it writes a token into a file and fsyncs it, or reads the
// file back, prints one line that the suite finds in the pod's log, and then waits for
// SIGTERM so the pod stays Running. It is a static binary on an empty image (hack/images.sh),
// so that the suite needs no image from a registry.
//
//	volumecheck write FILE TOKEN   prints "volumecheck: wrote <TOKEN> to FILE"
//	volumecheck read FILE          prints "volumecheck: read <content> from FILE"
//
// FILE must be absolute and TOKEN at most 256 bytes; a failure prints "volumecheck: error:
// ..." and exits 1.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stdout, "volumecheck: error:", err)
		os.Exit(1)
	}
}

// maxToken bounds what is written and read back.
const maxToken = 256

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) < 2 || !filepath.IsAbs(args[1]) {
		return errors.New("usage: volumecheck write FILE TOKEN | volumecheck read FILE (FILE absolute)")
	}
	file := args[1]
	switch {
	case args[0] == "write" && len(args) == 3:
		if len(args[2]) == 0 || len(args[2]) > maxToken {
			return fmt.Errorf("token must be 1..%d bytes", maxToken)
		}
		if err := write(file, args[2]); err != nil {
			return err
		}
		fmt.Fprintf(out, "volumecheck: wrote %s to %s\n", args[2], file)
	case args[0] == "read" && len(args) == 2:
		got, err := read(file)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "volumecheck: read %s from %s\n", got, file)
	default:
		return errors.New("usage: volumecheck write FILE TOKEN | volumecheck read FILE")
	}
	<-ctx.Done()
	return nil
}

// write puts token into file and makes it durable: the file and its folder are fsynced, so
// that what the suite later reads on another node is what reached the volume.
// Errors of the os package name the file already.
func write(file, token string) error {
	f, err := os.OpenFile(file, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(token); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync: %w", err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(file))
	if err != nil {
		return fmt.Errorf("open folder of %s: %w", file, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync folder of %s: %w", file, err)
	}
	return nil
}

func read(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxToken+1))
	if err != nil {
		return "", err
	}
	if len(data) > maxToken {
		return "", fmt.Errorf("%s holds more than %d bytes", file, maxToken)
	}
	return string(data), nil
}
