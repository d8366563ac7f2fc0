// Package yamlline says where in a YAML file the field of an "unknown field" error is:
// sigs.k8s.io/yaml converts YAML to JSON before decoding strictly, so the decoder names the
// field but not its line.
package yamlline

import (
	"fmt"
	"regexp"
	"strings"
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
