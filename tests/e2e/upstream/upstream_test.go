// Package upstream runs Kubernetes' own storage e2e testsuites
// (k8s.io/kubernetes/test/e2e/storage/external, at the version the local
// cluster's tools module pins) against disk.fakecloud.dev. The suites are
// chosen by the testdriver YAML given with -storage.testdriver (testdriver.yaml
// here for the local cluster, testdriver-kind.yaml for a cluster with real
// containers) and a ginkgo focus/skip list (hack/e2e-upstream.sh).
//
// It is its own module because it imports k8s.io/kubernetes, which the main
// module must not. The binary is built with `go test -c` by
// hack/e2e-upstream.sh with the local cluster components' flags, so the two
// share the Go build cache.
package upstream

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	"github.com/onsi/gomega"

	"k8s.io/component-base/logs"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"
	"k8s.io/kubernetes/test/e2e/framework/testfiles"
	e2etestingmanifests "k8s.io/kubernetes/test/e2e/testing-manifests"
	testfixtures "k8s.io/kubernetes/test/fixtures"

	// The feature and environment labels, frozen as upstream's e2e.test does,
	// so that a misspelt label fails at start-up rather than never matching.
	_ "k8s.io/kubernetes/test/e2e/environment"
	_ "k8s.io/kubernetes/test/e2e/feature"

	// -storage.testdriver: each file given defines one "External Storage"
	// driver and all of testsuites.CSISuites for it.
	_ "k8s.io/kubernetes/test/e2e/storage/external"

	// The CSI mock specs. Most deploy the mock driver's images and so test
	// Kubernetes, not this driver; hack/e2e-upstream.sh selects only "CSI Mock
	// VolumeLimitScaling scheduling" (no container: the scheduler's
	// preventPodSchedulingIfMissing, which deploy/base/csidriver.yaml relies on).
	_ "k8s.io/kubernetes/test/e2e/storage/csimock"

	// What upstream's test/e2e/e2e_test.go links in to reconfigure the
	// framework: dumps on failure, metrics gathering, node readiness checks,
	// and gomega's formatting of Kubernetes objects.
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/metrics/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
	_ "k8s.io/kubernetes/test/utils/ktesting/format"
)

// TestMain registers and parses the framework's flags (as upstream's
// e2e_test.go does: the storage.* flags live in config.Flags) before any spec
// is defined, because -storage.testdriver defines the specs while it is parsed.
func TestMain(m *testing.M) {
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unknown arguments: %q\n", flag.Args())
		os.Exit(2)
	}
	// The suites read pod and fixture manifests through testfiles; the copies
	// embedded in the binary make it runnable from any directory.
	testfiles.AddFileSource(e2etestingmanifests.GetE2ETestingManifestsFS())
	testfiles.AddFileSource(testfixtures.GetTestFixturesFS())
	framework.AfterReadingAllFlags(&framework.TestContext)
	os.Exit(m.Run())
}

// TestUpstreamStorage runs every spec the testdriver files defined, filtered
// by -ginkgo.focus/-ginkgo.skip; -ginkgo.junit-report writes the JUnit file.
func TestUpstreamStorage(t *testing.T) {
	logs.InitLogs()
	defer logs.FlushLogs()
	klog.EnableContextualLogging(true)
	gomega.RegisterFailHandler(framework.Fail)
	suiteConfig, reporterConfig := framework.CreateGinkgoConfig()
	ginkgo.RunSpecs(t, "Kubernetes storage e2e against disk.fakecloud.dev", suiteConfig, reporterConfig)
}

// The summary ReportAfterSuite writes: what ran, and why each spec the
// suites skipped by themselves was skipped (the driver's claims), apart from
// the specs the focus/skip list left out.
var _ = ginkgo.ReportAfterSuite("fakecloud-csi summary", func(report ginkgo.Report) {
	// The framework previews the specs while it reads its flags
	// (ginkgo.PreviewSpecs, a dry run that also runs this node): nothing ran.
	if report.SuiteConfig.DryRun {
		return
	}
	out := io.Writer(os.Stdout)
	if dir := framework.TestContext.ReportDir; dir != "" {
		f, err := os.Create(filepath.Join(dir, "summary.txt"))
		if err != nil {
			framework.Logf("summary: %v", err)
		} else {
			defer f.Close()
			out = io.MultiWriter(os.Stdout, f)
		}
	}
	writeSummary(out, report)
})

// writeSummary prints the counts by outcome, then every spec that failed
// and every spec the suites skipped at run time, with its reason.
func writeSummary(w io.Writer, report ginkgo.Report) {
	var passed, failed, skipped, notSelected int
	var failures, skips []string
	for _, s := range report.SpecReports {
		if s.LeafNodeType != types.NodeTypeIt {
			continue
		}
		name := s.FullText()
		switch {
		case s.State == types.SpecStatePassed:
			passed++
		case s.State.Is(types.SpecStateFailureStates):
			failed++
			failures = append(failures, fmt.Sprintf("FAIL %s\n     %s", name, firstLine(s.Failure.Message)))
		case s.State == types.SpecStateSkipped && s.Failure.Message != "":
			// Skipped by the suite itself (e2eskipper): the message says why.
			skipped++
			skips = append(skips, fmt.Sprintf("SKIP %s\n     %s", name, firstLine(s.Failure.Message)))
		default:
			notSelected++
		}
	}
	sort.Strings(failures)
	sort.Strings(skips)
	fmt.Fprintf(w, "\nupstream storage e2e: %d passed, %d failed, %d skipped by the suites, %d not selected (focus/skip)\n",
		passed, failed, skipped, notSelected)
	for _, l := range append(failures, skips...) {
		fmt.Fprintln(w, l)
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
