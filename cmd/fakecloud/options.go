package main

import (
	"errors"
	"flag"
	"fmt"

	"github.com/fakecloud/fakecloud-csi/pkg/cloud/server"
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
	// Version prints the version and exits.
	Version bool
}

// AddFlags registers the options on fs with their defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:8080", "HTTP listen address host:port")
	fs.StringVar(&o.DataDir, "data-dir", "", "directory of the durable store; empty: a temporary store, nothing persists")
	fs.StringVar(&o.SeedFile, "seed", "", "seed YAML (instance types, instances, quotas, faults); empty: built-in defaults")
	fs.StringVar(&o.Auth, "auth", string(server.AuthTokens), "authentication: tokens or none (laptop demo)")
	fs.StringVar(&o.TokensFile, "tokens-file", "", "tokens YAML (tokens: [{token: T, role: admin|driver|reader}]), for --auth=tokens")
	fs.BoolVar(&o.AutoRegister, "auto-register", false, "create unknown instances that a driver asks about")
	fs.StringVar(&o.DefaultInstanceType, "default-instance-type", "medium", "instance type of auto-registered instances")
	fs.StringVar(&o.DefaultZone, "default-zone", "zone-a", "zone of auto-registered instances and of volumes created without a zone")
	fs.Int64Var(&o.MaxBodyBytes, "max-body-bytes", server.DefaultMaxBodyBytes, "request body limit in bytes (413 above)")
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
	if o.AutoRegister && (o.DefaultInstanceType == "" || o.DefaultZone == "") {
		errs = append(errs, errors.New("--auto-register needs --default-instance-type and --default-zone"))
	}
	return errors.Join(errs...)
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
	}
	var errs []error
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
