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
	if err == nil {
		return ""
	}
	m := unknownField.FindStringSubmatch(err.Error())
	if m == nil {
		return ""
	}
	q := regexp.QuoteMeta(m[1])
	key := regexp.MustCompile(`^[\s-]*["']?` + q + `["']?\s*:|[{,]\s*["']?` + q + `["']?\s*:`)
	for i, line := range strings.Split(string(data), "\n") {
		if key.MatchString(line) {
			return fmt.Sprintf(" (line %d)", i+1)
		}
	}
	return ""
}
