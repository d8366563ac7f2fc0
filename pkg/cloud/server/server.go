// Package server is the fake cloud: the HTTP API of docs/fakecloud-api.md over a durable bbolt
// store (package store) and an in-memory fault engine (package faults).
//
// Start one in-process, for tests or the driver's integration tests:
//
//	srv, err := server.New(server.Config{Auth: server.AuthNone, Seed: server.DefaultSeed()})
//	ln, err := net.Listen("tcp", "127.0.0.1:0")
//	go srv.Serve(ctx, ln) // returns nil when ctx ends and the server has shut down
//	defer srv.Close()     // after Serve returned
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"
	"k8s.io/klog/v2"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/scenario"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/console"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/faults"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
)

// DefaultMaxBodyBytes is the default request body limit: 1 MiB.
const DefaultMaxBodyBytes = 1 << 20

// Connection bounds, the defaults of Config's fields of the same names.
const (
	// DefaultMaxConnections caps the connections served at once (open sockets, idle
	// keep-alive ones included), so a flood of idle connections cannot exhaust the file
	// descriptors: connections beyond it wait in the kernel's accept backlog until one
	// closes. A driver keeps up to 64 per client (cloud.Client), so this serves a
	// controller and a few dozen node plugins at once.
	DefaultMaxConnections = 1024
	// DefaultReadHeaderTimeout bounds reading a request's headers, from the connection's
	// accept (a new connection) or the end of the previous request (keep-alive).
	DefaultReadHeaderTimeout = 5 * time.Second
	// DefaultReadTimeout bounds reading a whole request, body included: a body of
	// DefaultMaxBodyBytes trickling in slower than about 100 KiB/s is cut off.
	DefaultReadTimeout = 10 * time.Second
	// DefaultIdleTimeout is how long an idle keep-alive connection stays open. It stays
	// longer than cloud.Client's own idle timeout (90 s, Go's default transport), so the
	// client closes an idle connection first and never sends a POST on one the server is
	// closing (Go retries only idempotent requests on such a connection).
	DefaultIdleTimeout = 2 * time.Minute
)

// HTTP server timeouts that are not configurable. WriteTimeout leaves room for the longest
// injected fault latency (faults.MaxLatency, also the cap of one request's total), so a
// delayed request always gets its answer.
const (
	writeTimeout    = faults.MaxLatency + 30*time.Second
	shutdownTimeout = 10 * time.Second
)

// DefaultZoneName is the zone used where Config.DefaultZone is empty.
const DefaultZoneName = "zone-a"

// Config configures a Server. The zero value of every optional field picks a default.
type Config struct {
	// Listen is the address Run listens on, e.g. "127.0.0.1:8080".
	Listen string
	// DataDir holds the bbolt file; empty means a temporary file removed by Close.
	DataDir string
	// Seed is the starting state of a new data dir and the state /v1/reset returns to.
	// The zero Seed means DefaultSeed.
	Seed Seed
	// Auth is AuthTokens (default) or AuthNone.
	Auth AuthMode
	// Tokens are the bearer tokens under AuthTokens.
	Tokens []Token
	// AutoRegister creates unknown instances that a driver asks about (instance, capacity)
	// with DefaultInstanceType and DefaultZone.
	AutoRegister        bool
	DefaultInstanceType string
	// DefaultZone is the zone of auto-registered instances and of volumes created without a
	// zone (a CreateVolume with no topology requirement); empty means DefaultZoneName. It must
	// be a CSI topology value (store.CheckZone). Volumes may be created in it, and in the
	// zone of any instance; other zones are InvalidArgument.
	DefaultZone string
	// MaxBodyBytes limits request bodies (413 PayloadTooLarge); default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxEvents bounds the audit log's count; default store.DefaultMaxEvents (10,000).
	MaxEvents int
	// MaxEventBytes bounds the audit log's stored bytes; default store.DefaultMaxEventBytes
	// (4 MiB).
	MaxEventBytes int64
	// MaxInstances caps the instances (ServerLimitExceeded past it; auto-registration stops
	// registering); default store.DefaultMaxInstances (10,000).
	MaxInstances int
	// MaxFaultRules caps the live fault rules (ServerLimitExceeded past it); default
	// faults.DefaultMaxRules (1,000).
	MaxFaultRules int
	// MaxConnections caps the connections Serve serves at once; default
	// DefaultMaxConnections.
	MaxConnections int
	// MaxHeavyReads caps the answers that grow with the fleet (GET /metrics, the unpaged
	// GET /v1/instances) rendered and written at once; a reader beyond it waits up to 5 s for
	// a turn, then gets 429 Throttled with Retry-After. Default DefaultMaxHeavyReads.
	MaxHeavyReads int
	// MaxWaits caps the waits of GET /v1/volumes/{id}?waitFor= open at once; one more is
	// answered 429 Throttled at once. Default: half of MaxConnections, at least 1
	// (DefaultMaxWaits with the default MaxConnections).
	MaxWaits int
	// MetricsOpen serves GET /metrics without a token (the --metrics-open flag); by default
	// it needs the reader role like every other read, since its answer names every
	// instance and grows with the fleet.
	MetricsOpen bool
	// ReadHeaderTimeout, ReadTimeout and IdleTimeout are the http.Server's; defaults
	// DefaultReadHeaderTimeout, DefaultReadTimeout, DefaultIdleTimeout. ReadTimeout must not
	// be shorter than ReadHeaderTimeout.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	IdleTimeout       time.Duration
	// AttachDuration and DetachDuration are how long an attach stays attaching and a detach
	// detaching (docs/attach.md) on instances whose type sets no duration; 0 (the zero
	// value) completes them within the request, the synchronous cloud that unit tests use.
	// At most cloud.MaxTransitionMS. The fakecloud command defaults to
	// DefaultAttachDuration and DefaultDetachDuration.
	AttachDuration time.Duration
	DetachDuration time.Duration
	// Now is the clock of the store and the fault engine; default time.Now.
	Now func() time.Time
	// Sleep waits for injected fault latency; it must return ctx.Err() when ctx ends first.
	// Default: a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Logger is the base logger; default klog.Background().
	Logger *klog.Logger
	// Console configures the web console of GET /ui: the node plugins whose capacity it
	// shows beside the cloud's (none: the cloud's view only) and the Kubernetes cluster it
	// reads CSINode counts and Pending pods from (none: no cluster view). Its clock
	// defaults to Now.
	Console console.Config
}

// Validate reports every problem of the configuration at once.
func (c *Config) Validate() error {
	var errs []error
	switch c.Auth {
	case AuthTokens:
		if err := validateTokens(c.Tokens); err != nil {
			errs = append(errs, fmt.Errorf("auth=tokens: %w", err))
		}
	case AuthNone:
	default:
		errs = append(errs, fmt.Errorf("unknown auth mode %q (want tokens or none)", c.Auth))
	}
	if c.MaxBodyBytes < 0 {
		errs = append(errs, fmt.Errorf("max body bytes must be > 0, got %d", c.MaxBodyBytes))
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"max events", int64(c.MaxEvents)}, {"max event bytes", c.MaxEventBytes}, {"max fault rules", int64(c.MaxFaultRules)}, {"max instances", int64(c.MaxInstances)},
		{"max connections", int64(c.MaxConnections)}, {"max heavy reads", int64(c.MaxHeavyReads)}, {"max waits", int64(c.MaxWaits)}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("%s must be > 0 (0: the default), got %d", f.name, f.v))
		}
	}
	if c.MaxEventBytes > 0 && c.MaxEventBytes < store.MaxEventRecordBytes {
		errs = append(errs, fmt.Errorf("max event bytes must hold one event (%d bytes), got %d", store.MaxEventRecordBytes, c.MaxEventBytes))
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"read header timeout", c.ReadHeaderTimeout}, {"read timeout", c.ReadTimeout}, {"idle timeout", c.IdleTimeout}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("%s must be > 0 (0: the default), got %v", f.name, f.v))
		}
	}
	if c.ReadTimeout > 0 && c.ReadHeaderTimeout > c.ReadTimeout {
		errs = append(errs, fmt.Errorf("read header timeout %v is longer than the read timeout %v", c.ReadHeaderTimeout, c.ReadTimeout))
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"attach duration", c.AttachDuration}, {"detach duration", c.DetachDuration}} {
		if f.v < 0 || f.v > cloud.MaxTransitionMS*time.Millisecond {
			errs = append(errs, fmt.Errorf("%s must be in [0, %v], got %v", f.name, cloud.MaxTransitionMS*time.Millisecond, f.v))
		}
	}
	if c.DefaultZone != "" {
		if err := store.CheckZone(c.DefaultZone); err != nil {
			errs = append(errs, fmt.Errorf("default zone: %w", err))
		}
	}
	if c.AutoRegister && (c.DefaultInstanceType == "" || c.DefaultZone == "") {
		errs = append(errs, errors.New("auto-register needs a default instance type and zone"))
	}
	if err := c.Console.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Seed.withDefaults().state().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("seed: %w", err))
	}
	if c.AutoRegister && c.DefaultInstanceType != "" {
		found := false
		for _, it := range c.Seed.withDefaults().InstanceTypes {
			found = found || it.Name == c.DefaultInstanceType
		}
		if !found {
			errs = append(errs, fmt.Errorf("default instance type %q is not a seeded instance type", c.DefaultInstanceType))
		}
	}
	return errors.Join(errs...)
}

// Server is the fake cloud. Create it with New, serve with Serve or Run, then Close it.
type Server struct {
	cfg     Config
	store   *store.Store
	faults  *faults.Engine
	metrics *metrics
	tokens  map[string]Role
	handler http.Handler
	// routeQuery is each API route's query parameters by route name (routeOpts.query), for
	// Routes.
	routeQuery map[string][]string
	logger     klog.Logger
	console    *console.Console
	// scenarios runs POST /v1/scenarios timelines; Close stops them.
	scenarios *scenario.Manager
	// reqlog bounds what the default verbosity logs of requests and fault firings.
	reqlog *requestLog
	// wake wakes the transition worker (kick, started).
	wake *waker
	// order keeps each volume's attaches and detaches in their arrival order.
	order *volumeOrder
	// heavy bounds the answers that grow with the fleet written at once.
	heavy *gate
	// waits holds a token per open wait of GET /v1/volumes/{id}?waitFor= (Config.MaxWaits).
	waits chan struct{}
	// life is Serve's base context, which ends when shutdown begins (nil before Serve): an
	// attach or detach runs until then even when its caller has left (operationContext).
	life atomic.Pointer[context.Context]
}

// New validates cfg, opens the store (seeding a new data dir) and loads the seeded fault
// rules. It starts no goroutines and opens no sockets.
func New(cfg Config) (*Server, error) {
	if cfg.Auth == "" {
		cfg.Auth = AuthTokens
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.DefaultZone == "" {
		cfg.DefaultZone = DefaultZoneName
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.MaxHeavyReads == 0 {
		cfg.MaxHeavyReads = DefaultMaxHeavyReads
	}
	if cfg.MaxWaits == 0 {
		cfg.MaxWaits = max(1, cfg.MaxConnections/2)
	}
	if cfg.ReadHeaderTimeout == 0 {
		cfg.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = max(DefaultReadTimeout, cfg.ReadHeaderTimeout)
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	cfg.Seed = cfg.Seed.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("fake cloud config: %w", err)
	}
	s := &Server{cfg: cfg, faults: faults.NewWithLimit(cfg.Now, cfg.MaxFaultRules), tokens: map[string]Role{}, logger: klog.Background(),
		wake: newWaker(), reqlog: newRequestLog(cfg.Now), order: newVolumeOrder(),
		heavy: newGate(cfg.MaxHeavyReads, heavyReadWait), waits: make(chan struct{}, cfg.MaxWaits)}
	if cfg.Logger != nil {
		s.logger = *cfg.Logger
	}
	for _, t := range cfg.Tokens {
		s.tokens[t.Token] = t.Role
	}
	if err := s.faults.Reset(cfg.Seed.Faults); err != nil {
		return nil, fmt.Errorf("fake cloud config: %w", err)
	}
	st, err := store.Open(cfg.DataDir, store.Options{Now: cfg.Now, MaxEvents: cfg.MaxEvents, MaxEventBytes: cfg.MaxEventBytes, MaxInstances: cfg.MaxInstances, Zones: []string{cfg.DefaultZone},
		AttachDuration: cfg.AttachDuration, DetachDuration: cfg.DetachDuration})
	if err != nil {
		return nil, err
	}
	seeded, err := st.SeedIfEmpty(cfg.Seed.state())
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	s.logger.V(2).Info("Store opened", "path", st.Path(), "seeded", seeded)
	s.store = st
	s.metrics = newMetrics(st, s.faults, s.waits)
	if cfg.Console.Now == nil {
		cfg.Console.Now = cfg.Now
	}
	if s.console, err = console.New(cfg.Console); err != nil {
		_ = st.Close()
		return nil, err
	}
	s.scenarios = scenario.NewManager(scenario.ManagerOptions{Now: cfg.Now})
	s.routeQuery = map[string][]string{}
	s.handler = s.router()
	return s, nil
}

// Handler is the server's HTTP handler, for httptest or a caller's own http.Server.
func (s *Server) Handler() http.Handler { return s.handler }

// Close stops the running scenarios and closes the store (removing it when DataDir was
// empty). Call it after Serve returned.
func (s *Server) Close() error {
	s.scenarios.Close()
	return s.store.Close()
}

// Run listens on Config.Listen, logs the address and serves until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.Listen, err)
	}
	s.logger.Info("Fake cloud listening", "address", "http://"+ln.Addr().String(), "auth", s.cfg.Auth, "dataDir", s.cfg.DataDir)
	return s.Serve(ctx, ln)
}

// Serve serves HTTP on ln until ctx ends, then shuts down gracefully (in-flight requests get
// up to 10 s). It also runs the transition worker, which completes attaches and detaches
// when they are due (a Handler served without Serve leaves them attaching or detaching). At most Config.MaxConnections connections are served at once
// (netutil.LimitListener: further ones wait to be accepted). It returns nil on a clean stop
// and the serve or shutdown error otherwise; it closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ln = netutil.LimitListener(ln, s.cfg.MaxConnections)
	// Request contexts end when shutdown begins, so injected fault latency (up to a minute)
	// stops at once instead of holding Shutdown; store transactions do not watch contexts and
	// finish normally.
	baseCtx, cancelBase := context.WithCancel(klog.NewContext(context.WithoutCancel(ctx), s.logger))
	defer cancelBase()
	s.life.Store(&baseCtx)
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		// Headers count against the request size bound too (Go's default is 1 MiB).
		MaxHeaderBytes: maxHeaderBytes,
		BaseContext:    func(net.Listener) context.Context { return baseCtx },
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	workerCtx, stopWorker := context.WithCancel(baseCtx)
	workerDone := make(chan struct{})
	go func() {
		defer close(workerDone)
		s.runTransitions(workerCtx)
	}()
	defer func() {
		stopWorker()
		<-workerDone
	}()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	cancelBase()
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	err := hs.Shutdown(shutdownCtx)
	if serveErr := <-errc; serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return errors.Join(fmt.Errorf("serve: %w", serveErr), err)
	}
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

func (s *Server) now() time.Time { return s.cfg.Now() }

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// MaxFiredEventsPerRequest is how many FaultFired events one request records at most; the
// rules beyond it that fired too are summed up in one FaultFiredMore event (their firings
// still count in /metrics and the rules' fired counts). It bounds what one request writes to
// the store, however many rules match it.
const MaxFiredEventsPerRequest = 32

// maxHeaderBytes bounds a request's header block, in bytes: a bearer token, an If-Match and
// the usual headers take far less.
const maxHeaderBytes = 64 << 10

// inject runs the fault rules for one operation before it touches the store: every fired rule
// is recorded as a FaultFired event, all in one commit (the engine counts them for
// /metrics); then the summed latency, at most faults.MaxLatency, is waited out and the
// rule's error (or the cap's Unavailable) returned. The call's IDs were checked as
// identifiers before.
func (s *Server) inject(ctx context.Context, call faults.Call) error {
	out := s.faults.Evaluate(call)
	if len(out.Fired) > 0 {
		evs := make([]cloud.Event, 0, min(len(out.Fired), MaxFiredEventsPerRequest+1))
		for _, f := range out.Fired[:min(len(out.Fired), MaxFiredEventsPerRequest)] {
			detail := fmt.Sprintf("rule=%s operation=%s error=%s latencyMs=%d", f.RuleID, f.Operation, f.Error, f.Latency.Milliseconds())
			evs = append(evs, cloud.Event{Type: "FaultFired", VolumeID: call.VolumeID, InstanceID: call.InstanceID, Detail: detail})
		}
		if more := len(out.Fired) - MaxFiredEventsPerRequest; more > 0 {
			evs = append(evs, cloud.Event{Type: "FaultFiredMore", VolumeID: call.VolumeID, InstanceID: call.InstanceID,
				Detail: fmt.Sprintf("operation=%s: %d more rules fired (counted in /metrics, not listed)", call.Operation, more)})
		}
		// One commit for every rule that fired.
		if _, err := s.store.RecordEvents(evs); err != nil {
			return err
		}
		// At the default verbosity within the request log's bounds (a rule matching every
		// poll must not fill `make run`'s terminal); at -v=2 every firing.
		logger := klog.FromContext(ctx)
		for _, f := range out.Fired {
			if logger.V(2).Enabled() || s.reqlog.allow() {
				logger.Info("Fault fired", "rule", f.RuleID, "operation", f.Operation, "code", f.Error,
					"volumeID", call.VolumeID, "nodeID", call.InstanceID)
			}
		}
	}
	if out.Capped {
		klog.FromContext(ctx).V(2).Info("Injected latency capped", "operation", call.Operation, "capMs", out.Delay.Milliseconds(), "rules", len(out.Fired))
	}
	if out.Delay > 0 {
		if err := s.cfg.Sleep(ctx, out.Delay); err != nil {
			// The caller left or the server is stopping; either way the operation did not run.
			return cloud.NewError(cloud.CodeUnavailable, "injected latency interrupted: %v", err)
		}
	}
	if out.Err != nil {
		return out.Err
	}
	return s.refuseUnhealthyAttach(ctx, call)
}
