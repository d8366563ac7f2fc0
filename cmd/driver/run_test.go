package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

func TestRunVersionAndBadFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"--version"}, &out, &errOut); err != nil || strings.TrimSpace(out.String()) == "" {
		t.Fatalf("--version: %v, output %q", err, out.String())
	}
	flagOut := out.String()
	out.Reset()
	if err := run(context.Background(), []string{"version"}, &out, &errOut); err != nil || out.String() != flagOut {
		t.Fatalf("version: %v, output %q, want %q as --version", err, out.String(), flagOut)
	}
	// No arguments at all: say what the program is, not Validate's first complaint
	// ("--node-id is required in mode all").
	err := run(context.Background(), nil, &out, &errOut)
	if want := "no flags given: driver serves CSI in --mode=controller, node or all"; err == nil || !strings.Contains(err.Error(), want) ||
		!strings.Contains(err.Error(), "driver --help") || !strings.Contains(err.Error(), "make run") {
		t.Errorf("no arguments: %v, want %q, a pointer to driver --help and make run", err, want)
	}
	for name, args := range map[string][]string{
		"node without node id":                 {"--mode=node"},
		"bad endpoint":                         {"--mode=controller", "--endpoint=/tmp/x.sock"},
		"unknown flag":                         {"--no-such-flag"},
		"unknown subcommand":                   {"nodeinf"},
		"registrar without the kubelet's path": {"registrar", "--csi-address=/csi/csi.sock"},
		"registrar with a bad http endpoint":   {"registrar", "--csi-address=/csi/csi.sock", "--kubelet-registration-path=/k/csi.sock", "--http-endpoint=9810"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := run(context.Background(), args, &out, &errOut); err == nil {
				t.Errorf("run(%v) = nil, want an error", args)
			}
		})
	}
}

// fakeCloudAPI answers the few routes a node plugin uses, like the real server would.
func fakeCloudAPI(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /v1/instances/i-1", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, cloud.Instance{ID: "i-1", Zone: "zone-a", InstanceType: "t", AttachLimit: 8, OutOfBandSlots: 1, Attachments: []string{}})
	})
	mux.HandleFunc("GET /v1/instances/i-1/capacity", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, cloud.Capacity{InstanceID: "i-1", AttachLimit: 8, OutOfBandSlots: 1, QuotaHeadroom: 100, Instances: 1, Revision: 3, ObservedAt: time.Now()})
	})
	mux.HandleFunc("GET /v1/volumes", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, cloud.VolumeList{Volumes: []cloud.Volume{}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestServeAndNodeinfo(t *testing.T) {
	api := fakeCloudAPI(t)
	dir, err := os.MkdirTemp("", "drv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	endpoint := "--endpoint=unix://" + filepath.Join(dir, "csi.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var serveOut, serveErr bytes.Buffer
	go func() {
		done <- run(ctx, []string{"--mode=all", "--node-id=i-1", endpoint, "--cloud-url=" + api.URL,
			"--state-dir=" + filepath.Join(dir, "state"), "-v=2"}, &serveOut, &serveErr)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	// nodeinfo fails at once while the socket does not exist: wait for the plugin to create it.
	sock := filepath.Join(dir, "csi.sock")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the plugin never created %s: %v (%s)", sock, err, serveErr.String())
		}
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"nodeinfo", endpoint, "--timeout=20s"}, &out, &errOut); err != nil {
		t.Fatalf("nodeinfo: %v (%s)", err, errOut.String())
	}
	var info struct {
		NodeID             string `json:"nodeId"`
		MaxVolumesPerNode  string `json:"maxVolumesPerNode"`
		AccessibleTopology struct {
			Segments map[string]string `json:"segments"`
		} `json:"accessibleTopology"`
	}
	if err := json.Unmarshal(out.Bytes(), &info); err != nil {
		t.Fatalf("nodeinfo output is not JSON: %v\n%s", err, out.String())
	}
	if info.NodeID != "i-1" || info.MaxVolumesPerNode != "7" || info.AccessibleTopology.Segments["topology.disk.fakecloud.dev/zone"] != "zone-a" {
		t.Errorf("nodeinfo = %+v, want i-1, 7 slots (8 - 1 out-of-band), zone-a", info)
	}

	deadline := time.Now().Add(20 * time.Second)
	for {
		out.Reset()
		err := run(context.Background(), []string{"probe", endpoint, "--timeout=5s"}, &out, &errOut)
		var probe struct {
			Ready bool `json:"ready"`
		}
		if err == nil && json.Unmarshal(out.Bytes(), &probe) == nil && probe.Ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("probe never ready: %v %s", err, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}

	// `driver registrar` against this plugin: it learns the driver's name from the plugin and
	// serves the kubelet's registration socket until its context ends, then removes it.
	regDir := filepath.Join(dir, "registry")
	if err := os.Mkdir(regDir, 0o755); err != nil {
		t.Fatal(err)
	}
	regCtx, regCancel := context.WithCancel(context.Background())
	regDone := make(chan error, 1)
	go func() {
		regDone <- run(regCtx, []string{"registrar", "--csi-address=" + sock, "--kubelet-registration-path=/var/lib/kubelet/plugins/disk.fakecloud.dev/csi.sock",
			"--plugin-registration-path=" + regDir, "--v=2"}, &out, &errOut)
	}()
	regSock := filepath.Join(regDir, "disk.fakecloud.dev-reg.sock")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if fi, err := os.Stat(regSock); err == nil && fi.Mode().Type() == os.ModeSocket {
			break
		} else if time.Now().After(deadline) {
			regCancel()
			t.Fatalf("registrar never served %s: %v (%s)", regSock, err, <-regDone)
		}
	}
	regCancel()
	if err := <-regDone; err != nil {
		t.Fatalf("registrar returned %v after its context ended, want nil", err)
	}
	if _, err := os.Stat(regSock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("registration socket after the registrar stopped: %v, want it removed", err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v after cancel, want nil", err)
		}
		done <- nil
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop after cancel")
	}
}

// A unix socket that does not exist, or a path that is no socket, fails at once with an error
// that says so; a socket that exists but does not answer still waits for --timeout. The
// context bounds each call so that a regression (waiting for the 10m --timeout) fails the
// test instead of hanging it.
func TestQueryCommandsOnAMissingOrSilentSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "drv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	file := filepath.Join(dir, "file.sock")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	silent := filepath.Join(dir, "silent.sock")
	l, err := net.Listen("unix", silent)
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 100)
	t.Cleanup(func() {
		_ = l.Close()
		for {
			select {
			case c := <-accepted:
				_ = c.Close()
			default:
				return
			}
		}
	})
	go func() { // accepts and never answers
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			select {
			case accepted <- c:
			default:
				_ = c.Close()
			}
		}
	}()
	// A socket file nobody listens on any more, as a plugin killed with SIGKILL leaves.
	stale := filepath.Join(dir, "stale.sock")
	sl, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	sl.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = sl.Close()
	missing := filepath.Join(dir, "nope.sock")
	for _, tc := range []struct {
		name, path, timeout string
		want                []string // in the error
		wantDeadline        bool     // the --timeout ended the call
	}{
		{name: "missing", path: missing, timeout: "10m", want: []string{"socket " + missing + " does not exist", "unix://" + missing}},
		{name: "not a socket", path: file, timeout: "10m", want: []string{file + " is not a unix socket"}},
		{name: "stale", path: stale, timeout: "10m", want: []string{"nothing listens on socket " + stale}},
		{name: "silent", path: silent, timeout: "300ms", wantDeadline: true},
	} {
		for _, sub := range []string{"nodeinfo", "probe"} {
			t.Run(tc.name+"/"+sub, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				var out, errOut bytes.Buffer
				err := run(ctx, []string{sub, "--endpoint=unix://" + tc.path, "--timeout=" + tc.timeout}, &out, &errOut)
				if err == nil {
					t.Fatalf("%s on %s = nil error", sub, tc.path)
				}
				if ctx.Err() != nil {
					t.Fatalf("%s on %s waited for the test's own deadline: %v", sub, tc.path, err)
				}
				if got := status.Code(errors.Unwrap(err)) == codes.DeadlineExceeded; got != tc.wantDeadline {
					t.Errorf("%s on %s: %v; DeadlineExceeded %v, want %v", sub, tc.path, err, got, tc.wantDeadline)
				}
				for _, w := range append(tc.want, sub+" on ") {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s on %s: error %q lacks %q", sub, tc.path, err, w)
					}
				}
			})
		}
	}
}

// TestNodeinfoOnAControllerSaysSo: a socket that serves no Node service (a controller plugin)
// answers nodeinfo with what it is, not gRPC's "unknown service".
func TestNodeinfoOnAControllerSaysSo(t *testing.T) {
	dir, err := os.MkdirTemp("", "drv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "csi.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer() // no services at all: every call is Unimplemented
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	var out, errOut bytes.Buffer
	err = run(context.Background(), []string{"nodeinfo", "--endpoint=unix://" + sock, "--timeout=10s"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "it is a controller plugin") {
		t.Fatalf("nodeinfo on a controller: %v, want it named a controller plugin", err)
	}
}
