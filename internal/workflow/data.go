package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// decode reads JSON with numbers kept as json.Number.
func decode(raw json.RawMessage) (any, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// lookup returns the value at path in v: a key of the top object, or a
// dotted path through nested objects ("cart.total"), whose keys may hold
// dots themselves ("order.placed.total": the key "order.placed", then
// "total").
func lookup(v any, path string) (any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	if x, ok := m[path]; ok {
		return x, true
	}
	for i := range len(path) {
		if path[i] != '.' {
			continue
		}
		if x, ok := m[path[:i]]; ok {
			if y, ok := lookup(x, path[i+1:]); ok {
				return y, true
			}
		}
	}
	return nil, false
}

// equal compares two decoded JSON scalars: numbers by value, and a number
// equals a string holding it ("42" and 42), so a match need not know
// whether an id was sent as a number or as text.
func equal(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		switch y := b.(type) {
		case json.Number:
			return numEqual(x, y)
		case string:
			return numEqual(x, json.Number(y))
		}
	case string:
		switch y := b.(type) {
		case string:
			return x == y
		case json.Number:
			return numEqual(y, json.Number(x))
		}
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	}
	return false
}

func numEqual(a, b json.Number) bool {
	if a == b {
		return true
	}
	x, err1 := a.Float64()
	y, err2 := b.Float64()
	return err1 == nil && err2 == nil && x == y
}

// compare orders two numbers, or two strings: ok false for anything else.
func compare(a, b any) (int, bool) {
	if x, ok := a.(json.Number); ok {
		if y, ok := b.(json.Number); ok {
			fx, err1 := x.Float64()
			fy, err2 := y.Float64()
			if err1 != nil || err2 != nil {
				return 0, false
			}
			switch {
			case fx < fy:
				return -1, true
			case fx > fy:
				return 1, true
			}
			return 0, true
		}
	}
	if x, ok := a.(string); ok {
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), true
		}
	}
	return 0, false
}

// matches reports whether data (an event's) holds every value of match (a
// run's WaitMatch, placeholders resolved).
func matches(match, data json.RawMessage) bool {
	if isNull(match) {
		return true
	}
	m, err := decode(match)
	want, ok := m.(map[string]any)
	if err != nil || !ok {
		return false
	}
	if len(want) == 0 {
		return true
	}
	d, err := decode(data)
	if err != nil {
		return false
	}
	for k, v := range want {
		got, ok := lookup(d, k)
		if !ok || !equal(got, v) {
			return false
		}
	}
	return true
}

// resolveMatch returns a wait_for's match with each "{path}" placeholder
// replaced from the run's data: a value that is only a placeholder takes
// the data's value as it is (a number stays a number); one inside other
// text takes its text. A path the data lacks gives "".
func resolveMatch(match map[string]json.RawMessage, data json.RawMessage) (json.RawMessage, error) {
	if len(match) == 0 {
		return nil, nil
	}
	d, _ := decode(data)
	out := make(map[string]any, len(match))
	for k, raw := range match {
		v, err := decode(raw)
		if err != nil {
			return nil, fmt.Errorf("match %q: %w", k, err)
		}
		if s, ok := v.(string); ok {
			v = fill(s, d)
		}
		out[k] = v
	}
	return json.Marshal(out)
}

// fill replaces s's placeholders from data.
func fill(s string, data any) any {
	if len(s) > 2 && s[0] == '{' && s[len(s)-1] == '}' && !strings.ContainsAny(s[1:len(s)-1], "{}") {
		v, ok := lookup(data, s[1:len(s)-1])
		if !ok {
			return ""
		}
		switch v.(type) {
		case string, json.Number, bool:
			return v
		}
		return text(v)
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '{')
		j := strings.IndexByte(s[i+1:], '}')
		if i < 0 || j < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		if v, ok := lookup(data, s[i+1:i+1+j]); ok {
			b.WriteString(text(v))
		}
		s = s[i+2+j:]
	}
}

// text writes a decoded JSON value as placeholder text.
func text(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// mergeData returns the run's data with an awaited event's data under the
// event's name.
func mergeData(data json.RawMessage, name string, event json.RawMessage) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if !isNull(data) {
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("run data: %w", err)
		}
	}
	m[name] = event
	return json.Marshal(m)
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}
