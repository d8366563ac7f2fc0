package registration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// DefaultPluginRegistrationDir is where the kubelet's plugins_registry is mounted in the
// registrar's container, as node-driver-registrar expects it (--plugin-registration-path).
const DefaultPluginRegistrationDir = "/registration"

// Config is what Run needs; the flags of `driver registrar` fill it with the names
// node-driver-registrar uses.
type Config struct {
	// CSIAddress is the driver's CSI socket as this process sees it: a path, or a unix://
	// URL (--csi-address).
	CSIAddress string
	// KubeletRegistrationPath is the same socket as the kubelet sees it on the node, an
	// absolute path announced in GetInfo (--kubelet-registration-path).
	KubeletRegistrationPath string
	// PluginRegistrationDir is the kubelet's plugins_registry as this process sees it; the
	// registration socket is <dir>/<driver>-reg.sock (--plugin-registration-path).
	PluginRegistrationDir string
	// HTTPEndpoint is host:port of the /healthz server; empty: off (--http-endpoint).
	HTTPEndpoint string
	// CallTimeout bounds each GetPluginInfo attempt and each /healthz check (--timeout).
	CallTimeout time.Duration
	// RetryInterval is the wait between GetPluginInfo attempts while the driver does not
	// answer yet.
	RetryInterval time.Duration
}

// DefaultConfig is the Config of `driver registrar` without flags: no CSI address or kubelet
// path (both required), /registration, no HTTP server, 1 s calls retried every second.
func DefaultConfig() Config {
	return Config{PluginRegistrationDir: DefaultPluginRegistrationDir, CallTimeout: time.Second, RetryInterval: time.Second}
}

// Validate reports every field Run cannot work with, joined.
func (c Config) Validate() error {
	var errs []error
	switch p := csiSocketPath(c.CSIAddress); {
	case p == "":
		errs = append(errs, errors.New("--csi-address is required"))
	case !filepath.IsAbs(p):
		// grpc cannot dial "unix://csi.sock" or "tcp://...": refuse it here instead of
		// retrying GetPluginInfo forever.
		errs = append(errs, fmt.Errorf("--csi-address must be an absolute socket path or unix:// URL of one, got %q", c.CSIAddress))
	}
	if !filepath.IsAbs(c.KubeletRegistrationPath) {
		errs = append(errs, fmt.Errorf("--kubelet-registration-path must be an absolute path, got %q", c.KubeletRegistrationPath))
	}
	if c.PluginRegistrationDir == "" {
		errs = append(errs, errors.New("--plugin-registration-path is required"))
	}
	if c.HTTPEndpoint != "" {
		if _, _, err := net.SplitHostPort(c.HTTPEndpoint); err != nil {
			errs = append(errs, fmt.Errorf("--http-endpoint must be host:port: %w", err))
		}
	}
	if c.CallTimeout <= 0 || c.RetryInterval <= 0 {
		errs = append(errs, errors.New("--timeout and the retry interval must be positive"))
	}
	return errors.Join(errs...)
}

// csiSocketPath is the socket path of a --csi-address: the address itself, or the path of a
// unix:// URL.
func csiSocketPath(addr string) string { return strings.TrimPrefix(addr, "unix://") }

// Run registers the driver behind cfg.CSIAddress with the kubelet until ctx ends: it asks the
// driver its name (GetPluginInfo, retried until the socket answers), serves the registration
// socket and, when cfg.HTTPEndpoint is set, /healthz. On ctx's end it removes the
// registration socket, so that the kubelet deregisters the driver, and returns nil. Errors:
// an invalid cfg, a driver name it cannot get before ctx ends, a socket or HTTP endpoint it
// cannot listen on.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	var lis net.Listener
	if cfg.HTTPEndpoint != "" {
		var err error
		if lis, err = net.Listen("tcp", cfg.HTTPEndpoint); err != nil {
			return fmt.Errorf("listen on --http-endpoint %s: %w", cfg.HTTPEndpoint, err)
		}
	}
	return run(ctx, cfg, lis)
}

// run is Run with the /healthz listener already open (nil: no HTTP server); it closes lis.
func run(ctx context.Context, cfg Config, lis net.Listener) error {
	log := klog.FromContext(ctx)
	// /healthz answers from the start, failing until the socket is served: a registrar still
	// waiting for its driver is not healthy yet, and the probe must be able to say so.
	health := &healthHandler{timeout: cfg.CallTimeout}
	httpErr := make(chan error, 1)
	if lis != nil {
		hs := &http.Server{Handler: health, ReadHeaderTimeout: 5 * time.Second}
		go func() { httpErr <- hs.Serve(lis) }()
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = hs.Shutdown(sctx)
		}()
	}
	name, err := DriverName(ctx, cfg.CSIAddress, cfg.CallTimeout, cfg.RetryInterval)
	if err != nil {
		return err
	}
	sock := SocketPath(cfg.PluginRegistrationDir, name)
	srv := NewServer(name, cfg.KubeletRegistrationPath, log)
	stop, err := Serve(ctx, sock, srv)
	if err != nil {
		return err
	}
	defer stop()
	health.set(srv, sock)
	log.Info("Serving the kubelet plugin registration socket", "driver", name, "socket", sock, "endpoint", cfg.KubeletRegistrationPath)
	select {
	case <-ctx.Done():
		log.Info("Stopping: removing the registration socket", "socket", sock)
		return nil
	case err := <-httpErr:
		return fmt.Errorf("/healthz server on %s: %w", lis.Addr(), err)
	}
}

// DriverName asks the CSI driver on csiAddress (a path or unix:// URL) its name with
// GetPluginInfo, each attempt bounded by callTimeout, retrying every retryInterval until the
// driver answers (it may still be starting, or not have created its socket yet). It logs the
// first failure and then one line every 30 s with the time waited. Errors: ctx ended first,
// or the driver answered with an empty name.
func DriverName(ctx context.Context, csiAddress string, callTimeout, retryInterval time.Duration) (string, error) {
	log := klog.FromContext(ctx)
	conn, err := grpc.NewClient("unix://"+csiSocketPath(csiAddress), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", fmt.Errorf("dial CSI driver at %s: %w", csiAddress, err)
	}
	defer func() { _ = conn.Close() }()
	client := csi.NewIdentityClient(conn)
	start := time.Now()
	var (
		lastLog time.Time
		lastErr error
		name    string
	)
	// Sliding: retryInterval between the end of one try and the next.
	err = wait.Backoff{Duration: retryInterval}.DelayFunc().Until(ctx, true, true, func(ctx context.Context) (bool, error) {
		actx, cancel := context.WithTimeout(ctx, callTimeout)
		resp, err := client.GetPluginInfo(actx, &csi.GetPluginInfoRequest{})
		cancel()
		if err == nil {
			if resp.GetName() == "" {
				return false, fmt.Errorf("CSI driver at %s answered GetPluginInfo with an empty name", csiAddress)
			}
			log.Info("CSI driver answered", "driver", resp.GetName(), "version", resp.GetVendorVersion(), "address", csiAddress)
			name = resp.GetName()
			return true, nil
		}
		lastErr = err
		if lastLog.IsZero() || time.Since(lastLog) >= 30*time.Second {
			log.Info("Waiting for the CSI driver to answer GetPluginInfo", "address", csiAddress, "elapsed", time.Since(start).Round(time.Second), "err", err.Error())
			lastLog = time.Now()
		}
		return false, nil
	})
	switch {
	case err == nil:
		return name, nil
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return "", fmt.Errorf("CSI driver at %s did not answer GetPluginInfo in %s: %w (last error: %v)", csiAddress, time.Since(start).Round(time.Second), ctx.Err(), lastErr) //nolint:errorlint // the deadline is the cause; the last dial error is context
	}
	return "", err
}

// healthHandler serves /healthz: 200 "ok" when the registration socket is served, answers
// GetInfo with the driver's name, and the kubelet has not refused the plugin; 500 with the
// reason otherwise (also while the driver's name is still unknown).
type healthHandler struct {
	timeout time.Duration

	mu     sync.Mutex
	srv    *Server
	socket string
}

// set points the handler at the served registration socket.
func (h *healthHandler) set(srv *Server, socket string) {
	h.mu.Lock()
	h.srv, h.socket = srv, socket
	h.mu.Unlock()
}

// ServeHTTP answers /healthz as node-driver-registrar does: 200 while the registration socket
// is served and the kubelet has not refused the plugin, 500 with the reason otherwise.
func (h *healthHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/healthz" {
		http.NotFound(w, r)
		return
	}
	h.mu.Lock()
	srv, socket := h.srv, h.socket
	h.mu.Unlock()
	if err := check(r.Context(), srv, socket, h.timeout); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// check is the /healthz verdict on srv served on socket.
func check(ctx context.Context, srv *Server, socket string, timeout time.Duration) error {
	if srv == nil {
		return errors.New("registration socket not served yet: waiting for the CSI driver's name")
	}
	if err := srv.Err(); err != nil {
		return err
	}
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dial registration socket %s: %w", socket, err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	info, err := registerapi.NewRegistrationClient(conn).GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		return fmt.Errorf("registration socket %s does not answer GetInfo: %w", socket, err)
	}
	if info.GetName() != srv.DriverName() {
		return fmt.Errorf("registration socket %s answers for %q, want %q", socket, info.GetName(), srv.DriverName())
	}
	return nil
}
