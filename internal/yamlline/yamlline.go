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
	"slices"
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

// Explain returns err, the error of a strict decode of data into into (a pointer, as given to
// sigs.k8s.io/yaml, which converts YAML to JSON, then decodes with encoding/json), in the
// file's terms, as an *Error:
//
//   - a value of the wrong type names the field's path and line and what it wants instead of
//     Go's struct and type names: `line 14, instances[2].attachLimit: want a whole number,
//     got "10Gi"` for `json: cannot unmarshal string into Go struct field
//     SeedInstance.instances.attachLimit of type int`;
//   - an unknown field names where it is, and the field of into's type there it may have
//     meant (Suggest): `line 4, instances[0]: unknown field "idd" (did you mean "id"?)`;
//   - a syntax error from a tab in the indentation says so, before the parser's message:
//     `line 3: YAML does not allow tabs for indentation, indent with spaces (yaml: line 3:
//     found a tab character that violates indentation)`.
//
// Anything else is Clean(err) (a syntax error's message has its line). nil for nil.
func Explain(data []byte, err error, into any) error {
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return explainType(data, te, err)
	}
	if field, line, path, ok := unknownAt(data, err); ok {
		msg := Message(err)
		if s := suggest(field, path, line, into); s != "" {
			msg += " (did you mean " + strconv.Quote(s) + "?)"
		}
		return &Error{Line: line, Path: path, Msg: msg, Err: err}
	}
	if line := tabLine(data, err); line > 0 {
		return &Error{Line: line, Msg: "YAML does not allow tabs for indentation, indent with spaces (" + Message(err) + ")", Err: err}
	}
	return Clean(err)
}

// unknownAt finds the field an "unknown field" err names in data: its name, line and the path
// of the mapping it is in ("instances[1]"; "" for the top level, or when not found). ok is
// false when err names no unknown field.
func unknownAt(data []byte, err error) (field string, line int, path string, ok bool) {
	m := unknownField.FindStringSubmatch(err.Error())
	if m == nil {
		return "", 0, "", false
	}
	field, line = m[1], Line(data, err)
	if root := parse(data); root != nil && line > 0 {
		walk(root, "", func(p string, n *yamlv3.Node) bool {
			if n.Kind != yamlv3.MappingNode {
				return false
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				if k := n.Content[i]; k.Value == field && k.Line == line {
					path = p
					return true
				}
			}
			return false
		})
	}
	return field, line, path, true
}

// Suggest is the field of into's type that an unknown field err names in data was likely
// meant to be, "" when none is close: into is what data was decoded into (a pointer to a
// struct), and the candidates are the JSON names of the struct at the unknown field's path
// (embedded structs' fields included). For a caller that words the error itself; Explain
// adds it. Close is the same but for case, or at most maxSuggestEdits edits apart (one for a
// name of up to 4 bytes), ignoring case; a field of more than MaxQuotedBytes gets none.
func Suggest(data []byte, err error, into any) string {
	if err == nil {
		return ""
	}
	field, line, path, ok := unknownAt(data, err)
	if !ok {
		return ""
	}
	return suggest(field, path, line, into)
}

// maxSuggestEdits is how many single-byte edits a suggested field may be from the one written.
const maxSuggestEdits = 2

func suggest(field, path string, line int, into any) string {
	if line == 0 {
		return "" // the object the field is in is not known
	}
	return SuggestField(into, path, field)
}

// SuggestField is the JSON name of a field of into's type (a struct or a pointer to one) at
// path ("steps[2].fault", "" for into itself; list indexes as written) that field, a name
// it does not have, was likely meant to be; "" when none is close (as Suggest says). For a
// decoder that names the unknown field and its path itself, the fake cloud's JSON API.
func SuggestField(into any, path, field string) string {
	if into == nil || len(field) > MaxQuotedBytes {
		return "" // the field is no typo
	}
	t := typeAt(reflect.TypeOf(into), path)
	if t == nil {
		return ""
	}
	limit := maxSuggestEdits
	if len(field) <= 4 {
		limit = 1
	}
	best, bestDist := "", limit+1
	for _, name := range jsonNames(t) {
		if name == field {
			continue
		}
		if strings.EqualFold(name, field) {
			return name
		}
		if d := editDistance(strings.ToLower(field), strings.ToLower(name)); d < bestDist {
			best, bestDist = name, d
		}
	}
	return best
}

// typeAt is the struct type at path ("steps[2].fault") from t, following JSON field names
// through structs (and the structs embedded in them), and a "[N]" through a list or map;
// nil when path leads elsewhere.
func typeAt(t reflect.Type, path string) reflect.Type {
	t = deref(t)
	if path != "" {
		for _, seg := range strings.Split(path, ".") {
			name, _, _ := strings.Cut(seg, "[")
			if name != "" { // "[0]" alone: an index into t itself, a top-level list
				if t = fieldType(t, name); t == nil {
					return nil
				}
			}
			for range strings.Count(seg, "[") {
				if k := t.Kind(); k != reflect.Slice && k != reflect.Array && k != reflect.Map {
					return nil
				}
				t = deref(t.Elem())
			}
		}
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	return t
}

func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// fieldType is the type of t's field with JSON name name, looking into embedded structs as
// encoding/json does; a map's values for a map; nil when there is none.
func fieldType(t reflect.Type, name string) reflect.Type {
	switch t.Kind() {
	case reflect.Map:
		return deref(t.Elem())
	case reflect.Struct:
	default:
		return nil
	}
	var found reflect.Type
	eachField(t, func(n string, ft reflect.Type) bool {
		if n == name {
			found = deref(ft)
			return true
		}
		return false
	})
	return found
}

// jsonNames are the JSON names of struct t's fields, embedded structs' included, in order.
func jsonNames(t reflect.Type) []string {
	var names []string
	eachField(t, func(n string, _ reflect.Type) bool {
		names = append(names, n)
		return false
	})
	return names
}

// eachField calls f with the JSON name and type of each field of struct t that encoding/json
// decodes, in order, descending into embedded structs without a name of their own, until f
// returns true.
func eachField(t reflect.Type, f func(name string, ft reflect.Type) bool) bool {
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" {
			if et := deref(sf.Type); et.Kind() == reflect.Struct {
				if eachField(et, f) {
					return true
				}
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if f(name, sf.Type) {
			return true
		}
	}
	return false
}

// editDistance is the Levenshtein distance of a and b in bytes (callers bound their length).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// tabSyntax finds the syntax errors go-yaml gives for a tab in the indentation: its own
// words for it, or, where a tab starts what it reads as a value, a token it cannot start.
var tabSyntax = regexp.MustCompile(`^yaml: line \d+: (found a tab character|found character that cannot start any token)`)

// tabLine is the line of the first line of data indented with a tab, when err is the syntax
// error such a line gives (tabSyntax); 0 otherwise.
func tabLine(data []byte, err error) int {
	if !tabSyntax.MatchString(Message(err)) {
		return 0
	}
	for i, l := range strings.Split(string(data), "\n") {
		indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if strings.Contains(indent, "\t") && len(indent) < len(l) {
			return i + 1
		}
	}
	return 0
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

// KeyLine is the line of data where path ("steps[2].quotas.attachments", as PathLine takes)
// is set: its key's line in a mapping, the item's own line in a list; 0 when data has no
// such path. Unlike PathLine it names the key's line when the value starts on a later one.
func KeyLine(data []byte, path string) int {
	root := parse(data)
	if root == nil {
		return 0
	}
	return KeyLineOf(root, path)
}

// KeyLineOf is KeyLine of a document parsed already with go.yaml.in/yaml/v3, for a caller
// that asks about many paths of a large file.
func KeyLineOf(root *yamlv3.Node, path string) int {
	line := 0
	entryAt(root, path, func(parent *yamlv3.Node, i int) {
		line = parent.Content[i].Line
	})
	return line
}

// Drop removes what sets path from doc, a YAML document parsed with go.yaml.in/yaml/v3: the
// key and its value in a mapping; in a list, the item's value becomes null (on the item's
// line), so that the paths of the items after it still hold. It reports whether doc had path. For a decoder that goes
// on past a problem to find the next one: paths found in doc before a Drop are still valid
// after it (outside the dropped value), and lines are taken from the file as read.
func Drop(doc *yamlv3.Node, path string) bool {
	found := false
	entryAt(doc, path, func(parent *yamlv3.Node, i int) {
		found = true
		if parent.Kind == yamlv3.MappingNode {
			parent.Content = slices.Delete(parent.Content, i, i+2)
			return
		}
		old := parent.Content[i]
		parent.Content[i] = &yamlv3.Node{Kind: yamlv3.ScalarNode, Tag: "!!null", Value: "null", Line: old.Line, Column: old.Column}
	})
	return found
}

// entryAt calls f with the mapping or list under root that sets path and the index of path's
// key (a mapping) or item (a list) in its Content, once, when there is one.
func entryAt(root *yamlv3.Node, path string, f func(parent *yamlv3.Node, i int)) {
	walk(root, "", func(p string, n *yamlv3.Node) bool {
		switch n.Kind {
		case yamlv3.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if join(p, n.Content[i].Value) == path {
					f(n, i)
					return true
				}
			}
		case yamlv3.SequenceNode:
			for i := range n.Content {
				if fmt.Sprintf("%s[%d]", p, i) == path {
					f(n, i)
					return true
				}
			}
		}
		return false
	})
}
