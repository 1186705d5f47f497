package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var (
	// answerStatus is the HTTP status an answer opens with.
	answerStatus = regexp.MustCompile(`^(?:HTTP/[\d.]+ )?(\d{3})\b`)
	// answerExit is the exit code a command's answer opens with.
	answerExit = regexp.MustCompile(`^exit (\d+)\b`)
	// answerField is one "name":value pair an answer shows; a value of
	// "..." (or a number ending in it) stands for any value.
	answerField = regexp.MustCompile(`"(\w+)":\s*("(?:[^"\\]|\\.)*"|true|false|null|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?:\.\.\.|…)?|\.\.\.|…|\[|\{)`)
	// answerHeader is a header line of an http answer block.
	answerHeader = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9-]*): (.*)$`)
)

// result is what one step printed: the HTTP status of its last curl (0
// for none), its exit code, its output and what it wrote on stderr.
type result struct {
	status, exit int
	out, stderr  string
}

// body is the output without the headers `curl -si` prints before it.
func (r result) body() string {
	out := strings.TrimLeft(r.out, "\r\n")
	if strings.HasPrefix(out, "HTTP/") {
		if _, b, ok := strings.Cut(out, "\r\n\r\n"); ok {
			return b
		}
	}
	return out
}

// header returns the value of the response header name (curl -si), if any.
func (r result) header(name string) (string, bool) {
	head, _, _ := strings.Cut(r.out, "\r\n\r\n")
	for line := range strings.SplitSeq(head, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(k, name) {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// mismatches lists how r differs from the answer s shows: its status or
// exit code, its headers (an http answer) and its JSON fields.
func mismatches(s docStep, r result) []string {
	var bad []string
	wantStatus, wantExit := 0, 0
	if m := answerStatus.FindStringSubmatch(s.answer); m != nil {
		wantStatus, _ = strconv.Atoi(m[1])
	}
	if m := answerExit.FindStringSubmatch(s.answer); m != nil {
		wantExit, _ = strconv.Atoi(m[1])
	}
	switch {
	case r.status != 0 && wantStatus != 0 && r.status != wantStatus:
		bad = append(bad, fmt.Sprintf("answered %d, the doc says %d", r.status, wantStatus))
	case r.status != 0 && wantStatus == 0 && r.status >= 400:
		bad = append(bad, fmt.Sprintf("answered %d, and the doc shows no such status", r.status))
	}
	if r.exit != wantExit {
		bad = append(bad, fmt.Sprintf("exited %d, the doc says %d", r.exit, wantExit))
	}
	text := s.answer
	if s.http {
		head, b, _ := strings.Cut(text, "\n\n")
		text = b
		for line := range strings.SplitSeq(head, "\n") {
			m := answerHeader.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			got, ok := r.header(m[1])
			switch {
			case !ok:
				bad = append(bad, fmt.Sprintf("no %s header, the doc shows %q", m[1], m[2]))
			case !presenceOnly(m[2]) && got != m[2]:
				bad = append(bad, fmt.Sprintf("%s: %q, the doc shows %q", m[1], got, m[2]))
			}
		}
	}
	fields := answerField.FindAllStringSubmatch(text, -1)
	if len(fields) == 0 {
		return bad
	}
	var body any
	if err := json.Unmarshal([]byte(r.body()), &body); err != nil {
		return append(bad, "the answer is not the JSON the doc shows")
	}
	for _, f := range fields {
		var want any
		presence := f[2] == "[" || f[2] == "{" || presenceOnly(f[2])
		if !presence {
			_ = json.Unmarshal([]byte(f[2]), &want)
		}
		if !hasField(body, f[1], want, presence) {
			bad = append(bad, fmt.Sprintf("the doc shows %s:%s", f[1], f[2]))
		}
	}
	return bad
}

// presenceOnly reports whether a value the doc shows stands for any value:
// it is elided ("...", "…") or a time, which no run repeats.
func presenceOnly(v string) bool {
	if strings.Contains(v, "...") || strings.Contains(v, "…") {
		return true
	}
	_, err := time.Parse(time.RFC3339Nano, strings.Trim(v, `"`))
	return err == nil
}

// hasField reports whether v holds, at any depth, an object with the
// field name set to want (or set at all, when presence).
func hasField(v any, name string, want any, presence bool) bool {
	switch v := v.(type) {
	case map[string]any:
		if got, ok := v[name]; ok && (presence || reflect.DeepEqual(got, want)) {
			return true
		}
		for _, e := range v {
			if hasField(e, name, want, presence) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if hasField(e, name, want, presence) {
				return true
			}
		}
	}
	return false
}

// answerVars returns the string fields of out's JSON that later commands
// may name as <field>: the top level's, and those of the first of its
// items the top level does not have.
func answerVars(out string) map[string]string {
	var top map[string]any
	if json.Unmarshal([]byte(out), &top) != nil {
		return nil
	}
	vars := map[string]string{}
	if items, ok := top["items"].([]any); ok && len(items) > 0 {
		if first, ok := items[0].(map[string]any); ok {
			for k, v := range first {
				if s, ok := v.(string); ok {
					vars[k] = s
				}
			}
		}
	}
	for k, v := range top {
		if s, ok := v.(string); ok {
			vars[k] = s
		}
	}
	return vars
}

// locationVars returns the query parameters of a Location header in out
// (curl -si), such as the sluice_cid of a redirect.
func locationVars(out string) map[string]string {
	vars := map[string]string{}
	for line := range strings.SplitSeq(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.EqualFold(k, "Location") {
			continue
		}
		if u, err := url.Parse(strings.TrimSpace(v)); err == nil {
			for name, values := range u.Query() {
				vars[name] = values[0]
			}
		}
	}
	return vars
}
