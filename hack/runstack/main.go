// Command runstack is make run's launcher: hack/run.sh checks the user's settings, builds,
// and runs it to start internal/stack's steps as processes of BIN (the fake cloud, the
// controller plugin, one node plugin per seeded instance) with their output appended to
// RUN_DIR/logs. It checks the tokens make run uses, creates --up-file once every component
// is ready, and keeps them running until a signal (then it stops them quietly: run.sh says
// the rest) or until one exits. It reports every failure itself, with the end of the log of
// each component that exited, and exits 1; run.sh adds where the state and logs stay.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/fakecloud/fakecloud-csi/internal/stack"
)

// config is runstack's flags: what run.sh knows once the ports and the seed are checked.
type config struct {
	bin, runDir, seed, tokens, upFile string
	port, httpBase                    int
	nodes, cloudArgs, driverArgs      []string
	restart                           bool
}

// The driver's --mode values (pkg/csi ModeController, ModeNode: a test holds them equal),
// written here so that the launcher does not link the whole driver.
const (
	modeController = "controller"
	modeNode       = "node"
)

// Tokens of examples/tokens.yaml that the plugins and the demo use.
const (
	driverToken = "demo-driver-token"
	adminToken  = "demo-admin-token"
)

func main() {
	cfg, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "runstack:", err)
		os.Exit(2)
	}
	os.Exit(run(cfg, os.Stdout, os.Stderr))
}

func parse(args []string) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("runstack", flag.ContinueOnError)
	fs.StringVar(&cfg.bin, "bin", "bin", "folder of the fakecloud and driver binaries")
	fs.StringVar(&cfg.runDir, "run-dir", "", "make run's state and logs folder (RUN_DIR)")
	fs.StringVar(&cfg.seed, "seed", "", "the fake cloud's seed file")
	fs.StringVar(&cfg.tokens, "tokens", "", "the fake cloud's tokens file")
	fs.StringVar(&cfg.upFile, "up-file", "", "file created once every component is ready")
	fs.IntVar(&cfg.port, "port", 8080, "the fake cloud's port on 127.0.0.1")
	fs.IntVar(&cfg.httpBase, "http-base", 9808, "the controller's HTTP port; node plugins take the next ones")
	fs.BoolVar(&cfg.restart, "restart", false, "RUN_DIR holds an earlier run's fake cloud store")
	for name, dst := range map[string]*[]string{"node": &cfg.nodes, "fakecloud-arg": &cfg.cloudArgs, "driver-arg": &cfg.driverArgs} {
		fs.Func(name, "repeatable: a node plugin's instance ID, or one more flag of the fake cloud or of every driver process",
			func(v string) error { *dst = append(*dst, v); return nil })
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	switch {
	case cfg.runDir == "" || cfg.seed == "" || cfg.tokens == "" || cfg.upFile == "":
		return cfg, errors.New("--run-dir, --seed, --tokens and --up-file are required")
	case len(cfg.nodes) == 0:
		return cfg, errors.New("at least one --node is required")
	case cfg.port < 1 || cfg.port > 65535 || cfg.httpBase < 1 || cfg.httpBase+len(cfg.nodes) > 65535:
		return cfg, fmt.Errorf("ports %d and %d-%d: want 1..65535", cfg.port, cfg.httpBase, cfg.httpBase+len(cfg.nodes))
	}
	return cfg, nil
}

// stackOf is make run's stack: the fake cloud on 127.0.0.1:port with its store in
// RUN_DIR/cloud and the console plotting every node plugin, the controller plugin on
// http-base, node plugin i on http-base+i+1 looking the cloud up at most once a second.
func stackOf(cfg config) stack.Stack {
	url := "http://127.0.0.1:" + strconv.Itoa(cfg.port)
	st := stack.Stack{Cloud: stack.Cloud{
		Listen: "127.0.0.1:" + strconv.Itoa(cfg.port), DataDir: filepath.Join(cfg.runDir, "cloud"),
		Seed: cfg.seed, TokensFile: cfg.tokens, Extra: cfg.cloudArgs,
	}}
	plugin := func(name, id string, port int) stack.Plugin {
		return stack.Plugin{Name: name, ID: id, Socket: filepath.Join(cfg.runDir, id, "csi.sock"), CloudURL: url,
			CloudTokenFile: filepath.Join(cfg.runDir, "driver-token"), StateDir: filepath.Join(cfg.runDir, id),
			HTTPAddr: "127.0.0.1:" + strconv.Itoa(port), Extra: cfg.driverArgs}
	}
	ctrl := plugin("controller plugin", "controller", cfg.httpBase)
	ctrl.Mode = modeController
	st.Plugins = append(st.Plugins, ctrl)
	for i, n := range cfg.nodes {
		p := plugin("node plugin "+n, n, cfg.httpBase+i+1)
		p.Mode, p.NodeID, p.CapacityMinInterval = modeNode, n, time.Second
		st.Plugins = append(st.Plugins, p)
		st.Cloud.ConsoleNodes = append(st.Cloud.ConsoleNodes, stack.ConsoleNode{Name: n, URL: "http://" + p.HTTPAddr})
	}
	return st
}

// steps are the stack's, with make run's token check after the fake cloud's.
func steps(cfg config, st stack.Stack, l stack.Launcher, stdout io.Writer) []stack.Step {
	all := st.Steps(l)
	tokens := stack.Step{Name: "tokens", Start: func(ctx context.Context) error {
		if cfg.restart {
			fmt.Fprintf(stdout, "%s holds an earlier run's fake cloud store: going on from its state (the seed is what POST /v1/reset returns to).\n", cfg.runDir)
		}
		for _, tok := range []string{driverToken, adminToken} {
			if err := checkToken(ctx, st.Cloud.URL(), tok); err != nil {
				return fmt.Errorf("%s lacks %s (the fake cloud refuses it); make run's plugins and demo use it", cfg.tokens, tok)
			}
		}
		return os.WriteFile(filepath.Join(cfg.runDir, "driver-token"), []byte(driverToken), 0o644)
	}}
	return append([]stack.Step{all[0], tokens}, all[1:]...)
}

// checkToken fails unless the fake cloud answers GET /v1/quotas with token in the 2xx range.
func checkToken(ctx context.Context, cloudURL, token string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cloudURL+"/v1/quotas", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return errors.New(resp.Status)
	}
	return nil
}

// run starts the stack and supervises it; it returns the exit code: 0 after a signal or
// when the components stopped on one, 1 after a failure it reported.
func run(cfg config, stdout, stderr io.Writer) int {
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	st := stackOf(cfg)
	p := newProcesses(cfg.bin, filepath.Join(cfg.runDir, "logs"))
	startCtx, cancelStart := context.WithCancel(ctx)
	defer cancelStart()
	p.onExit = cancelStart // a component that exits ends every wait of the start
	if err := stack.Run(startCtx, steps(cfg, st, p, stdout), nil); err != nil {
		if ctx.Err() != nil {
			p.stopAll()
			return 0
		}
		startFailed(stderr, cfg, st, p, err)
		return 1
	}
	if err := os.WriteFile(cfg.upFile, nil, 0o644); err != nil {
		fmt.Fprintln(stderr, err)
		p.stopAll()
		p.report(stderr, cfg.runDir, nil)
		return 1
	}
	return p.supervise(ctx, stdout, stderr, cfg.runDir)
}

// startFailed says why the start failed, as run.sh did: which wait a process exit or the
// timeout ended, or the step's own message; then the end of each exited component's log.
func startFailed(stderr io.Writer, cfg config, st stack.Stack, p *processes, err error) {
	dead := p.exitedNames()
	var se *stack.StepError
	switch {
	case errors.As(err, &se) && se.Ready:
		what := se.Step
		if what == "fake cloud" {
			what += " on " + st.Cloud.URL()
		}
		if len(dead) > 0 {
			fmt.Fprintf(stderr, "a process exited while waiting for %s\n", what)
		} else {
			fmt.Fprintf(stderr, "timed out waiting for %s; logs: %s\n", what, filepath.Join(cfg.runDir, "logs"))
		}
	case errors.As(err, &se):
		fmt.Fprintln(stderr, se.Err)
	default:
		fmt.Fprintln(stderr, err)
	}
	p.stopAll()
	p.report(stderr, cfg.runDir, dead)
}
