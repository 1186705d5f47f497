package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
)

// The kinds of step.
const (
	KindSend    = "send"
	KindWait    = "wait"
	KindWaitFor = "wait_for"
	KindBranch  = "branch"
	KindSplit   = "split"
	KindExit    = "exit"
)

// kinds lists every kind, in the order errors name them.
var kinds = []string{KindSend, KindWait, KindWaitFor, KindBranch, KindSplit, KindExit}

// Exit is the goto of a split path that ends the run (a holdout).
const Exit = "exit"

// Step is one step of a definition: Kind says which of its fields is set.
// Its JSON is an object with one kind key, an optional "name", and
// "on_timeout" beside wait_for or "else" beside branch.
type Step struct {
	Name string
	Kind string

	Send    *Send        // KindSend
	Wait    *Wait        // KindWait
	WaitFor *WaitFor     // KindWaitFor
	Branch  []BranchPath // KindBranch
	Split   []SplitPath  // KindSplit
	// OnTimeout names the step a wait_for goes to at its deadline; empty:
	// the run ends.
	OnTimeout string
	// Else names the step a branch goes to when no path holds; empty: the
	// next step.
	Else string
}

// Send sends the run's user a notification of Type, with the run's data.
type Send struct {
	Type     string
	Channels []notify.Channel // empty: every channel
	short    bool             // written {"send": "<type>"}
}

// Wait pauses a run for For, or until the next UntilLocal ("HH:MM") in
// the user's time zone.
type Wait struct {
	For        time.Duration
	UntilLocal string
}

// WaitFor pauses a run until its user's next Event whose data holds every
// value of Match (placeholders "{key}" resolved from the run's data when
// the run reaches the step), or until Timeout (zero: none).
type WaitFor struct {
	Event   string
	Match   map[string]json.RawMessage
	Timeout time.Duration
}

// BranchPath goes to Goto when the value at Key (a dotted path into the
// run's data, or "user.<attribute>") satisfies Op against Value.
type BranchPath struct {
	Key   string
	Op    string // eq, ne, gt, gte, lt, lte, in, exists
	Value json.RawMessage
	Goto  string
}

// SplitPath takes Percent of the runs reaching a split to Goto (a step
// name, or Exit).
type SplitPath struct {
	Percent int    `json:"percent"`
	Goto    string `json:"goto"`
}

// MarshalJSON writes the step in the form a definition gives it.
func (st Step) MarshalJSON() ([]byte, error) {
	m := map[string]any{}
	if st.Name != "" {
		m["name"] = st.Name
	}
	switch st.Kind {
	case KindSend:
		if st.Send == nil {
			return nil, fmt.Errorf("send step without Send")
		}
		if st.Send.short && len(st.Send.Channels) == 0 {
			m[KindSend] = st.Send.Type
		} else {
			o := map[string]any{"type": st.Send.Type}
			if len(st.Send.Channels) > 0 {
				o["channels"] = st.Send.Channels
			}
			m[KindSend] = o
		}
	case KindWait:
		if st.Wait == nil {
			return nil, fmt.Errorf("wait step without Wait")
		}
		if st.Wait.UntilLocal != "" {
			m[KindWait] = map[string]string{"until_local": st.Wait.UntilLocal}
		} else {
			m[KindWait] = formatDuration(st.Wait.For)
		}
	case KindWaitFor:
		if st.WaitFor == nil {
			return nil, fmt.Errorf("wait_for step without WaitFor")
		}
		o := map[string]any{"event": st.WaitFor.Event}
		if len(st.WaitFor.Match) > 0 {
			o["match"] = st.WaitFor.Match
		}
		if st.WaitFor.Timeout > 0 {
			o["timeout"] = formatDuration(st.WaitFor.Timeout)
		}
		m[KindWaitFor] = o
		if st.OnTimeout != "" {
			m["on_timeout"] = st.OnTimeout
		}
	case KindBranch:
		paths := make([]any, len(st.Branch))
		for i, p := range st.Branch {
			paths[i] = map[string]any{"if": map[string]map[string]json.RawMessage{p.Key: {p.Op: p.Value}}, "goto": p.Goto}
		}
		m[KindBranch] = paths
		if st.Else != "" {
			m["else"] = st.Else
		}
	case KindSplit:
		m[KindSplit] = st.Split
	case KindExit:
		m[KindExit] = true
	default:
		return nil, fmt.Errorf("unknown step kind %q", st.Kind)
	}
	return json.Marshal(m)
}

// definition is a workflow's body as PUT: what Stored.Definition holds.
type definition struct {
	Trigger Trigger `json:"trigger"`
	Entry   Entry   `json:"entry"`
	Steps   []Step  `json:"steps"`
}

// MarshalJSON writes the entry as {"once_per": "<duration>"}, or {}.
func (e Entry) MarshalJSON() ([]byte, error) {
	if e.OncePer <= 0 {
		return []byte("{}"), nil
	}
	return json.Marshal(map[string]string{"once_per": formatDuration(e.OncePer)})
}

// MarshalJSON writes the API's form of a workflow.
func (w Workflow) MarshalJSON() ([]byte, error) {
	steps := w.Steps
	if steps == nil {
		steps = []Step{}
	}
	return json.Marshal(struct {
		Key       string    `json:"key"`
		Version   int       `json:"version"`
		Trigger   Trigger   `json:"trigger"`
		Entry     Entry     `json:"entry"`
		Steps     []Step    `json:"steps"`
		CreatedAt time.Time `json:"created_at"`
		UpdatedAt time.Time `json:"updated_at"`
	}{w.Key, w.Version, w.Trigger, w.Entry, steps, w.CreatedAt, w.UpdatedAt})
}

// index returns the index of the step named name, or -1.
func (w Workflow) index(name string) int {
	for i, st := range w.Steps {
		if st.Name != "" && st.Name == name {
			return i
		}
	}
	return -1
}

// formatDuration writes d as ParseDuration reads it, without the zero
// units String adds ("24h", not "24h0m0s").
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// parseDuration reads a Go duration ("90m", "1h30m"), optionally led by
// whole days ("7d", "1d12h").
func parseDuration(s string) (time.Duration, error) {
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.Atoi(s[:i])
		if err != nil || n < 0 || n > 100000 {
			return 0, fmt.Errorf("bad days in %q", s)
		}
		days, s = time.Duration(n)*24*time.Hour, s[i+1:]
		if s == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	return days + d, nil
}

// isNull reports whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}
