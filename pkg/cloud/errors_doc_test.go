package cloud

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update", false, "rewrite the generated matrix of docs/errors.md from errorTable and classTable")

const (
	errorsDoc   = "../../docs/errors.md"
	matrixBegin = "<!-- BEGIN generated from errorTable and classTable (pkg/cloud) by TestErrorsDoc; run make docs-errors -->\n"
	matrixEnd   = "<!-- END generated -->\n"
)

// TestErrorsDoc fails when the matrix of docs/errors.md is not the one generated from the
// tables; with -update (make docs-errors) it rewrites it.
func TestErrorsDoc(t *testing.T) {
	doc, err := os.ReadFile(errorsDoc)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := bytes.Index(doc, []byte(matrixBegin)), bytes.Index(doc, []byte(matrixEnd))
	if begin < 0 || end < begin {
		t.Fatalf("%s: no %q ... %q markers in order", errorsDoc, strings.TrimSpace(matrixBegin), strings.TrimSpace(matrixEnd))
	}
	want := errorMatrix(t, classDecls(t))
	got := string(doc[begin+len(matrixBegin) : end])
	if got == want {
		return
	}
	if *updateDocs {
		out := slices.Concat(doc[:begin+len(matrixBegin)], []byte(want), doc[end:])
		if err := os.WriteFile(errorsDoc, out, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the matrix of %s", errorsDoc)
		return
	}
	t.Errorf("docs/errors.md's matrix is stale (run: make docs-errors); want:\n%s", want)
}

// classDecl is a Class constant of the package's sources, in declaration order.
type classDecl struct {
	name  string // Go name, e.g. ClassAttachCapacity
	class Class
	doc   string // its doc comment, on one line
}

// classDecls parses the package's sources for the constants of type Class (typed, or in the
// const block of one that is).
func classDecls(t *testing.T) []classDecl {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var out []classDecl
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
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
				if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "Class" {
					continue
				}
				for i, n := range v.Names {
					if i >= len(v.Values) {
						t.Fatalf("%s: Class constant %s has no value of its own", name, n.Name)
					}
					lit, ok := v.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("%s: Class constant %s is not a string literal", name, n.Name)
					}
					out = append(out, classDecl{name: n.Name, class: Class(strings.Trim(lit.Value, `"`)),
						doc: strings.Join(strings.Fields(v.Doc.Text()), " ")})
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("found no Class constants: the parser walk is broken")
	}
	return out
}

// errorMatrix renders the matrix of docs/errors.md: a row per class, in declaration order.
func errorMatrix(t *testing.T, decls []classDecl) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("| class | what it is | cloud codes (HTTP status) | retryable | gRPC code | metrics label | capacity lookup | publish backoff |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, d := range decls {
		h, ok := classTable[d.class]
		if !ok {
			t.Fatalf("%s has no row in classTable", d.name)
		}
		class := fmt.Sprintf("`%s`", d.class)
		if d.class == ClassNone {
			class = "none (`\"\"`)"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", class, whatCell(d), codesCell(d), retryableCell(d.class),
			grpcCell(h), label(h.Metric), capacityCell(h), backoffCell(h.Backoff))
	}
	return b.String()
}

// codesOf returns the codes of class c, sorted.
func codesOf(c Class) []Code {
	var out []Code
	for _, code := range Codes() {
		if code.Class() == c {
			out = append(out, code)
		}
	}
	return out
}

// whatCell is the class's doc comment without the leading "ClassX: " or "ClassX is ".
func whatCell(d classDecl) string {
	s := strings.TrimPrefix(strings.TrimPrefix(d.doc, d.name+": "), d.name+" is ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// codesCell lists the codes of the class with their HTTP status; "—" when none has it.
func codesCell(d classDecl) string {
	cs := codesOf(d.class)
	if len(cs) == 0 {
		return "—"
	}
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%s (%d)", c, c.HTTPStatus())
	}
	return strings.Join(parts, ", ")
}

func retryableCell(c Class) string {
	yes, no := 0, 0
	for _, code := range codesOf(c) {
		if code.Retryable() {
			yes++
		} else {
			no++
		}
	}
	switch {
	case yes == 0 && no == 0:
		return "—"
	case no == 0:
		return "yes"
	case yes == 0:
		return "no"
	default:
		return "by code"
	}
}

func grpcCell(h Handling) string {
	s := h.GRPC
	if h.GRPCGone != h.GRPC {
		s += "; " + h.GRPCGone + " for delete and unpublish"
	}
	if h.GRPCPage != h.GRPC {
		s += "; " + h.GRPCPage + " for a paged list (the page token)"
	}
	return s
}

func label(s string) string {
	if s == "" {
		return "—"
	}
	return "`" + s + "`"
}

func capacityCell(h Handling) string {
	if h.Capacity5xx != "" {
		return fmt.Sprintf("%s if the status is 5xx, else %s", label(h.Capacity5xx), label(h.Capacity))
	}
	return label(h.Capacity)
}

func backoffCell(b string) string {
	switch b {
	case "capacity":
		return "node (`capacity`)"
	case "retryable":
		return "node and volume (`retryable`)"
	}
	return label(b)
}
