// Package yamlline puts the errors of decoding and checking a YAML file in the file's terms:
// sigs.k8s.io/yaml converts YAML to JSON before decoding strictly, so the decoder names Go
// struct and type names and JSON paths without list indexes, never a line. This package
// finds the field's line and path as written (instances[2].attachLimit) and says what the
// field wants.
package yamlline

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
)

// unknownField finds the field of encoding/json's "unknown field" error.
var unknownField = regexp.MustCompile(`unknown field "([^"]+)"`)

// Of returns " (line N)" for the first line of data that sets the unknown field err names
// (a block key, "- key:", or a key inside a flow mapping), or "" when err names none or the
// field is not found.
func Of(data []byte, err error) string {
	if n := Line(data, err); n > 0 {
		return fmt.Sprintf(" (line %d)", n)
	}
	return ""
}

// Line is the 1-based line of data that sets the unknown field err names (as Of), 0 when
// err names none or the field is not found.
func Line(data []byte, err error) int {
	if err == nil {
		return 0
	}
	m := unknownField.FindStringSubmatch(err.Error())
	if m == nil {
		return 0
	}
	q := regexp.QuoteMeta(m[1])
	key := regexp.MustCompile(`^[\s-]*["']?` + q + `["']?\s*:|[{,]\s*["']?` + q + `["']?\s*:`)
	for i, line := range strings.Split(string(data), "\n") {
		if key.MatchString(line) {
			return i + 1
		}
	}
	return 0
}

// jsonPrefixes are what sigs.k8s.io/yaml and encoding/json put before a decoding error: they
// speak of JSON, which the user never wrote.
var jsonPrefixes = []string{"error converting YAML to JSON: ", "error unmarshaling JSON: ", "while decoding JSON: ", "json: "}

// Message is err's text without the JSON-decoding prefixes, e.g. `unknown field "bogus"`
// for `error unmarshaling JSON: while decoding JSON: json: unknown field "bogus"`.
func Message(err error) string {
	msg := err.Error()
	for again := true; again; {
		again = false
		for _, p := range jsonPrefixes {
			if rest, ok := strings.CutPrefix(msg, p); ok {
				msg, again = rest, true
			}
		}
	}
	return msg
}

// Clean is err with Message's text, still wrapping err (errors.Is and As see through it);
// nil for nil.
func Clean(err error) error {
	if err == nil {
		return nil
	}
	return &cleanError{msg: Message(err), err: err}
}

type cleanError struct {
	msg string
	err error
}

func (e *cleanError) Error() string { return e.msg }
func (e *cleanError) Unwrap() error { return e.err }

// MaxQuotedBytes bounds how much of a value an explained error quotes.
const MaxQuotedBytes = 64

// Error is a decoding or checking error in a YAML file's terms: the field's path as written
// (instances[2].attachLimit), its line, and what is wrong. It wraps the error it explains.
type Error struct {
	// Line is 1-based; 0 when not known.
	Line int
	// Path is the field, e.g. "instances[2].attachLimit"; "" for the whole file.
	Path string
	// Msg says what is wrong, e.g. `want a whole number, got "10Gi"`.
	Msg string
	// Err is the error explained; nil when none.
	Err error
}

// Error is "line N, PATH: MSG", leaving out what is not known.
func (e *Error) Error() string {
	var where []string
	if e.Line > 0 {
		where = append(where, fmt.Sprintf("line %d", e.Line))
	}
	if e.Path != "" {
		where = append(where, e.Path)
	}
	if len(where) == 0 {
		return e.Msg
	}
	return strings.Join(where, ", ") + ": " + e.Msg
}

// Unwrap returns the error explained.
func (e *Error) Unwrap() error { return e.Err }

// Explain returns err, the error of a strict decode of data with sigs.k8s.io/yaml (YAML
// converted to JSON, then encoding/json), in the file's terms, as an *Error:
//
//   - a value of the wrong type names the field's path and line and what it wants instead of
//     Go's struct and type names: `line 14, instances[2].attachLimit: want a whole number,
//     got "10Gi"` for `json: cannot unmarshal string into Go struct field
//     SeedInstance.instances.attachLimit of type int`;
//   - an unknown field names where it is: `line 4, instances[0]: unknown field "idd"`.
//
// Anything else is Clean(err). nil for nil.
func Explain(data []byte, err error) error {
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return explainType(data, te, err)
	}
	if m := unknownField.FindStringSubmatch(err.Error()); m != nil {
		e := &Error{Line: Line(data, err), Msg: Message(err), Err: err}
		if root := parse(data); root != nil && e.Line > 0 {
			walk(root, "", func(path string, n *yamlv3.Node) bool {
				if n.Kind != yamlv3.MappingNode {
					return false
				}
				for i := 0; i+1 < len(n.Content); i += 2 {
					if k := n.Content[i]; k.Value == m[1] && k.Line == e.Line {
						e.Path = path
						return true
					}
				}
				return false
			})
		}
		return e
	}
	return Clean(err)
}

// explainType locates the value te is about: the first node along te.Field's path (a JSON
// path without list indexes) whose kind is te.Value's, the JSON kind the decoder got.
func explainType(data []byte, te *json.UnmarshalTypeError, err error) error {
	e := &Error{Err: err}
	got := te.Value
	if root := parse(data); root != nil {
		var segs []string
		if te.Field != "" {
			segs = strings.Split(te.Field, ".")
		}
		kind, _, _ := strings.Cut(te.Value, " ") // "number 4.5": the kind, then the value
		if p, n := find(root, "", segs, kind); n != nil {
			e.Path, e.Line = p, n.Line
			got = describeNode(n)
		}
	}
	var fields []string // te.Field without embedded structs' Go names
	for _, f := range strings.Split(te.Field, ".") {
		if f != "" && !goName(f) {
			fields = append(fields, f)
		}
	}
	if e.Path == "" {
		e.Path = strings.Join(fields, ".")
	}
	name := ""
	if len(fields) > 0 {
		name = fields[len(fields)-1]
	}
	e.Msg = "want " + want(te.Type, name) + ", got " + got
	return e
}

// find follows segs (JSON field names) from n, through every item of a list, and returns the
// path and node of the first value there whose JSON kind is kind ("string", "number",
// "bool", "array", "object").
func find(n *yamlv3.Node, path string, segs []string, kind string) (string, *yamlv3.Node) {
	for n.Kind == yamlv3.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch n.Kind {
	case yamlv3.DocumentNode:
		if len(n.Content) == 1 {
			return find(n.Content[0], path, segs, kind)
		}
	case yamlv3.SequenceNode:
		if len(segs) == 0 && kind == "array" {
			return path, n
		}
		for i, item := range n.Content {
			if p, f := find(item, fmt.Sprintf("%s[%d]", path, i), segs, kind); f != nil {
				return p, f
			}
		}
	case yamlv3.MappingNode:
		if len(segs) == 0 {
			if kind == "object" {
				return path, n
			}
			return "", nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == segs[0] {
				return find(n.Content[i+1], join(path, segs[0]), segs[1:], kind)
			}
		}
		// No such key: an embedded struct's Go name, which encoding/json puts in the path
		// (every JSON name on it is a key the file has); its fields are the mapping's own.
		return find(n, path, segs[1:], kind)
	case yamlv3.ScalarNode:
		if len(segs) == 0 && jsonKind(n) == kind {
			return path, n
		}
	}
	return "", nil
}

// goName reports whether a segment of encoding/json's field path is an embedded struct's Go
// type name rather than a JSON field name: the project's JSON names are lowerCamelCase.
func goName(seg string) bool {
	return seg != "" && seg[0] >= 'A' && seg[0] <= 'Z'
}

// jsonKind is the JSON kind a scalar becomes when sigs.k8s.io/yaml converts it.
func jsonKind(n *yamlv3.Node) string {
	switch n.ShortTag() {
	case "!!int", "!!float":
		return "number"
	case "!!bool":
		return "bool"
	case "!!null":
		return "null"
	default:
		return "string"
	}
}

// describeNode is what a value is, for "got ...": a scalar quoted as written (at most
// MaxQuotedBytes of it), else "a list" or "a mapping".
func describeNode(n *yamlv3.Node) string {
	switch n.Kind {
	case yamlv3.SequenceNode:
		return "a list"
	case yamlv3.MappingNode:
		return "a mapping"
	}
	v := n.Value
	if len(v) > MaxQuotedBytes {
		v = v[:MaxQuotedBytes] + "..."
	}
	if jsonKind(n) == "string" {
		return strconv.Quote(v)
	}
	return v
}

// want says what a field of Go type t wants, in YAML terms; name, the field's JSON name,
// gives the unit of the whole numbers the project names by suffix (sizeBytes,
// attachDurationMs, ttlSeconds).
func want(t reflect.Type, name string) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "another value"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		w := "a whole number"
		switch {
		case strings.HasSuffix(name, "Bytes"):
			w += " of bytes like 10737418240 (10 GiB; no units such as 10Gi)"
		case strings.HasSuffix(name, "Ms"), strings.HasSuffix(name, "MS"):
			w += " of milliseconds like 2000"
		case strings.HasSuffix(name, "Seconds"):
			w += " of seconds like 60"
		}
		if k := t.Kind(); k >= reflect.Uint && k <= reflect.Uint64 {
			w += ", 0 or more"
		}
		return w
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string (quote a value that YAML would read as a number or true/false)"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping of fields"
	default:
		return "another value"
	}
}

// parse is data's YAML node tree, nil when it is no YAML.
func parse(data []byte) *yamlv3.Node {
	var doc yamlv3.Node
	if yamlv3.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return nil
	}
	return &doc
}

// walk calls f on n and every node under it, depth first in file order, with its path, until
// f returns true.
func walk(n *yamlv3.Node, path string, f func(path string, n *yamlv3.Node) bool) bool {
	if n.Kind == yamlv3.DocumentNode {
		for _, c := range n.Content {
			if walk(c, path, f) {
				return true
			}
		}
		return false
	}
	if f(path, n) {
		return true
	}
	switch n.Kind {
	case yamlv3.SequenceNode:
		for i, c := range n.Content {
			if walk(c, fmt.Sprintf("%s[%d]", path, i), f) {
				return true
			}
		}
	case yamlv3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if walk(n.Content[i+1], join(path, n.Content[i].Value), f) {
				return true
			}
		}
	}
	return false
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// PathLine is the line of the value at path in data, a path as Explain and the checks of
// the project's files write it ("instances[2]", "tokens[0].role"); 0 when data has no
// such value.
func PathLine(data []byte, path string) int {
	root := parse(data)
	if root == nil {
		return 0
	}
	line := 0
	walk(root, "", func(p string, n *yamlv3.Node) bool {
		if p == path {
			line = n.Line
			return true
		}
		return false
	})
	return line
}

// checkPath finds the path a check's message begins with, "instances[2]: ..." or
// "tokens[0].role: ...".
// A note in parentheses may follow the path: "steps[3] (at 1m0s): ...".
var checkPath = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9]*(?:\[[0-9]+\])?(?:\.[A-Za-z][A-Za-z0-9]*(?:\[[0-9]+\])?)*)(?: \([^)]*\))?: `)

// AtLines puts the line of data where each problem of err (one a line, as errors.Join
// writes them) is before it when the problem begins with a path: "instances[2]: unknown
// instance type" becomes "line 14, instances[2]: unknown instance type". The result wraps
// err; nil for nil.
func AtLines(data []byte, err error) error {
	if err == nil {
		return nil
	}
	lines := strings.Split(err.Error(), "\n")
	changed := false
	for i, l := range lines {
		m := checkPath.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if n := PathLine(data, m[1]); n > 0 {
			lines[i] = fmt.Sprintf("line %d, %s", n, l)
			changed = true
		}
	}
	if !changed {
		return err
	}
	return &cleanError{msg: strings.Join(lines, "\n"), err: err}
}

// Locate returns the path and line of the first scalar value of data, in file order, for
// which match(path, value) is true; "" and 0 when there is none. For errors that the
// decoder gives without a field (a custom type's own parsing: a duration, say).
func Locate(data []byte, match func(path, value string) bool) (string, int) {
	root := parse(data)
	if root == nil {
		return "", 0
	}
	var (
		path string
		line int
	)
	walk(root, "", func(p string, n *yamlv3.Node) bool {
		if n.Kind == yamlv3.ScalarNode && match(p, n.Value) {
			path, line = p, n.Line
			return true
		}
		return false
	})
	return path, line
}
