package cloud

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestEveryCodeHasARow parses the package's sources for constants of type Code and fails
// for any that has no row in errorTable (and for rows whose code is not such a constant), so
// a new code cannot reach the wire without a status, retryability and class.
func TestEveryCodeHasARow(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	declared := map[Code]string{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				v := spec.(*ast.ValueSpec)
				if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "Code" {
					continue
				}
				for i, n := range v.Names {
					lit, ok := v.Values[i].(*ast.BasicLit)
					if !ok {
						t.Fatalf("%s: Code constant %s is not a string literal", name, n.Name)
					}
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					declared[Code(s)] = n.Name
				}
			}
		}
	}
	if len(declared) == 0 {
		t.Fatal("found no Code constants: the parser walk is broken")
	}
	for c, name := range declared {
		if !c.Known() {
			t.Errorf("%s (%q) has no row in errorTable", name, c)
		}
	}
	for _, c := range Codes() {
		if _, ok := declared[c]; !ok {
			t.Errorf("errorTable row %q is not a declared Code constant", c)
		}
	}
}

// TestErrorTable pins the rows as of this test: a changed status or retryability is a wire
// change. A code added later shows its row in docs/errors.md (TestErrorsDoc).
func TestErrorTable(t *testing.T) {
	want := map[Code]struct {
		status    int
		retryable bool
		class     Class
	}{
		CodeAttachmentLimitExceeded: {409, false, ClassAttachCapacity},
		CodeAttachmentQuotaExceeded: {409, false, ClassAttachCapacity},
		CodeVolumeQuotaExceeded:     {409, false, ClassStorageQuota},
		CodeCapacityQuotaExceeded:   {409, false, ClassStorageQuota},
		CodeAccessDenied:            {403, false, ClassPermission},
		CodeUnauthenticated:         {401, false, ClassAuth},
		CodeZoneMismatch:            {400, false, ClassTopology},
		CodeVolumeInUse:             {409, false, ClassConflict},
		CodePreconditionFailed:      {412, false, ClassConflict},
		CodeVolumeNotFound:          {404, false, ClassObjectNotFound},
		CodeSnapshotNotFound:        {404, false, ClassObjectNotFound},
		CodeGroupSnapshotNotFound:   {404, false, ClassObjectNotFound},
		CodeSnapshotInGroup:         {409, false, ClassConflict},
		CodeInstanceNotFound:        {404, false, ClassInstanceNotFound},
		CodeInstanceImpaired:        {409, true, ClassInstanceHealth},
		CodeInstanceStopped:         {409, true, ClassInstanceHealth},
		CodeNotFound:                {404, false, ClassNoRoute},
		CodeAlreadyExists:           {409, false, ClassAlreadyExists},
		CodeInvalidArgument:         {400, false, ClassInvalid},
		CodePayloadTooLarge:         {413, false, ClassInvalid},
		CodeFaultNotFound:           {404, false, ClassOther},
		CodeServerLimitExceeded:     {409, false, ClassOther},
		CodeMethodNotAllowed:        {405, false, ClassOther},
		CodeThrottled:               {429, true, ClassThrottled},
		CodeInternalError:           {500, true, ClassInternal},
		CodeUnavailable:             {503, true, ClassUnavailable},
		CodeIncorrectState:          {409, true, ClassTransition},
		"SomethingNew":              {500, false, ClassUnknownCode},
	}
	for c, w := range want {
		if got := c.HTTPStatus(); got != w.status {
			t.Errorf("%s: HTTPStatus = %d, want %d", c, got, w.status)
		}
		if got := c.Retryable(); got != w.retryable {
			t.Errorf("%s: Retryable = %v, want %v", c, got, w.retryable)
		}
		if got := c.Class(); got != w.class {
			t.Errorf("%s: Class = %q, want %q", c, got, w.class)
		}
		if !w.class.FromCloud() {
			t.Errorf("%s: class %q is not a cloud answer's class", c, w.class)
		}
		if e := NewError(c, "x"); e.HTTPStatus != w.status || e.Retryable != w.retryable {
			t.Errorf("NewError(%s) = status %d, retryable %v", c, e.HTTPStatus, e.Retryable)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestClassOf(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("attach vol-1 to i-1: %w", err) }
	for _, tc := range []struct {
		name string
		err  error
		want Class
	}{
		{"nil", nil, ClassNone},
		{"wrapped cloud error", wrap(NewError(CodeAttachmentLimitExceeded, "full")), ClassAttachCapacity},
		{"unknown code", wrap(&Error{Code: "Weird", HTTPStatus: http.StatusBadGateway}), ClassUnknownCode},
		{"empty code is not an answer", &Error{}, ClassLocal},
		{"deadline", wrap(context.DeadlineExceeded), ClassTimeout},
		{"canceled", wrap(context.Canceled), ClassCanceled},
		{"net timeout", wrap(timeoutErr{}), ClassTimeout},
		{"url error", &url.Error{Op: "Post", URL: "http://x", Err: errors.New("boom")}, ClassNetwork},
		{"url timeout", &url.Error{Op: "Post", URL: "http://x", Err: timeoutErr{}}, ClassTimeout},
		{"refused", wrap(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), ClassNetwork},
		{"reset", wrap(syscall.ECONNRESET), ClassNetwork},
		{"cut-off body", wrap(io.ErrUnexpectedEOF), ClassNetwork},
		{"plain", errors.New("bug"), ClassLocal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ClassOf(tc.err)
			if got != tc.want {
				t.Errorf("ClassOf(%v) = %q, want %q", tc.err, got, tc.want)
			}
			if got.FromCloud() != (CodeOf(tc.err) != "") {
				t.Errorf("ClassOf(%v).FromCloud() = %v, CodeOf = %q", tc.err, got.FromCloud(), CodeOf(tc.err))
			}
		})
	}
}

// TestEveryClassHasARow fails for a Class constant without a row in classTable (and for a
// row whose class is not such a constant), and for a row whose columns break the matrix's
// rules (docs/errors.md). The compiler already refuses a row short of a column: every row is
// an unkeyed struct literal.
func TestEveryClassHasARow(t *testing.T) {
	declared := map[Class]string{}
	for _, d := range classDecls(t) {
		declared[d.class] = d.name
		if _, ok := classTable[d.class]; !ok {
			t.Errorf("%s (%q) has no row in classTable", d.name, d.class)
		}
		if d.doc == "" {
			t.Errorf("%s has no doc comment (the matrix of docs/errors.md shows it)", d.name)
		}
	}
	for _, c := range Classes() {
		if _, ok := declared[c]; !ok {
			t.Errorf("classTable row %q is not a declared Class constant", c)
		}
	}
	for _, c := range Codes() {
		if _, ok := classTable[c.Class()]; !ok {
			t.Errorf("code %s: its class %q has no row in classTable", c, c.Class())
		}
	}
	for _, c := range Classes() {
		h := c.Handling()
		if (h.GRPC == "OK") != (c == ClassNone) {
			t.Errorf("%q: gRPC code %s: only a nil error is OK", c, h.GRPC)
		}
		if h.Metric == "" {
			t.Errorf("%q: no metric label", c)
		}
		if (h.Capacity == "") != (c == ClassNone) {
			t.Errorf("%q: capacity lookup class %q: only a nil error has none", c, h.Capacity)
		}
		// Only a real shortage is RESOURCE_EXHAUSTED (the kubelet fails pods for it), and
		// exactly those classes open the node-wide window and count as capacity.
		shortage := h.GRPC == "RESOURCE_EXHAUSTED"
		if shortage != (h.Backoff == "capacity") || shortage != (h.Metric == "capacity") {
			t.Errorf("%q: gRPC %s, backoff %q, metric %q: RESOURCE_EXHAUSTED, the capacity window and the capacity label go together", c, h.GRPC, h.Backoff, h.Metric)
		}
		if h.Capacity == "capacity" && c != ClassAttachCapacity {
			t.Errorf("%q: only attachCapacity lowers the reported capacity", c)
		}
		switch h.Backoff {
		case "", "capacity", "retryable":
		default:
			t.Errorf("%q: backoff %q is none of \"\", capacity, retryable", c, h.Backoff)
		}
	}
	if got := Class("SomethingElse").Handling(); got != classTable[ClassLocal] {
		t.Errorf("an undeclared class's row = %+v, want ClassLocal's", got)
	}
}
