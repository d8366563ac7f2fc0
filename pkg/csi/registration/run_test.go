package registration

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// identity is the part of a CSI driver the registrar talks to.
type identity struct {
	csi.UnimplementedIdentityServer
	name string
}

func (i identity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: i.name, VendorVersion: "test"}, nil
}

// serveIdentity serves a CSI identity service named name on the unix socket sock until the
// test ends.
func serveIdentity(t *testing.T, sock, name string) {
	t.Helper()
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, identity{name: name})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
}

// healthz is GET /healthz's status code and body.
func healthz(t *testing.T, base string) (int, string) {
	t.Helper()
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestConfigValidate(t *testing.T) {
	good := DefaultConfig()
	good.CSIAddress, good.KubeletRegistrationPath = "/csi/csi.sock", "/var/lib/kubelet/plugins/d/csi.sock"
	for _, tc := range []struct {
		name    string
		edit    func(*Config)
		wantErr string
	}{
		{"defaults plus the two paths", func(*Config) {}, ""},
		{"unix URL", func(c *Config) { c.CSIAddress = "unix:///csi/csi.sock" }, ""},
		{"http endpoint", func(c *Config) { c.HTTPEndpoint = ":9810" }, ""},
		{"no csi address", func(c *Config) { c.CSIAddress = "" }, "--csi-address"},
		{"relative kubelet path", func(c *Config) { c.KubeletRegistrationPath = "csi.sock" }, "--kubelet-registration-path"},
		{"no registration dir", func(c *Config) { c.PluginRegistrationDir = "" }, "--plugin-registration-path"},
		{"bad http endpoint", func(c *Config) { c.HTTPEndpoint = "9810" }, "--http-endpoint"},
		{"zero timeout", func(c *Config) { c.CallTimeout = 0 }, "--timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.edit(&c)
			err := c.Validate()
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Validate() = %v, want an error naming %q", err, tc.wantErr)
			}
		})
	}
}

// The registrar as a node plugin pod runs it, over real unix sockets: it starts before the
// driver and waits for it, serves <dir>/<driver>-reg.sock over a stale one, answers the
// kubelet's handshake, reports health on /healthz (failing before the socket is served and
// after the kubelet refused the plugin), and on the context's end (SIGTERM) removes its
// socket and returns nil.
func TestRunRegistersTheDriverAndCleansUp(t *testing.T) {
	dir := shortTempDir(t)
	csiSock, regDir := filepath.Join(dir, "csi.sock"), filepath.Join(dir, "registry")
	if err := os.Mkdir(regDir, 0o755); err != nil {
		t.Fatal(err)
	}
	regSock := SocketPath(regDir, testDriver)
	if err := os.WriteFile(regSock, nil, 0o600); err != nil { // left behind by a killed pod
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + lis.Addr().String()
	cfg := DefaultConfig()
	cfg.CSIAddress, cfg.KubeletRegistrationPath, cfg.PluginRegistrationDir = "unix://"+csiSock, "/var/lib/kubelet/plugins/d/csi.sock", regDir
	cfg.RetryInterval = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, lis) }()

	// No driver yet: unhealthy, and the stale file is still there.
	time.Sleep(200 * time.Millisecond)
	if code, body := healthz(t, base); code != http.StatusInternalServerError || !strings.Contains(body, "not served yet") {
		t.Errorf("/healthz before the driver answers = %d %q, want 500 not served yet", code, body)
	}
	serveIdentity(t, csiSock, testDriver)

	var info *registerapi.PluginInfo
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		actx, acancel := context.WithTimeout(ctx, time.Second)
		info, err = registrationClient(t, regSock).GetInfo(actx, &registerapi.InfoRequest{})
		acancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("registration socket %s never answered: %v", regSock, err)
		}
	}
	if info.Name != testDriver || info.Endpoint != cfg.KubeletRegistrationPath || info.Type != registerapi.CSIPlugin {
		t.Errorf("GetInfo = %+v, want %s at %s", info, testDriver, cfg.KubeletRegistrationPath)
	}
	if code, body := healthz(t, base); code != http.StatusOK {
		t.Errorf("/healthz once served = %d %q, want 200", code, body)
	}
	client := registrationClient(t, regSock)
	for _, tc := range []struct {
		status   *registerapi.RegistrationStatus
		wantCode int
	}{
		{&registerapi.RegistrationStatus{PluginRegistered: false, Error: "no such version"}, http.StatusInternalServerError},
		{&registerapi.RegistrationStatus{PluginRegistered: true}, http.StatusOK},
	} {
		if _, err := client.NotifyRegistrationStatus(ctx, tc.status); err != nil {
			t.Fatal(err)
		}
		if code, body := healthz(t, base); code != tc.wantCode || tc.status.Error != "" && !strings.Contains(body, tc.status.Error) {
			t.Errorf("/healthz after %+v = %d %q, want %d with the kubelet's reason", tc.status, code, body, tc.wantCode)
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after the context ended = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return 10 s after the context ended")
	}
	if _, err := os.Stat(regSock); !os.IsNotExist(err) {
		t.Errorf("registration socket after Run returned: stat = %v, want it removed", err)
	}
}

// A driver that never answers: Run keeps retrying and fails only when the context ends,
// naming the address; an empty driver name is an error at once.
func TestDriverNameErrors(t *testing.T) {
	dir := shortTempDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	missing := filepath.Join(dir, "missing.sock")
	if _, err := DriverName(ctx, missing, 50*time.Millisecond, 20*time.Millisecond); err == nil || !strings.Contains(err.Error(), missing) ||
		!errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "last error: ") {
		t.Errorf("DriverName on a missing socket = %v, want an error naming it, the context's end and the last try's error", err)
	}
	empty := filepath.Join(dir, "empty.sock")
	serveIdentity(t, empty, "")
	if _, err := DriverName(context.Background(), empty, time.Second, 20*time.Millisecond); err == nil || !strings.Contains(err.Error(), "empty name") {
		t.Errorf("DriverName of a nameless driver = %v, want an empty-name error", err)
	}
}
