package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
)

// problems collects field errors, in the order found.
type problems []apperr.FieldError

func (p *problems) add(field, format string, args ...any) {
	*p = append(*p, apperr.FieldError{Field: field, Detail: fmt.Sprintf(format, args...)})
}

// object decodes raw as a JSON object, or reports field.
func (p *problems) object(field string, raw json.RawMessage) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' || json.Unmarshal(t, &m) != nil {
		p.add(field, "must be a JSON object")
		return nil, false
	}
	return m, true
}

// str decodes raw as a JSON string, or reports field.
func (p *problems) str(field string, raw json.RawMessage) (string, bool) {
	var s string
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '"' || json.Unmarshal(t, &s) != nil {
		p.add(field, "must be a string")
		return "", false
	}
	return s, true
}

// unknown reports the keys of m not in allowed.
func (p *problems) unknown(prefix string, m map[string]json.RawMessage, allowed ...string) {
	for _, k := range sortedKeys(m) {
		if !slices.Contains(allowed, k) {
			p.add(join(prefix, k), "unknown field")
		}
	}
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// parse reads a definition's JSON into w's Trigger, Entry and Steps,
// reporting every field it cannot read; the checks across fields and
// steps are validate's.
func parse(body json.RawMessage) (Workflow, problems) {
	var p problems
	var w Workflow
	if len(body) > MaxDefinitionBytes {
		p.add("definition", "must be at most %d bytes", MaxDefinitionBytes)
		return w, p
	}
	if !utf8.Valid(body) {
		p.add("definition", "must be valid UTF-8")
		return w, p
	}
	top, ok := p.object("definition", body)
	if !ok {
		return w, p
	}
	p.unknown("", top, "trigger", "entry", "steps", "key", "version", "created_at", "updated_at")
	if raw, ok := top["trigger"]; !ok || isNull(raw) {
		p.add("trigger.event", "is required")
	} else if m, ok := p.object("trigger", raw); ok {
		p.unknown("trigger", m, "event")
		if raw, ok := m["event"]; !ok {
			p.add("trigger.event", "is required")
		} else if s, ok := p.str("trigger.event", raw); ok {
			w.Trigger.Event = s
		}
	}
	if raw, ok := top["entry"]; ok && !isNull(raw) {
		if m, ok := p.object("entry", raw); ok {
			p.unknown("entry", m, "once_per")
			if raw, ok := m["once_per"]; ok && !isNull(raw) {
				if s, ok := p.str("entry.once_per", raw); ok {
					if d, err := parseDuration(s); err != nil || d <= 0 || d > maxWait {
						p.add("entry.once_per", "must be a duration such as \"24h\" or \"7d\", at most 365 days")
					} else {
						w.Entry.OncePer = d
					}
				}
			}
		}
	}
	var steps []json.RawMessage
	if raw, ok := top["steps"]; !ok || isNull(raw) {
		p.add("steps", "is required")
	} else if json.Unmarshal(raw, &steps) != nil {
		p.add("steps", "must be an array of steps")
	} else if len(steps) == 0 || len(steps) > MaxSteps {
		p.add("steps", "must hold 1 to %d steps", MaxSteps)
	} else {
		w.Steps = make([]Step, len(steps))
		for i, raw := range steps {
			w.Steps[i] = p.step(fmt.Sprintf("steps[%d]", i), raw)
		}
	}
	return w, p
}

// step reads one step at field f.
func (p *problems) step(f string, raw json.RawMessage) Step {
	var st Step
	m, ok := p.object(f, raw)
	if !ok {
		return st
	}
	var found []string
	for _, k := range kinds {
		if _, ok := m[k]; ok {
			found = append(found, k)
		}
	}
	switch len(found) {
	case 0:
		p.add(f, "must have one kind: %s", strings.Join(kinds, ", "))
	case 1:
		st.Kind = found[0]
	default:
		p.add(f, "has %d kinds (%s); a step has one", len(found), strings.Join(found, ", "))
	}
	allowed := append([]string{"name"}, kinds...)
	switch st.Kind {
	case KindWaitFor:
		allowed = append(allowed, "on_timeout")
	case KindBranch:
		allowed = append(allowed, "else")
	}
	p.unknown(f, m, allowed...)
	if raw, ok := m["name"]; ok {
		st.Name, _ = p.str(f+".name", raw)
	}
	if raw, ok := m["on_timeout"]; ok && st.Kind == KindWaitFor {
		st.OnTimeout, _ = p.str(f+".on_timeout", raw)
	}
	if raw, ok := m["else"]; ok && st.Kind == KindBranch {
		st.Else, _ = p.str(f+".else", raw)
	}
	if st.Kind == "" {
		return st
	}
	kf, raw := f+"."+st.Kind, m[st.Kind]
	switch st.Kind {
	case KindSend:
		st.Send = p.send(kf, raw)
	case KindWait:
		st.Wait = p.wait(kf, raw)
	case KindWaitFor:
		st.WaitFor = p.waitFor(kf, raw)
	case KindBranch:
		st.Branch = p.branch(kf, raw)
	case KindSplit:
		st.Split = p.split(kf, raw)
	case KindExit:
		if string(bytes.TrimSpace(raw)) != "true" {
			p.add(kf, "must be true")
		}
	}
	return st
}

func (p *problems) send(f string, raw json.RawMessage) *Send {
	s := &Send{}
	if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '"' {
		s.Type, _ = p.str(f, raw)
		s.short = true
		if s.Type == "" {
			p.add(f, "must name a notification type")
		}
		return s
	}
	m, ok := p.object(f, raw)
	if !ok {
		return s
	}
	p.unknown(f, m, "type", "channels")
	if raw, ok := m["type"]; !ok {
		p.add(f+".type", "is required")
	} else if s.Type, ok = p.str(f+".type", raw); ok && s.Type == "" {
		p.add(f+".type", "is required")
	}
	if raw, ok := m["channels"]; ok && !isNull(raw) {
		var chs []string
		if json.Unmarshal(raw, &chs) != nil {
			p.add(f+".channels", "must be an array of channel names")
			return s
		}
		for i, c := range chs {
			ch := notify.Channel(c)
			switch {
			case !ch.Valid():
				p.add(fmt.Sprintf("%s.channels[%d]", f, i), "unknown channel %q", c)
			case slices.Contains(s.Channels, ch):
				p.add(fmt.Sprintf("%s.channels[%d]", f, i), "listed twice")
			default:
				s.Channels = append(s.Channels, ch)
			}
		}
	}
	return s
}

func (p *problems) wait(f string, raw json.RawMessage) *Wait {
	w := &Wait{}
	if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '"' {
		s, _ := p.str(f, raw)
		d, err := parseDuration(s)
		if err != nil || d <= 0 || d > maxWait {
			p.add(f, "must be a duration such as \"1h\" or \"2d\", more than 0 and at most 365 days")
		}
		w.For = d
		return w
	}
	m, ok := p.object(f, raw)
	if !ok {
		return w
	}
	p.unknown(f, m, "until_local")
	if raw, ok := m["until_local"]; !ok {
		p.add(f+".until_local", "is required (or give the wait as a duration)")
	} else if s, ok := p.str(f+".until_local", raw); ok {
		if _, _, err := parseClock(s); err != nil {
			p.add(f+".until_local", "must be a time of day \"HH:MM\"")
		}
		w.UntilLocal = s
	}
	return w
}

func (p *problems) waitFor(f string, raw json.RawMessage) *WaitFor {
	w := &WaitFor{}
	m, ok := p.object(f, raw)
	if !ok {
		return w
	}
	p.unknown(f, m, "event", "match", "timeout")
	if raw, ok := m["event"]; !ok {
		p.add(f+".event", "is required")
	} else if s, ok := p.str(f+".event", raw); ok {
		w.Event = s
		if msg := checkEventName(s); msg != "" {
			p.add(f+".event", "%s", msg)
		}
	}
	if raw, ok := m["timeout"]; ok && !isNull(raw) {
		if s, ok := p.str(f+".timeout", raw); ok {
			d, err := parseDuration(s)
			if err != nil || d <= 0 || d > maxWait {
				p.add(f+".timeout", "must be a duration such as \"24h\", more than 0 and at most 365 days")
			}
			w.Timeout = d
		}
	}
	if raw, ok := m["match"]; ok && !isNull(raw) {
		mm, ok := p.object(f+".match", raw)
		if !ok {
			return w
		}
		if len(mm) > maxMatchKeys {
			p.add(f+".match", "must hold at most %d keys", maxMatchKeys)
		}
		w.Match = map[string]json.RawMessage{}
		for _, k := range sortedKeys(mm) {
			kf := f + ".match." + k
			if msg := checkPath(k); msg != "" {
				p.add(kf, "%s", msg)
			}
			if !isScalar(mm[k]) || isNull(mm[k]) {
				p.add(kf, "must be a string, a number or a boolean")
				continue
			}
			w.Match[k] = compact(mm[k])
		}
	}
	return w
}

func (p *problems) branch(f string, raw json.RawMessage) []BranchPath {
	var paths []json.RawMessage
	if json.Unmarshal(raw, &paths) != nil {
		p.add(f, "must be an array of paths")
		return nil
	}
	if len(paths) == 0 || len(paths) > maxBranchPaths {
		p.add(f, "must hold 1 to %d paths", maxBranchPaths)
		return nil
	}
	out := make([]BranchPath, len(paths))
	for i, raw := range paths {
		pf := fmt.Sprintf("%s[%d]", f, i)
		m, ok := p.object(pf, raw)
		if !ok {
			continue
		}
		p.unknown(pf, m, "if", "goto")
		if raw, ok := m["goto"]; !ok {
			p.add(pf+".goto", "is required")
		} else {
			out[i].Goto, _ = p.str(pf+".goto", raw)
		}
		cond, ok := m["if"]
		if !ok {
			p.add(pf+".if", "is required")
			continue
		}
		out[i].Key, out[i].Op, out[i].Value = p.condition(pf+".if", cond)
	}
	return out
}

// condition reads {"<key>": {"<op>": <value>}}.
func (p *problems) condition(f string, raw json.RawMessage) (key, op string, value json.RawMessage) {
	m, ok := p.object(f, raw)
	if !ok {
		return
	}
	if len(m) != 1 {
		p.add(f, "must hold exactly one key")
		return
	}
	for k := range m {
		key = k
	}
	kf := f + "." + key
	if msg := checkKey(key); msg != "" {
		p.add(kf, "%s", msg)
	}
	ops, ok := p.object(kf, m[key])
	if !ok {
		return
	}
	if len(ops) != 1 {
		p.add(kf, "must hold exactly one operator of %s", strings.Join(operators, ", "))
		return
	}
	for o := range ops {
		op = o
	}
	value = compact(ops[op])
	of := kf + "." + op
	switch op {
	case "eq", "ne":
		if !isScalar(value) {
			p.add(of, "must be a string, a number, a boolean or null")
		}
	case "gt", "gte", "lt", "lte":
		if t := firstByte(value); t != '"' && !isNumber(value) {
			p.add(of, "must be a number or a string")
		}
	case "in":
		var vs []json.RawMessage
		if json.Unmarshal(value, &vs) != nil || len(vs) == 0 || len(vs) > maxInValues {
			p.add(of, "must be an array of 1 to %d values", maxInValues)
			break
		}
		for _, v := range vs {
			if !isScalar(v) {
				p.add(of, "must hold strings, numbers, booleans or null")
				break
			}
		}
	case "exists":
		if s := string(value); s != "true" && s != "false" {
			p.add(of, "must be true or false")
		}
	default:
		p.add(of, "unknown operator (want one of %s)", strings.Join(operators, ", "))
	}
	return key, op, value
}

func (p *problems) split(f string, raw json.RawMessage) []SplitPath {
	var paths []json.RawMessage
	if json.Unmarshal(raw, &paths) != nil {
		p.add(f, "must be an array of paths")
		return nil
	}
	if len(paths) == 0 || len(paths) > maxSplitPaths {
		p.add(f, "must hold 1 to %d paths", maxSplitPaths)
		return nil
	}
	out := make([]SplitPath, len(paths))
	sum, sumOK := 0, true
	for i, raw := range paths {
		pf := fmt.Sprintf("%s[%d]", f, i)
		m, ok := p.object(pf, raw)
		if !ok {
			sumOK = false
			continue
		}
		p.unknown(pf, m, "percent", "goto")
		if raw, ok := m["goto"]; !ok {
			p.add(pf+".goto", "is required")
		} else {
			out[i].Goto, _ = p.str(pf+".goto", raw)
		}
		if json.Unmarshal(m["percent"], &out[i].Percent) != nil || out[i].Percent <= 0 || out[i].Percent > 100 {
			p.add(pf+".percent", "must be a whole number from 1 to 100")
			sumOK = false
		}
		sum += out[i].Percent
	}
	if sumOK && sum != 100 {
		p.add(f, "percents must sum to 100, not %d", sum)
	}
	return out
}

// operators are a branch condition's, in the order errors list them.
var operators = []string{"eq", "ne", "gt", "gte", "lt", "lte", "in", "exists"}

func compact(raw json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return raw
	}
	return buf.Bytes()
}

func firstByte(raw json.RawMessage) byte {
	if t := bytes.TrimSpace(raw); len(t) > 0 {
		return t[0]
	}
	return 0
}

// isScalar reports whether raw is a JSON string, number, boolean or null.
func isScalar(raw json.RawMessage) bool {
	if !json.Valid(raw) {
		return false
	}
	switch firstByte(raw) {
	case '{', '[', 0:
		return false
	}
	return true
}

func isNumber(raw json.RawMessage) bool {
	b := firstByte(raw)
	return json.Valid(raw) && (b == '-' || (b >= '0' && b <= '9'))
}
