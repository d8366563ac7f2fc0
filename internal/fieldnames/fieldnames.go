// Package fieldnames knows the JSON names of a Go struct's fields and says which one a
// misspelt name was likely meant to be: the one "did you mean" of the fake cloud's JSON API,
// its query parameters and the project's YAML files.
package fieldnames

import (
	"reflect"
	"strings"
)

// MaxNameBytes bounds the names Closest compares: a longer one is no typo.
const MaxNameBytes = 64

// Suggest is the JSON name of a field of v's type (a struct, or a pointer to one) at path
// ("steps[2].fault", "" for v itself; list indexes as written or left out) that field, a name
// it does not have, was likely meant to be (Closest); "" when none is close or path leads to
// no struct.
func Suggest(v any, path, field string) string {
	if v == nil {
		return ""
	}
	t := deref(reflect.TypeOf(v))
	if path != "" {
		for _, seg := range strings.Split(path, ".") {
			name, _, _ := strings.Cut(seg, "[")
			if name != "" { // "[0]" alone: an index into t itself, a top-level list
				if t = Type(t, name); t == nil {
					return ""
				}
			}
			for range strings.Count(seg, "[") {
				if k := t.Kind(); k != reflect.Slice && k != reflect.Array && k != reflect.Map {
					return ""
				}
				t = deref(t.Elem())
			}
		}
	}
	if t.Kind() != reflect.Struct {
		return ""
	}
	return Closest(field, Of(t))
}

// Closest is the name of names that name was likely meant to be: one that differs only in
// case, else the nearest at most two single-byte edits away ignoring case (one for a name of
// up to 4 bytes); "" when none is, or name is longer than MaxNameBytes.
func Closest(name string, names []string) string {
	if len(name) > MaxNameBytes {
		return ""
	}
	limit := 2
	if len(name) <= 4 {
		limit = 1
	}
	best, bestDist := "", limit+1
	for _, n := range names {
		if n == name {
			continue
		}
		if strings.EqualFold(n, name) {
			return n
		}
		if d := editDistance(strings.ToLower(name), strings.ToLower(n)); d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

// Of is the JSON names of struct t's fields that encoding/json decodes, embedded structs'
// included, in order.
func Of(t reflect.Type) []string {
	var names []string
	each(deref(t), func(n string, _ reflect.Type) bool {
		names = append(names, n)
		return false
	})
	return names
}

// Type is the type of the field of t (a struct or a pointer to one) whose JSON name is name,
// looking into embedded structs as encoding/json does, with pointers dereferenced; a map's
// values for a map; nil when there is none.
func Type(t reflect.Type, name string) reflect.Type {
	t = deref(t)
	switch t.Kind() {
	case reflect.Map:
		return deref(t.Elem())
	case reflect.Struct:
	default:
		return nil
	}
	var found reflect.Type
	each(t, func(n string, ft reflect.Type) bool {
		if n == name {
			found = deref(ft)
			return true
		}
		return false
	})
	return found
}

func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// each calls f with the JSON name and type of each field of struct t that encoding/json
// decodes, in order, descending into embedded structs without a name of their own, until f
// returns true.
func each(t reflect.Type, f func(name string, ft reflect.Type) bool) bool {
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" {
			if et := deref(sf.Type); et.Kind() == reflect.Struct {
				if each(et, f) {
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

// editDistance is the Levenshtein distance of a and b in bytes (Closest bounds a's length).
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
