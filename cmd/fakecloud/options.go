package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/console"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/faults"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server/store"
)

// Options are fakecloud's command-line flags (the agreed command line in the project brief).
type Options struct {
	// Listen is the HTTP address, host:port; port 0 picks a free one.
	Listen string
	// DataDir holds the bbolt store; empty means a temporary store that nothing persists.
	DataDir string
	// SeedFile is the seed YAML; empty means server.DefaultSeed.
	SeedFile string
	// Auth is "tokens" or "none".
	Auth string
	// TokensFile is the tokens YAML, required with --auth=tokens.
	TokensFile string
	// AutoRegister creates unknown instances a driver asks about.
	AutoRegister bool
	// DefaultInstanceType and DefaultZone are what auto-registered instances get.
	DefaultInstanceType string
	DefaultZone         string
	// MaxBodyBytes limits request bodies, in bytes.
	MaxBodyBytes int64
	// MaxConnections caps the connections served at once.
	MaxConnections int
	// MaxHeavyReads caps the answers that grow with the fleet (/metrics, GET /v1/instances)
	// written at once.
	MaxHeavyReads int
	// MaxWaits caps the waits of GET /v1/volumes/{id}?waitFor= open at once.
	MaxWaits int
	// MetricsOpen serves /metrics without a token.
	MetricsOpen bool
	// ReadHeaderTimeout, ReadTimeout and IdleTimeout bound reading a request's headers, a
	// whole request, and an idle keep-alive connection.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	IdleTimeout       time.Duration
	// MaxFaultRules caps the live fault rules; MaxInstances the instances.
	MaxFaultRules int
	MaxInstances  int
	// MaxEvents and MaxEventBytes bound the audit log, in events and stored bytes.
	MaxEvents     int
	MaxEventBytes int64
	// ConsoleNodes are the --console-node values, NAME=URL: node plugins whose
	// /debug/capacity the web console (GET /ui) plots beside the cloud's truth.
	ConsoleNodes []string
	// ConsoleKubeconfig, when set, turns on the console's cluster view: the kubeconfig of
	// the cluster whose CSINodes and Pending pods it shows (read only, LIST calls).
	ConsoleKubeconfig string
	// ConsoleDriver is the CSI driver name the cluster view reads.
	ConsoleDriver string
	// AttachDuration and DetachDuration are how long an attach stays attaching and a detach
	// detaching on instances whose type sets no duration (docs/attach.md); 0 completes them
	// within the request.
	AttachDuration time.Duration
	DetachDuration time.Duration
	// Version prints the version and exits.
	Version bool
}

// AddFlags registers the options on fs with their defaults.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:8080", "HTTP listen address host:port")
	fs.StringVar(&o.DataDir, "data-dir", "", "directory of the durable store; empty: a temporary store, nothing persists")
	fs.StringVar(&o.SeedFile, "seed", "", "seed YAML (instance types, instances, quotas, faults); empty: built-in defaults")
	fs.StringVar(&o.Auth, "auth", string(server.AuthTokens), "authentication: tokens or none (laptop demo)")
	fs.StringVar(&o.TokensFile, "tokens-file", "", "tokens YAML (tokens: [{token: T, role: admin|driver|reader}]), for --auth=tokens")
	fs.BoolVar(&o.AutoRegister, "auto-register", false, "create unknown instances that a driver asks about")
	fs.StringVar(&o.DefaultInstanceType, "default-instance-type", "medium", "instance type of auto-registered instances")
	fs.StringVar(&o.DefaultZone, "default-zone", "zone-a", "zone of auto-registered instances and of volumes created without a zone")
	fs.Int64Var(&o.MaxBodyBytes, "max-body-bytes", server.DefaultMaxBodyBytes, "request body limit in bytes (413 PayloadTooLarge above)")
	fs.IntVar(&o.MaxConnections, "max-connections", server.DefaultMaxConnections,
		"connections served at once, idle keep-alive ones included; more wait in the accept backlog")
	fs.IntVar(&o.MaxHeavyReads, "max-heavy-reads", server.DefaultMaxHeavyReads,
		"answers that grow with the fleet (/metrics, GET /v1/instances) rendered and written at once; more readers wait up to 5 s, then get 429 Throttled")
	fs.IntVar(&o.MaxWaits, "max-waits", 0,
		"waits for an attach or detach (GET /v1/volumes/{id}?waitFor=) open at once; one more gets 429 Throttled at once (0: half of --max-connections)")
	fs.BoolVar(&o.MetricsOpen, "metrics-open", false, "serve /metrics without a token (by default it needs a reader token, as every read)")
	fs.DurationVar(&o.ReadHeaderTimeout, "read-header-timeout", server.DefaultReadHeaderTimeout,
		"time to read a request's headers; a slower client's connection is closed")
	fs.DurationVar(&o.ReadTimeout, "read-timeout", server.DefaultReadTimeout,
		"time to read a whole request, body included (>= --read-header-timeout); a slower body is cut off")
	fs.DurationVar(&o.IdleTimeout, "idle-timeout", server.DefaultIdleTimeout, "how long an idle keep-alive connection stays open")
	fs.IntVar(&o.MaxFaultRules, "max-fault-rules", faults.DefaultMaxRules,
		"live fault rules at most, seeded ones included (409 ServerLimitExceeded above)")
	fs.IntVar(&o.MaxInstances, "max-instances", store.DefaultMaxInstances,
		"instances at most (409 ServerLimitExceeded above; auto-registration stops registering)")
	fs.IntVar(&o.MaxEvents, "max-events", store.DefaultMaxEvents, "audit events kept (GET /v1/events); older ones are dropped")
	fs.Int64Var(&o.MaxEventBytes, "max-event-bytes", store.DefaultMaxEventBytes,
		"bytes of audit events kept (their stored JSON); older ones are dropped")
	fs.Func("console-node", "NAME=URL of a node plugin's HTTP server (--http-addr), e.g. node-a1=http://127.0.0.1:9809: "+
		"the web console on /ui shows its /debug/capacity over time; repeat per node", func(v string) error {
		o.ConsoleNodes = append(o.ConsoleNodes, v)
		return nil
	})
	fs.StringVar(&o.ConsoleKubeconfig, "console-kubeconfig", "",
		"kubeconfig of a cluster running the driver: the web console also shows its CSINode counts, VolumeAttachments and Pending pods with their reasons, "+
			"per node (read only: LIST of csinodes, volumeattachments, pods and events, once a second at most); empty: no cluster view")
	fs.StringVar(&o.ConsoleDriver, "console-driver", console.DefaultDriverName, "CSI driver name whose CSINode entries and VolumeAttachments the cluster view reads")
	fs.DurationVar(&o.AttachDuration, "attach-duration", server.DefaultAttachDuration,
		"how long an attach stays attaching (slot held) before it is attached, unless the instance type or a fault rule says otherwise; 0: at once, within the request")
	fs.DurationVar(&o.DetachDuration, "detach-duration", server.DefaultDetachDuration,
		"how long a detach stays detaching (slot held) before it is detached, unless the instance type or a fault rule says otherwise; 0: at once, within the request")
	fs.BoolVar(&o.Version, "version", false, "print the version and exit")
}

// Validate reports every problem of the options at once.
func (o *Options) Validate() error {
	var errs []error
	if o.Listen == "" {
		errs = append(errs, errors.New("--listen is required"))
	}
	switch server.AuthMode(o.Auth) {
	case server.AuthTokens:
		if o.TokensFile == "" {
			errs = append(errs, errors.New("--auth=tokens needs --tokens-file (or use --auth=none for a demo)"))
		}
	case server.AuthNone:
		if o.TokensFile != "" {
			errs = append(errs, errors.New("--tokens-file is ignored with --auth=none; remove one of them"))
		}
	default:
		errs = append(errs, fmt.Errorf("--auth=%q: want tokens or none", o.Auth))
	}
	if o.MaxBodyBytes <= 0 {
		errs = append(errs, fmt.Errorf("--max-body-bytes must be > 0, got %d", o.MaxBodyBytes))
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"max-connections", int64(o.MaxConnections)}, {"max-heavy-reads", int64(o.MaxHeavyReads)}, {"max-fault-rules", int64(o.MaxFaultRules)}, {"max-instances", int64(o.MaxInstances)},
		{"max-events", int64(o.MaxEvents)}, {"max-event-bytes", o.MaxEventBytes}} {
		if f.v <= 0 {
			errs = append(errs, fmt.Errorf("--%s must be > 0, got %d", f.name, f.v))
		}
	}
	switch {
	case o.MaxWaits < 0:
		errs = append(errs, fmt.Errorf("--max-waits must be >= 0 (0: half of --max-connections), got %d", o.MaxWaits))
	case o.MaxConnections > 0 && o.MaxWaits >= o.MaxConnections:
		// Waits that hold every connection leave none for the reads and writes that would end
		// them, or for /readyz.
		errs = append(errs, fmt.Errorf("--max-waits must be below --max-connections (%d), got %d", o.MaxConnections, o.MaxWaits))
	}
	if o.MaxEventBytes > 0 && o.MaxEventBytes < store.MaxEventRecordBytes {
		errs = append(errs, fmt.Errorf("--max-event-bytes must hold one event (%d bytes), got %d", store.MaxEventRecordBytes, o.MaxEventBytes))
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"read-header-timeout", o.ReadHeaderTimeout}, {"read-timeout", o.ReadTimeout}, {"idle-timeout", o.IdleTimeout}} {
		if f.v <= 0 {
			errs = append(errs, fmt.Errorf("--%s must be > 0, got %v", f.name, f.v))
		}
	}
	if o.ReadTimeout > 0 && o.ReadHeaderTimeout > o.ReadTimeout {
		errs = append(errs, fmt.Errorf("--read-header-timeout %v is longer than --read-timeout %v", o.ReadHeaderTimeout, o.ReadTimeout))
	}
	if o.AutoRegister && (o.DefaultInstanceType == "" || o.DefaultZone == "") {
		errs = append(errs, errors.New("--auto-register needs --default-instance-type and --default-zone"))
	}
	if c, err := o.consoleConfig(); err != nil {
		errs = append(errs, fmt.Errorf("--console-node: %w", err))
	} else if err := c.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--console-driver: %w", err))
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"attach-duration", o.AttachDuration}, {"detach-duration", o.DetachDuration}} {
		if limit := cloud.MaxTransitionMS * time.Millisecond; f.v < 0 || f.v > limit {
			errs = append(errs, fmt.Errorf("--%s must be in [0, %v], got %v", f.name, limit, f.v))
		}
	}
	return errors.Join(errs...)
}

// consoleConfig parses --console-node values into the console's configuration.
func (o *Options) consoleConfig() (console.Config, error) {
	var (
		c    console.Config
		errs []error
	)
	seen := map[string]bool{}
	for _, v := range o.ConsoleNodes {
		n, err := console.ParseNode(v)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if seen[n.Name] {
			errs = append(errs, fmt.Errorf("console node %s given twice", cloud.Quote(n.Name)))
		}
		seen[n.Name] = true
		c.Nodes = append(c.Nodes, n)
	}
	if len(c.Nodes) > console.MaxNodes {
		errs = append(errs, fmt.Errorf("%d console nodes, at most %d", len(c.Nodes), console.MaxNodes))
	}
	c.DriverName = o.ConsoleDriver
	return c, errors.Join(errs...)
}

// Config loads the seed and tokens files and returns the server configuration.
func (o *Options) Config() (server.Config, error) {
	cfg := server.Config{
		Listen:              o.Listen,
		DataDir:             o.DataDir,
		Seed:                server.DefaultSeed(),
		Auth:                server.AuthMode(o.Auth),
		AutoRegister:        o.AutoRegister,
		DefaultInstanceType: o.DefaultInstanceType,
		DefaultZone:         o.DefaultZone,
		MaxBodyBytes:        o.MaxBodyBytes,
		MaxConnections:      o.MaxConnections,
		MaxHeavyReads:       o.MaxHeavyReads,
		MaxWaits:            o.MaxWaits,
		MetricsOpen:         o.MetricsOpen,
		ReadHeaderTimeout:   o.ReadHeaderTimeout,
		ReadTimeout:         o.ReadTimeout,
		IdleTimeout:         o.IdleTimeout,
		MaxFaultRules:       o.MaxFaultRules,
		MaxInstances:        o.MaxInstances,
		MaxEvents:           o.MaxEvents,
		MaxEventBytes:       o.MaxEventBytes,
		AttachDuration:      o.AttachDuration,
		DetachDuration:      o.DetachDuration,
	}
	var errs []error
	cc, err := o.consoleConfig()
	errs = append(errs, err)
	cfg.Console = cc
	if o.ConsoleKubeconfig != "" {
		kube, err := kubeClient(o.ConsoleKubeconfig)
		errs = append(errs, err)
		cfg.Console.Kube = kube
	}
	if o.SeedFile != "" {
		seed, err := server.LoadSeed(o.SeedFile)
		errs = append(errs, err)
		cfg.Seed = seed
	}
	if cfg.Auth == server.AuthTokens {
		tokens, err := server.LoadTokens(o.TokensFile)
		errs = append(errs, err)
		cfg.Tokens = tokens
	}
	return cfg, errors.Join(errs...)
}

// kubeClient is the cluster view's client, from the kubeconfig at path: it reads the file
// (no connection yet). Its rate limit keeps the console's few lists per second polite.
func kubeClient(path string) (*console.KubeClient, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("--console-kubeconfig: %w", err)
	}
	rc.UserAgent = "fakecloud-console"
	rc.QPS, rc.Burst = 5, 10
	rc.Timeout = console.ClusterTimeout
	kube, err := console.NewKubeClient(rc)
	if err != nil {
		return nil, fmt.Errorf("--console-kubeconfig %s: %w", path, err)
	}
	return kube, nil
}
