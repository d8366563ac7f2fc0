// Package e2e is the end-to-end suite of fakecloud-csi: each scenario of
// docs/e2e-scenarios.md changes the fake cloud through its HTTP API,
// acts through the Kubernetes API, and asserts on Kubernetes objects and on
// the cloud's truth.
//
// It runs against any cluster given by -kubeconfig (or KUBECONFIG) plus the
// fake cloud's URL and admin token; with -local (FAKECLOUD_E2E_LOCAL=1) and
// no kubeconfig it starts the local cluster of upstream binaries itself
// (tests/e2e/localcluster) and stops it at the end. Without either it skips.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fakecloud/fakecloud-csi/tests/e2e/localcluster"
)

// config is where the suite finds the cluster and the fake cloud.
type config struct {
	Kubeconfig     string
	CloudURL       string
	CloudToken     string
	CloudTokenFile string
	// LogDir is printed with every failure.
	LogDir string
	// PidDir has the pid files of a local cluster (S9 kills the controller
	// plugin through it); empty elsewhere, and S9 skips.
	PidDir string
	// Local starts a local cluster when no kubeconfig is given.
	Local bool
	// RiseAllowance is added to deadlines of capacity increases: the driver's
	// stability window (0 on the local cluster, localcluster.DefaultDriverArgs).
	RiseAllowance time.Duration
	// StaleAfter is the driver's --capacity-stale-after (S6).
	StaleAfter time.Duration
	// PluginURLs map node name to its node plugin's HTTP base URL (a local
	// cluster's Info); empty elsewhere, and the capacity plot has no
	// "reported" series.
	PluginURLs map[string]string
	// PluginSockets map node name to its node plugin's CSI socket (a local
	// cluster's Info).
	PluginSockets map[string]string
	// PodImage is the container image of the scenarios' pods, which only
	// hold volumes: one every node has (kind's sandbox image by default).
	PodImage string
	// VolumeCheckImage is the image of tests/e2e/cmd/volumecheck
	// (hack/images.sh) that S15 runs; empty, and S15 skips.
	VolumeCheckImage string
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// cfg and env are the suite's only package state: set once in TestMain
// before any test runs, read-only afterwards.
var (
	cfg config
	env *suiteEnv
)

func TestMain(m *testing.M) {
	flag.StringVar(&cfg.Kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster under test (env KUBECONFIG)")
	flag.StringVar(&cfg.CloudURL, "cloud-url", os.Getenv("FAKECLOUD_E2E_CLOUD_URL"), "fake cloud base URL (env FAKECLOUD_E2E_CLOUD_URL)")
	flag.StringVar(&cfg.CloudToken, "cloud-token", os.Getenv("FAKECLOUD_E2E_CLOUD_TOKEN"), "fake cloud admin token (env FAKECLOUD_E2E_CLOUD_TOKEN)")
	flag.StringVar(&cfg.CloudTokenFile, "cloud-token-file", os.Getenv("FAKECLOUD_E2E_CLOUD_TOKEN_FILE"), "file with the fake cloud admin token (env FAKECLOUD_E2E_CLOUD_TOKEN_FILE)")
	flag.StringVar(&cfg.LogDir, "log-dir", os.Getenv("FAKECLOUD_E2E_LOG_DIR"), "where component logs are, printed on failure (env FAKECLOUD_E2E_LOG_DIR)")
	flag.StringVar(&cfg.PidDir, "pid-dir", os.Getenv("FAKECLOUD_E2E_PID_DIR"), "local cluster pid folder (env FAKECLOUD_E2E_PID_DIR)")
	flag.BoolVar(&cfg.Local, "local", os.Getenv("FAKECLOUD_E2E_LOCAL") == "1", "start a local cluster of upstream binaries when no kubeconfig is given (env FAKECLOUD_E2E_LOCAL=1)")
	flag.DurationVar(&cfg.RiseAllowance, "rise-allowance", 0, "extra time for capacity increases (the driver's stability window)")
	flag.DurationVar(&cfg.StaleAfter, "stale-after", localcluster.StaleAfter, "the driver's --capacity-stale-after")
	flag.StringVar(&cfg.PodImage, "pod-image", envOr("FAKECLOUD_E2E_POD_IMAGE", "registry.k8s.io/pause:3.10"), "image of the scenarios' pods; every node must have it (env FAKECLOUD_E2E_POD_IMAGE)")
	flag.StringVar(&cfg.VolumeCheckImage, "volumecheck-image", os.Getenv("FAKECLOUD_E2E_VOLUMECHECK_IMAGE"), "image of tests/e2e/cmd/volumecheck for S15, loaded on every node (env FAKECLOUD_E2E_VOLUMECHECK_IMAGE; empty: S15 skips)")
	flag.Parse()
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if runDir := os.Getenv("FAKECLOUD_E2E_RUN_DIR"); runDir != "" {
		// A cluster from `localcluster up`: its run folder says everything.
		info, err := localcluster.ReadInfo(runDir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		fillFromInfo(info)
	}
	var local *localcluster.Cluster
	if cfg.Kubeconfig == "" {
		if !cfg.Local {
			fmt.Println("e2e: no -kubeconfig and no -local (FAKECLOUD_E2E_LOCAL=1): skipping the end-to-end suite")
			return 0
		}
		c, stop, err := startLocal()
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e: local cluster:", err)
			return 1
		}
		defer stop()
		local = c
	}
	if cfg.CloudToken == "" && cfg.CloudTokenFile != "" {
		data, err := os.ReadFile(cfg.CloudTokenFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e: cloud token:", err)
			return 1
		}
		cfg.CloudToken = strings.TrimSpace(string(data))
	}
	var err error
	env, err = newSuiteEnv(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	env.local = local
	code := m.Run()
	if code != 0 {
		fmt.Printf("e2e: FAILED; component logs are in %s\n", cfg.LogDir)
	}
	return code
}

func fillFromInfo(info localcluster.Info) {
	cfg.Kubeconfig, cfg.CloudURL, cfg.CloudTokenFile = info.Kubeconfig, info.CloudURL, info.AdminTokenFile
	cfg.CloudToken = info.AdminToken
	cfg.LogDir, cfg.PidDir = info.LogDir, info.PidDir
	cfg.PluginURLs, cfg.PluginSockets = info.PluginURLs, info.PluginSockets
}

// startLocal starts the local cluster for this run, stopping it on Ctrl-C
// too (the deferred stop does not run when a signal kills the test binary).
func startLocal() (*localcluster.Cluster, func(), error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, nil, err
	}
	root, err := localcluster.FindRepoRoot(wd)
	if err != nil {
		return nil, nil, err
	}
	binDir, err := localcluster.DefaultCacheDir()
	if err != nil {
		return nil, nil, err
	}
	runDir, err := localcluster.NewRunDir()
	if err != nil {
		return nil, nil, err
	}
	o := localcluster.DefaultOptions(root, binDir, runDir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	fmt.Printf("e2e: starting a local cluster in %s (logs: %s)\n", runDir, filepath.Join(runDir, "logs"))
	c, err := localcluster.Start(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	stopSignals := stopOnSignal(c.Stop)
	fillFromInfo(c.Info)
	return c, func() {
		stopSignals()
		c.Stop()
		fmt.Printf("e2e: local cluster stopped; logs in %s\n", c.LogDir)
	}, nil
}
