package server

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/fakecloud/fakecloud-csi/internal/yamlcheck"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// Role is what a token may do. Roles are ordered: driver may do everything reader may, admin
// everything driver may.
type Role string

// The roles of docs/fakecloud-api.md, "Auth".
const (
	// RoleReader may call every GET route.
	RoleReader Role = "reader"
	// RoleDriver may also create, delete, attach, detach and resize volumes and manage
	// snapshots, and registers unknown instances with --auto-register.
	RoleDriver Role = "driver"
	// RoleAdmin may do everything: instances, quotas, faults, reset.
	RoleAdmin Role = "admin"
)

func (r Role) level() int {
	switch r {
	case RoleReader:
		return 1
	case RoleDriver:
		return 2
	case RoleAdmin:
		return 3
	default:
		return 0
	}
}

// allows reports whether r may call a route that needs role need.
func (r Role) allows(need Role) bool { return r.level() >= need.level() && r.level() > 0 }

// permit is nil when r may call a route that needs role need, else AccessDenied saying both.
func (r Role) permit(need Role) error {
	if !r.allows(need) {
		return cloud.NewError(cloud.CodeAccessDenied, "role %s may not do this (needs %s)", r, need)
	}
	return nil
}

// AuthMode selects how callers are authenticated.
type AuthMode string

// The --auth modes.
const (
	// AuthTokens requires "Authorization: Bearer TOKEN" with a token of Config.Tokens.
	AuthTokens AuthMode = "tokens"
	// AuthNone serves every route to everyone (laptop demo); callers count as drivers for
	// auto-registration.
	AuthNone AuthMode = "none"
)

// Token is one bearer token and its role, an entry of the tokens file.
type Token struct {
	Token string `json:"token"`
	Role  Role   `json:"role"`
}

// TokensFile is the YAML of --tokens-file: `tokens: [{token: T, role: admin|driver|reader}]`.
type TokensFile struct {
	Tokens []Token `json:"tokens"`
}

// LoadTokens reads and validates a tokens file (unknown fields, empty or duplicate tokens and
// unknown roles are errors).
func LoadTokens(path string) ([]Token, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read tokens: %w", err)
	}
	var f TokensFile
	doc, err := decodeFile(data, &f, nil)
	if err != nil {
		return nil, fmt.Errorf("parse tokens %s: %w", path, err)
	}
	if err := validateTokens(f.Tokens); err != nil {
		return nil, fmt.Errorf("tokens %s:\n%w", path, yamlcheck.AtLines(doc, err))
	}
	return f.Tokens, nil
}

func validateTokens(tokens []Token) error {
	var errs []error
	if len(tokens) == 0 {
		errs = append(errs, errors.New("no tokens"))
	}
	seen := map[string]bool{}
	for i, t := range tokens {
		if strings.TrimSpace(t.Token) == "" {
			errs = append(errs, fmt.Errorf("tokens[%d].token: empty (want the bearer token, a string)", i))
		}
		if seen[t.Token] {
			errs = append(errs, fmt.Errorf("tokens[%d].token: duplicate token", i))
		}
		seen[t.Token] = true
		if t.Role.level() == 0 {
			errs = append(errs, fmt.Errorf("tokens[%d].role: unknown role %s (want admin, driver or reader)", i, cloud.Quote(string(t.Role))))
		}
	}
	return errors.Join(errs...)
}

// caller is who made a request.
type caller struct {
	role Role
	// anonymous is true under AuthNone.
	anonymous bool
}

// mayRegister reports whether the caller's lookups of unknown instances create them
// (--auto-register applies to drivers, and to everyone without auth).
func (c caller) mayRegister() bool { return c.anonymous || c.role == RoleDriver }

// authenticate resolves the caller of r and checks that it may call a route needing need:
// Unauthenticated without a known token, AccessDenied with a role that is too weak. A
// request with more than one Authorization header is InvalidArgument on every route, public
// ones and --auth=none included: which one counts would be a guess (the first was used, so
// a reader's token ahead of an admin's was 403 and the other way round 200).
func (s *Server) authenticate(r *http.Request, need Role) (caller, error) {
	if n := len(r.Header.Values("Authorization")); n > 1 {
		return caller{}, cloud.NewError(cloud.CodeInvalidArgument, "%d Authorization headers; send one, \"Authorization: Bearer TOKEN\"", n)
	}
	if need == public {
		return caller{}, nil
	}
	if s.cfg.Auth == AuthNone {
		return caller{role: RoleAdmin, anonymous: true}, nil
	}
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if h == "" || !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return caller{}, cloud.NewError(cloud.CodeUnauthenticated, "missing bearer token")
	}
	role, ok := s.tokens[token]
	if !ok {
		return caller{}, cloud.NewError(cloud.CodeUnauthenticated, "unknown token")
	}
	if err := role.permit(need); err != nil {
		return caller{}, err
	}
	return caller{role: role}, nil
}
