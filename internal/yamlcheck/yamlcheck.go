// Package yamlcheck finds every problem of a YAML document, parsed by go.yaml.in/yaml/v3, as
// a value of the Go type it is to be decoded into (with sigs.k8s.io/yaml, by the types' JSON
// names): unknown fields, with the field likely meant, and values of the wrong kind, each
// with its line and its path as written (instances[2].attachLimit), in file order. The node
// tree has the lines that a decoding through JSON loses, and keeps an alias as a pointer to
// its anchor, so a check costs the file's size however far its aliases would expand.
package yamlcheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/fakecloud/fakecloud-csi/internal/fieldnames"
)

// MaxQuotedBytes bounds how much of a value a problem quotes.
const MaxQuotedBytes = 64

// Problem is one value of a document that does not fit its field.
type Problem struct {
	// Line is 1-based: an unknown field's key, or the key (or list item) that sets the value.
	Line int
	// Path is the value's ("instances[2].attachLimit"), or for an unknown field the mapping's
	// it is in ("instances[2]"); "" for the document itself or a top-level field.
	Path string
	// Field is the unknown field as written; "" for a problem of a value.
	Field string
	// Meant is the field an unknown field was likely meant to be; "" when none is close.
	Meant string
	// Msg says what is wrong: `unknown field "idd" (did you mean "id"?)`,
	// `want a whole number, got "10Gi"`.
	Msg string
}

// Error is "line N, PATH: MSG", leaving out what is not known.
func (p *Problem) Error() string {
	var where []string
	if p.Line > 0 {
		where = append(where, fmt.Sprintf("line %d", p.Line))
	}
	if p.Path != "" {
		where = append(where, p.Path)
	}
	if len(where) == 0 {
		return p.Msg
	}
	return strings.Join(where, ", ") + ": " + p.Msg
}

// Check returns the problems of doc (a document node, or any node under one) as a value of
// into's type (into is what will be decoded into, e.g. a pointer to a struct), in file order,
// at most limit of them (limit > 0). Every null fits: it leaves a field as it is.
func Check(doc *yaml.Node, into any, limit int) []Problem {
	c := checker{seen: map[visit]bool{}, limit: limit}
	c.check(doc, reflect.TypeOf(into), "", 0)
	slices.SortStableFunc(c.problems, func(a, b Problem) int { return a.Line - b.Line })
	return c.problems
}

type visit struct {
	n *yaml.Node
	t reflect.Type
}

type checker struct {
	// seen are the anchored nodes checked as a type: each once per type however often it is
	// aliased.
	seen     map[visit]bool
	limit    int
	problems []Problem
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// check checks n as a value of type t at path, set on line (0: n's own).
func (c *checker) check(n *yaml.Node, t reflect.Type, path string, line int) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil || n.Kind == 0 || t == nil || len(c.problems) >= c.limit {
		return // Kind 0: an empty file's document, which decodes to nothing.
	}
	if n.Anchor != "" { // only an anchored node can be reached twice
		if c.seen[visit{n, t}] {
			return
		}
		c.seen[visit{n, t}] = true
	}
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) > 0 {
			c.check(n.Content[0], t, path, line)
		}
		return
	}
	if line == 0 {
		line = n.Line
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		// The type reads its own value (a duration, say): ask it, with the JSON the value
		// becomes; its error is in the file's terms.
		b, ok := jsonOf(n)
		if !ok {
			return // no JSON: the decoder says what is wrong
		}
		if err := reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(b); err != nil {
			c.add(Problem{Line: line, Path: path, Msg: err.Error()})
		}
		return
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return
	}
	if !fits(n, t) {
		name := path[strings.LastIndexByte(path, '.')+1:]
		c.add(Problem{Line: line, Path: path, Msg: "want " + want(t, name) + ", got " + describe(n)})
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		c.fields(n, t, path, map[string]int{})
	case reflect.Map:
		for i := 0; i+1 < len(n.Content); i += 2 {
			c.check(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value), n.Content[i].Line)
		}
	case reflect.Slice, reflect.Array:
		for i, item := range n.Content {
			c.check(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), item.Line)
		}
	}
}

// fields checks the entries of mapping n as the fields of struct t; set are the fields
// already set and their lines (a merge key's mapping sets the same struct's).
func (c *checker) fields(n *yaml.Node, t reflect.Type, path string, set map[string]int) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.ShortTag() == "!!merge" {
			for v != nil && v.Kind == yaml.AliasNode {
				v = v.Alias
			}
			if v != nil && v.Kind == yaml.MappingNode {
				// A merged key counts as set here: the strict decoder refuses a key of
				// the mapping's own that overrides it.
				c.fields(v, t, path, set)
			}
			continue
		}
		ft := fieldnames.Type(t, k.Value)
		switch {
		case ft == nil:
			p := Problem{Line: k.Line, Path: path, Field: k.Value, Msg: "unknown field " + quote(k.Value)}
			if p.Meant = fieldnames.Closest(k.Value, fieldnames.Of(t)); p.Meant != "" {
				p.Msg += " (did you mean " + strconv.Quote(p.Meant) + "?)"
			}
			c.add(p)
		case set[k.Value] > 0:
			c.add(Problem{Line: k.Line, Path: join(path, k.Value), Msg: fmt.Sprintf("set twice (first on line %d)", set[k.Value])})
		default:
			set[k.Value] = k.Line
			c.check(v, ft, join(path, k.Value), k.Line)
		}
	}
}

func (c *checker) add(p Problem) {
	if len(c.problems) < c.limit {
		c.problems = append(c.problems, p)
	}
}

// jsonOf is the JSON n becomes: a scalar that YAML reads as a number, true or false or null
// as that, any other scalar as its text (a timestamp as written), a list or mapping as
// decoded; ok is false when it has none.
func jsonOf(n *yaml.Node) (b []byte, ok bool) {
	var v any = n.Value
	switch n.ShortTag() {
	case "!!int", "!!float", "!!bool", "!!null":
		if n.Decode(&v) != nil {
			return nil, false
		}
	case "!!str", "!!timestamp", "!!binary":
	default:
		if n.Kind != yaml.ScalarNode && n.Decode(&v) != nil {
			return nil, false
		}
	}
	b, err := json.Marshal(v)
	return b, err == nil
}

// fits reports whether n is of the kind a value of t is decoded from, as sigs.k8s.io/yaml
// decodes it: any scalar for a string (a number or true/false becomes its text), and for a
// bool the words of YAML 1.1 (yes, on) too.
func fits(n *yaml.Node, t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return n.Kind == yaml.MappingNode
	case reflect.Slice, reflect.Array:
		return n.Kind == yaml.SequenceNode
	case reflect.Interface:
		return true
	}
	if n.Kind != yaml.ScalarNode {
		return false
	}
	tag := n.ShortTag()
	switch t.Kind() {
	case reflect.String:
		return true
	case reflect.Bool:
		return tag == "!!bool" || tag == "!!str" && n.Style == 0 && yaml11Bool[n.Value]
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if _, err := strconv.ParseInt(n.Value, 10, t.Bits()); tag == "!!int" && err == nil {
			return true
		}
		// Decode says whether another way of writing a whole number (0x10, 1_000) fits t.
		return tag == "!!int" && n.Decode(reflect.New(t).Interface()) == nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if _, err := strconv.ParseUint(n.Value, 10, t.Bits()); tag == "!!int" && err == nil {
			return true
		}
		return tag == "!!int" && n.Decode(reflect.New(t).Interface()) == nil
	case reflect.Float32, reflect.Float64:
		return tag == "!!int" || tag == "!!float"
	}
	return true
}

// yaml11Bool are the plain words YAML 1.1 (sigs.k8s.io/yaml's) reads as true or false and
// YAML 1.2 (go.yaml.in/yaml/v3's) as strings.
var yaml11Bool = map[string]bool{"y": true, "Y": true, "yes": true, "Yes": true, "YES": true, "on": true, "On": true, "ON": true,
	"n": true, "N": true, "no": true, "No": true, "NO": true, "off": true, "Off": true, "OFF": true}

// describe is what a value is, for "got ...": a scalar as written (a string quoted; at most
// MaxQuotedBytes of it), else "a list" or "a mapping".
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	if t := n.ShortTag(); t == "!!int" || t == "!!float" || t == "!!bool" {
		return bounded(n.Value)
	}
	return quote(n.Value)
}

func bounded(s string) string {
	if len(s) > MaxQuotedBytes {
		return s[:MaxQuotedBytes] + "..."
	}
	return s
}

// quote is s quoted, at most MaxQuotedBytes of it.
func quote(s string) string {
	if len(s) > MaxQuotedBytes {
		s = s[:MaxQuotedBytes] + "..."
	}
	return strconv.Quote(s)
}

// want says what a value of Go type t wants, in YAML terms; name, the field's JSON name,
// gives the unit of the whole numbers the project names by suffix (sizeBytes,
// attachDurationMs, ttlSeconds).
func want(t reflect.Type, name string) string {
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

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Syntax is err, go.yaml.in/yaml/v3's error for data that does not parse, saying first what
// the parser's words leave unclear: that YAML allows no tab in the indentation, on the first
// line of data indented with one, then the parser's words without its line, which is often
// the line before (`line 3: YAML does not allow tabs for indentation, indent with spaces
// (found a tab character that violates indentation)`). It wraps err; nil for nil.
func Syntax(data []byte, err error) error {
	if err == nil || !tabSyntax.MatchString(err.Error()) {
		return err
	}
	for i, l := range strings.Split(string(data), "\n") {
		indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if strings.Contains(indent, "\t") && len(indent) < len(l) {
			m := tabSyntax.FindStringSubmatch(err.Error())
			return &lined{msg: fmt.Sprintf("line %d: YAML does not allow tabs for indentation, indent with spaces (%s)", i+1, m[1]), err: err}
		}
	}
	return err
}

// tabSyntax matches the syntax errors a tab in the indentation gives: the parser's own words
// for it, or, where a tab starts what it reads as a value, a token it cannot start.
var tabSyntax = regexp.MustCompile(`^yaml: line \d+: ((?:found a tab character|found character that cannot start any token).*)`)

type lined struct {
	msg string
	err error
}

func (e *lined) Error() string { return e.msg }
func (e *lined) Unwrap() error { return e.err }

// Node is the node of doc at path ("instances[2]", "tokens[0].role", as Problem and the
// checks of the project's files write paths) and the line of the key or list item that sets
// it; nil and 0 when doc has no such value.
func Node(doc *yaml.Node, path string) (*yaml.Node, int) {
	n, line := doc, 0
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for rest := path; rest != "" && n != nil; {
		for n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		if strings.HasPrefix(rest, "[") {
			end := strings.IndexByte(rest, ']')
			i, err := strconv.Atoi(rest[1:max(end, 1)])
			if end < 0 || err != nil || n.Kind != yaml.SequenceNode || i < 0 || i >= len(n.Content) {
				return nil, 0
			}
			n, line, rest = n.Content[i], n.Content[i].Line, rest[end+1:]
			continue
		}
		rest = strings.TrimPrefix(rest, ".")
		end := strings.IndexAny(rest, ".[")
		if end < 0 {
			end = len(rest)
		}
		key, found := rest[:end], false
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == key {
					n, line, found = n.Content[i+1], n.Content[i].Line, true
					break
				}
			}
		}
		if !found {
			return nil, 0
		}
		rest = rest[end:]
	}
	if n == nil || line == 0 && path != "" {
		return nil, 0
	}
	return n, line
}

// Drop removes what sets path from doc: the key and its value in a mapping; in a list, the
// item's value becomes null (on the item's line), so that the paths of the items after it
// still hold. It reports whether doc had path. For a decoder that goes on past the problems
// Check found, with what is left.
func Drop(doc *yaml.Node, path string) bool {
	i := strings.LastIndexAny(path, ".[")
	parentPath := ""
	if i > 0 {
		parentPath = path[:i]
	}
	parent, _ := Node(doc, parentPath)
	for parent != nil && parent.Kind == yaml.AliasNode {
		parent = parent.Alias
	}
	if parent == nil || path == "" {
		return false
	}
	if i >= 0 && path[i] == '[' {
		j, err := strconv.Atoi(strings.TrimSuffix(path[i+1:], "]"))
		if err != nil || parent.Kind != yaml.SequenceNode || j < 0 || j >= len(parent.Content) {
			return false
		}
		old := parent.Content[j]
		parent.Content[j] = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null", Line: old.Line, Column: old.Column}
		return true
	}
	key := path[i+1:]
	if parent.Kind != yaml.MappingNode {
		return false
	}
	for k := 0; k+1 < len(parent.Content); k += 2 {
		if parent.Content[k].Value == key {
			parent.Content = slices.Delete(parent.Content, k, k+2)
			return true
		}
	}
	return false
}

// checkPath finds the path a check's message begins with, "instances[2]: ..." or
// "tokens[0].role: ...", perhaps with a note in parentheses: "steps[3] (at 1m0s): ...".
var checkPath = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9]*(?:\[[0-9]+\])?(?:\.[A-Za-z][A-Za-z0-9]*(?:\[[0-9]+\])?)*)(?: \([^)]*\))?: `)

// AtLines puts the line of doc that sets the value each problem of err (one a line, as
// errors.Join writes them) begins with before it: "instances[2]: unknown instance type"
// becomes "line 14, instances[2]: unknown instance type". The result wraps err; nil for nil.
func AtLines(doc *yaml.Node, err error) error {
	if err == nil {
		return nil
	}
	lines := strings.Split(err.Error(), "\n")
	changed := false
	for i, l := range lines {
		if m := checkPath.FindStringSubmatch(l); m != nil {
			if _, n := Node(doc, m[1]); n > 0 {
				lines[i] = fmt.Sprintf("line %d, %s", n, l)
				changed = true
			}
		}
	}
	if !changed {
		return err
	}
	return &lined{msg: strings.Join(lines, "\n"), err: err}
}

// Problems joins ps as one error, one a line (errors.Join); nil for none.
func Problems(ps []Problem) error {
	errs := make([]error, len(ps))
	for i := range ps {
		errs[i] = &ps[i]
	}
	return errors.Join(errs...)
}

// Decode decodes data strictly into into (a pointer) with sigs.k8s.io/yaml, by the JSON names
// of into's type, as Check checked it: data is the file Check's doc was parsed from, or that
// doc rendered again by go.yaml.in/yaml/v3 once values were dropped from it (Drop). The
// decoder's error, for what Check does not look at, is without its words about JSON; nil when
// it decodes.
func Decode(data []byte, into any) error {
	if err := sigsyaml.UnmarshalStrict(data, into); err != nil {
		msg := err.Error()
		for again := true; again; {
			again = false
			for _, p := range []string{"error converting YAML to JSON: ", "error unmarshaling JSON: ", "while decoding JSON: ", "json: "} {
				if rest, ok := strings.CutPrefix(msg, p); ok {
					msg, again = rest, true
				}
			}
		}
		return &lined{msg: msg, err: err}
	}
	return nil
}
