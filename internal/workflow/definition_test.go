package workflow_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/workflow"
)

// knownTypes is a Templates that knows the shipped notification types.
type knownTypes struct{}

func (knownTypes) Template(_ context.Context, typ string) (notify.Template, error) {
	if t, ok := notify.DefaultTemplate(typ); ok {
		return t, nil
	}
	return notify.Template{}, apperr.New(apperr.NotFound, "no type %q", typ)
}

// abandonedCart is the abandoned cart workflow: an hour's pause, then the
// order awaited a day; a big order gets a thank-you, no order a reminder.
const abandonedCart = `{
  "trigger": {"event": "cart.abandoned"},
  "entry": {"once_per": "24h"},
  "steps": [
    {"name": "pause", "wait": "1h"},
    {"name": "await", "wait_for": {"event": "order.placed", "match": {"cart_id": "{cart_id}"}, "timeout": "24h"}, "on_timeout": "remind"},
    {"name": "bought", "branch": [{"if": {"order.placed.total": {"gte": 100}}, "goto": "thanks"}], "else": "done"},
    {"name": "thanks", "send": "order.confirmed"},
    {"name": "done", "exit": true},
    {"name": "remind", "send": {"type": "abandoned_cart", "channels": ["email"]}}
  ]
}`

// parseOnly validates a definition through a Service with no store: a
// valid one gets as far as the store (and panics on the nil Store), so
// definitions are checked with check below.
func check(t *testing.T, key, body string) error {
	t.Helper()
	_, err := workflow.ParseDefinition(t.Context(), key, json.RawMessage(body), knownTypes{})
	return err
}

func fieldsOf(err error) []string {
	var ae *apperr.Error
	if !asAppErr(err, &ae) {
		return nil
	}
	var out []string
	for _, f := range ae.Fields {
		out = append(out, f.Field)
	}
	return out
}

func asAppErr(err error, target **apperr.Error) bool {
	ae, ok := err.(*apperr.Error)
	if ok {
		*target = ae
	}
	return ok
}

func TestDefinitionValid(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, body string }{
		{"abandoned cart", abandonedCart},
		{"one send, short form", `{"trigger":{"event":"signup"},"steps":[{"send":"otp"}]}`},
		{"until_local", `{"trigger":{"event":"signup"},"steps":[{"wait":{"until_local":"09:00"}},{"send":"flash_sale"}]}`},
		{"days", `{"trigger":{"event":"signup"},"entry":{"once_per":"7d"},"steps":[{"wait":"1d12h"},{"exit":true}]}`},
		{"split holdout", `{"trigger":{"event":"a"},"steps":[{"split":[{"percent":90,"goto":"s"},{"percent":10,"goto":"exit"}]},{"name":"s","send":"otp"}]}`},
		{"loop through a wait", `{"trigger":{"event":"a"},"steps":[{"name":"w","wait":"1h"},{"branch":[{"if":{"n":{"lt":3}},"goto":"w"}]}]}`},
		{"loop through a wait_for", `{"trigger":{"event":"a"},"steps":[{"name":"w","wait_for":{"event":"b"}},{"branch":[{"if":{"user.plan":{"in":["pro","team"]}},"goto":"w"}]}]}`},
		{"every operator", `{"trigger":{"event":"a"},"steps":[{"branch":[
			{"if":{"a":{"eq":"x"}},"goto":"e"},{"if":{"b.c":{"ne":null}},"goto":"e"},{"if":{"d":{"gt":1.5}},"goto":"e"},
			{"if":{"user.age":{"lte":"2020"}},"goto":"e"},{"if":{"f":{"exists":false}},"goto":"e"}]},{"name":"e","exit":true}]}`},
		{"a GET body put back", `{"key":"x","version":3,"trigger":{"event":"a"},"entry":{},"steps":[{"exit":true}],"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := check(t, "wf", tt.body); err != nil {
				t.Fatalf("valid definition refused: %v %v", err, fieldsOf(err))
			}
		})
	}
}

// TestDefinitionInvalid: each bad definition is Unprocessable naming
// exactly the bad fields, all at once.
func TestDefinitionInvalid(t *testing.T) {
	t.Parallel()
	const ok = `{"trigger":{"event":"a"},"steps":[{"exit":true}]}`
	steps := func(s string) string { return `{"trigger":{"event":"a"},"steps":[` + s + `]}` }
	for _, tt := range []struct {
		name, key, body string
		want            []string
	}{
		{"bad key", "Bad Key", ok, []string{"key"}},
		{"long key", strings.Repeat("k", 65), ok, []string{"key"}},
		{"not an object", "wf", `[1]`, []string{"definition"}},
		{"too big", "wf", `{"trigger":{"event":"a"},"steps":[{"exit":true}],"x":"` + strings.Repeat("a", 64<<10) + `"}`, []string{"definition"}},
		{"no trigger", "wf", `{"steps":[{"exit":true}]}`, []string{"trigger.event"}},
		{"empty trigger", "wf", `{"trigger":{"event":""},"steps":[{"exit":true}]}`, []string{"trigger.event"}},
		{"bad trigger name", "wf", `{"trigger":{"event":"a b"},"steps":[{"exit":true}]}`, []string{"trigger.event"}},
		{"unknown top field", "wf", `{"trigger":{"event":"a"},"steps":[{"exit":true}],"stepz":[]}`, []string{"stepz"}},
		{"bad once_per", "wf", `{"trigger":{"event":"a"},"entry":{"once_per":"soon"},"steps":[{"exit":true}]}`, []string{"entry.once_per"}},
		{"no steps", "wf", `{"trigger":{"event":"a"},"steps":[]}`, []string{"steps"}},
		{"too many steps", "wf", steps(strings.TrimSuffix(strings.Repeat(`{"wait":"1h"},`, 51), ",")), []string{"steps"}},
		{"no kind", "wf", steps(`{"name":"x"}`), []string{"steps[0]"}},
		{"unknown kind", "wf", steps(`{"sleep":"1h"}`), []string{"steps[0]", "steps[0].sleep"}},
		{"two kinds", "wf", steps(`{"send":"otp","wait":"1h"}`), []string{"steps[0]"}},
		{"on_timeout beside a send", "wf", steps(`{"send":"otp","on_timeout":"x"}`), []string{"steps[0].on_timeout"}},
		{"else beside a wait", "wf", steps(`{"wait":"1h","else":"x"}`), []string{"steps[0].else"}},
		{"unknown send type", "wf", steps(`{"send":"nope"}`), []string{"steps[0].send"}},
		{"unknown send type, object", "wf", steps(`{"send":{"type":"nope"}}`), []string{"steps[0].send.type"}},
		{"send without type", "wf", steps(`{"send":{"channels":["email"]}}`), []string{"steps[0].send.type"}},
		{"bad channel", "wf", steps(`{"send":{"type":"otp","channels":["fax","email","email"]}}`), []string{"steps[0].send.channels[0]", "steps[0].send.channels[2]"}},
		{"zero wait", "wf", steps(`{"wait":"0s"}`), []string{"steps[0].wait"}},
		{"long wait", "wf", steps(`{"wait":"366d"}`), []string{"steps[0].wait"}},
		{"bad until_local", "wf", steps(`{"wait":{"until_local":"9am"}}`), []string{"steps[0].wait.until_local"}},
		{"wait_for without event", "wf", steps(`{"wait_for":{"timeout":"1h"}}`), []string{"steps[0].wait_for.event"}},
		{"bad timeout", "wf", steps(`{"wait_for":{"event":"b","timeout":"-1h"}}`), []string{"steps[0].wait_for.timeout"}},
		{"object match value", "wf", steps(`{"wait_for":{"event":"b","match":{"a":{"b":1}}}}`), []string{"steps[0].wait_for.match.a"}},
		{"on_timeout without timeout", "wf", steps(`{"wait_for":{"event":"b"},"on_timeout":"x"},{"name":"x","exit":true}`), []string{"steps[0].on_timeout"}},
		{"on_timeout names no step", "wf", steps(`{"wait_for":{"event":"b","timeout":"1h"},"on_timeout":"nowhere"}`), []string{"steps[0].on_timeout"}},
		{"duplicate names", "wf", steps(`{"name":"a","wait":"1h"},{"name":"a","exit":true}`), []string{"steps[1].name"}},
		{"bad name", "wf", steps(`{"name":"A!","exit":true}`), []string{"steps[0].name"}},
		{"name exit", "wf", steps(`{"name":"exit","exit":true}`), []string{"steps[0].name"}},
		{"no branch paths", "wf", steps(`{"branch":[]}`), []string{"steps[0].branch"}},
		{"six branch paths", "wf", steps(`{"branch":[` + strings.TrimSuffix(strings.Repeat(`{"if":{"a":{"eq":1}},"goto":"e"},`, 6), ",") + `]},{"name":"e","exit":true}`), []string{"steps[0].branch"}},
		{"unknown operator", "wf", steps(`{"branch":[{"if":{"a":{"like":"x"}},"goto":"e"}]},{"name":"e","exit":true}`), []string{"steps[0].branch[0].if.a.like"}},
		{"two operators", "wf", steps(`{"branch":[{"if":{"a":{"gt":1,"lt":3}},"goto":"e"}]},{"name":"e","exit":true}`), []string{"steps[0].branch[0].if.a"}},
		{"two keys", "wf", steps(`{"branch":[{"if":{"a":{"gt":1},"b":{"lt":3}},"goto":"e"}]},{"name":"e","exit":true}`), []string{"steps[0].branch[0].if"}},
		{"bad operands", "wf", steps(`{"branch":[{"if":{"a":{"gt":true}},"goto":"e"},{"if":{"b":{"in":[]}},"goto":"e"},{"if":{"c":{"exists":"yes"}},"goto":"e"},{"if":{"user":{"eq":1}},"goto":"e"}]},{"name":"e","exit":true}`),
			[]string{"steps[0].branch[0].if.a.gt", "steps[0].branch[1].if.b.in", "steps[0].branch[2].if.c.exists", "steps[0].branch[3].if.user"}},
		{"goto names no step", "wf", steps(`{"branch":[{"if":{"a":{"eq":1}},"goto":"nowhere"}],"else":"nor"}`), []string{"steps[0].branch[0].goto", "steps[0].else"}},
		{"branch goto exit", "wf", steps(`{"branch":[{"if":{"a":{"eq":1}},"goto":"exit"}]}`), []string{"steps[0].branch[0].goto"}},
		{"split not 100", "wf", steps(`{"split":[{"percent":50,"goto":"exit"},{"percent":40,"goto":"e"}]},{"name":"e","exit":true}`), []string{"steps[0].split"}},
		{"split bad percent", "wf", steps(`{"split":[{"percent":0,"goto":"exit"},{"percent":100.5,"goto":"e"}]},{"name":"e","exit":true}`), []string{"steps[0].split[0].percent", "steps[0].split[1].percent"}},
		{"exit false", "wf", steps(`{"exit":false}`), []string{"steps[0].exit"}},
		{"loop without a wait", "wf", steps(`{"name":"a","send":"otp"},{"branch":[{"if":{"x":{"eq":1}},"goto":"a"}]}`), []string{"steps[1].branch[0].goto"}},
		{"self loop", "wf", steps(`{"name":"a","branch":[{"if":{"x":{"eq":1}},"goto":"b"}],"else":"a"},{"name":"b","exit":true}`), []string{"steps[0].else"}},
		{"split loop", "wf", steps(`{"name":"a","send":"otp"},{"split":[{"percent":50,"goto":"a"},{"percent":50,"goto":"exit"}]}`), []string{"steps[1].split[0].goto"}},
		{"many at once", "Bad", `{"trigger":{},"entry":{"once_per":"x"},"steps":[{"send":"nope"},{"wait":"0s"},{"split":[{"percent":10,"goto":"q"}]}]}`,
			[]string{"trigger.event", "entry.once_per", "steps[0].send", "steps[1].wait", "steps[2].split", "key", "steps[2].split[0].goto"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := check(t, tt.key, tt.body)
			if !apperr.Is(err, apperr.Unprocessable) {
				t.Fatalf("err = %v, want Unprocessable", err)
			}
			got := fieldsOf(err)
			if !sameSet(got, tt.want) {
				t.Errorf("fields = %q, want %q (%v)", got, tt.want, err.(*apperr.Error).Fields)
			}
		})
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestDefinitionRoundTrip: a definition marshals back in the form it was
// given (short sends short, durations as durations), and that form parses
// to the same definition.
func TestDefinitionRoundTrip(t *testing.T) {
	t.Parallel()
	w, err := workflow.ParseDefinition(t.Context(), "cart", json.RawMessage(abandonedCart), knownTypes{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	var shape struct {
		Key   string            `json:"key"`
		Entry map[string]string `json:"entry"`
		Steps []map[string]any  `json:"steps"`
	}
	if err := json.Unmarshal(got, &shape); err != nil {
		t.Fatal(err)
	}
	if shape.Key != "cart" || shape.Entry["once_per"] != "24h" {
		t.Errorf("key, entry = %q, %v; want cart, once_per 24h", shape.Key, shape.Entry)
	}
	if shape.Steps[0]["wait"] != "1h" || shape.Steps[3]["send"] != "order.confirmed" || shape.Steps[1]["on_timeout"] != "remind" || shape.Steps[2]["else"] != "done" {
		t.Errorf("steps did not keep their form: %s", got)
	}
	wf := shape.Steps[1]["wait_for"].(map[string]any)
	if wf["timeout"] != "24h" || wf["match"].(map[string]any)["cart_id"] != "{cart_id}" {
		t.Errorf("wait_for = %v", wf)
	}
	again, err := workflow.ParseDefinition(t.Context(), "cart", got, knownTypes{})
	if err != nil {
		t.Fatalf("the marshalled form does not parse: %v", err)
	}
	if back, _ := json.Marshal(again); string(back) != string(got) {
		t.Errorf("round trip changed the definition:\n%s\n%s", got, back)
	}
}

// FuzzDefinition: PutWorkflow's parser and validator never panic, answer
// a bad definition with Unprocessable and its fields, and a definition
// they accept marshals to a form they accept as the same definition.
func FuzzDefinition(f *testing.F) {
	f.Add(abandonedCart)
	f.Add(`{"trigger":{"event":"a"},"steps":[{"name":"a","send":"otp"},{"split":[{"percent":50,"goto":"a"},{"percent":50,"goto":"exit"}]}]}`)
	f.Add(`{"trigger":{"event":"a"},"steps":[{"wait":{"until_local":"09:00"}},{"branch":[{"if":{"user.x":{"in":[1,"2",null]}},"goto":"e"}]},{"name":"e","exit":true}]}`)
	f.Add(`{"trigger":{"event":"a"},"steps":[{"wait_for":{"event":"b","match":{"a.b":"x{y}z"},"timeout":"1d"},"on_timeout":"e"},{"name":"e","exit":true}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		w, err := workflow.ParseDefinition(context.Background(), "fuzz", json.RawMessage(body), knownTypes{})
		if err != nil {
			var ae *apperr.Error
			if !asAppErr(err, &ae) || ae.Code != apperr.Unprocessable || len(ae.Fields) == 0 {
				t.Fatalf("refusal %v is not Unprocessable with fields", err)
			}
			return
		}
		out, err := json.Marshal(w)
		if err != nil {
			t.Fatalf("accepted definition does not marshal: %v", err)
		}
		again, err := workflow.ParseDefinition(context.Background(), "fuzz", out, knownTypes{})
		if err != nil {
			t.Fatalf("marshalled form %s refused: %v %v", out, err, fieldsOf(err))
		}
		if back, _ := json.Marshal(again); string(back) != string(out) {
			t.Fatalf("round trip changed the definition:\n%s\n%s", out, back)
		}
	})
}
