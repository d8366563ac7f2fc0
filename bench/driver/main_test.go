package driver_test

import (
	"flag"
	"io"
	"os"
	"testing"

	"k8s.io/klog/v2"
)

// TestMain silences klog: the driver's and the cloud's logs would land in the middle of the
// benchmark lines that hack/bench.sh reads (go test prints the binary's stderr with them).
// It sets up the process-wide logger, as a main does (hack/logcheck.conf exempts this file
// from the contextual logging check for that reason).
func TestMain(m *testing.M) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
	os.Exit(m.Run())
}
