// Command capdrop-runc is a runc that asks for no capability the machine cannot grant. It
// stands in front of the real runc (as dockerd's default runtime on the host, and as
// /usr/local/sbin/runc in the offline kind node image, where containerd finds it first): on
// create/run it removes from the bundle's config.json every capability that its own bounding
// set lacks, on exec the same from the --process file, then it execs the real runc with the
// same arguments. On a machine with every capability it changes nothing. See package
// hack/kind/internal/capdrop for why.
//
// The real runc is $CAPDROP_REAL_RUNC, else the first of /usr/sbin/runc, /usr/bin/runc that
// is not this program.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/fakecloud/fakecloud-csi/hack/kind/internal/capdrop"
)

func main() {
	if err := run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "capdrop-runc:", err)
		os.Exit(1)
	}
}

func run(argv []string) error {
	real, err := realRunc()
	if err != nil {
		return err
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fmt.Errorf("read own capabilities: %w", err)
	}
	bnd, err := capdrop.BoundingSet(status)
	if err != nil {
		return err
	}
	if missing := capdrop.Missing(bnd); len(missing) > 0 {
		cwd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("working directory: %w", err)
		}
		if t := capdrop.Parse(argv[1:], cwd); t.Path != "" {
			drop := make(map[string]bool, len(missing))
			for _, m := range missing {
				drop[m] = true
			}
			if err := capdrop.RewriteFile(t.Path, t.Spec, drop); err != nil {
				return err
			}
		}
	}
	args := append([]string{real}, argv[1:]...)
	if err := syscall.Exec(real, args, os.Environ()); err != nil {
		return fmt.Errorf("exec %s: %w", real, err)
	}
	return nil
}

// realRunc finds the runc this program stands in front of, never itself.
func realRunc() (string, error) {
	self, _ := os.Executable()
	self, _ = filepath.EvalSymlinks(self)
	candidates := []string{"/usr/sbin/runc", "/usr/bin/runc"}
	if v := os.Getenv("CAPDROP_REAL_RUNC"); v != "" {
		candidates = []string{v}
	}
	for _, c := range candidates {
		resolved, err := filepath.EvalSymlinks(c)
		if err != nil || resolved == self {
			continue
		}
		return c, nil
	}
	return "", fmt.Errorf("no real runc among %v", candidates)
}
