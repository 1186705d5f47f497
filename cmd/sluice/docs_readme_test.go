package main

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify"
)

// TestReadmeNotificationsReadWell sends the notifications the README's
// and docs/api.md's shell examples send (the curl payloads to
// /v1/notifications and the `sluice send` lines) to a node, and checks
// that every message the outbox received is the full template text: the
// examples pass every placeholder their templates need, so none renders
// empty ("Track it: " with nothing after it).
func TestReadmeNotificationsReadWell(t *testing.T) {
	t.Parallel()
	n, env := startCLINode(t)
	type sent struct {
		id, typ string
		data    map[string]json.RawMessage
	}
	var all []sent
	payload := regexp.MustCompile(`/v1/notifications\s.*?-d '(\{.*\})'`)
	sendLine := regexp.MustCompile(`^\s*(?:go run \./cmd/sluice|bin/sluice|sluice) send (--user .*)$`)
	for _, file := range []string{"../../README.md", "../../docs/api.md"} {
		doc, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		// Join the README's continued shell lines.
		text := strings.ReplaceAll(string(doc), "\\\n", " ")
		for line := range strings.SplitSeq(text, "\n") {
			if m := payload.FindStringSubmatch(line); m != nil {
				var req struct {
					Type string                     `json:"type"`
					Data map[string]json.RawMessage `json:"data"`
				}
				if err := json.Unmarshal([]byte(m[1]), &req); err != nil {
					t.Fatalf("%s: example payload %s: %v", file, m[1], err)
				}
				code, body := call(t, "POST", n.httpURL+"/v1/notifications", m[1])
				var a struct {
					NotificationID string `json:"notification_id"`
				}
				if (code != 202 && code != 200) || json.Unmarshal(body, &a) != nil {
					t.Fatalf("%s: POST %s = %d %s", file, m[1], code, body)
				}
				if code == 202 { // 200: the same example (request_id) in another file
					all = append(all, sent{a.NotificationID, req.Type, req.Data})
				}
			}
			if m := sendLine.FindStringSubmatch(line); m != nil && file == "../../README.md" {
				args, _, _ := strings.Cut(m[1], "#")
				fields := strings.Fields(args)
				code, out, errOut := runCLI(t, env, append([]string{"send"}, fields...)...)
				if code != 0 {
					t.Fatalf("sluice send %s = %d %s", args, code, errOut)
				}
				data := map[string]json.RawMessage{}
				typ := ""
				for i := 0; i+1 < len(fields); i++ {
					switch fields[i] {
					case "--type":
						typ = fields[i+1]
					case "--data":
						k, v, _ := strings.Cut(fields[i+1], "=")
						data[k], _ = json.Marshal(v)
					}
				}
				all = append(all, sent{strings.TrimSpace(out), typ, data})
			}
		}
	}
	if len(all) < 2 {
		t.Fatalf("found %d notification examples in the README and docs/api.md; the patterns look wrong", len(all))
	}
	for _, s := range all {
		tpl, ok := notify.DefaultTemplate(s.typ)
		if !ok {
			t.Fatalf("example type %q has no shipped template", s.typ)
		}
		var items []struct{ Channel, Subject, Body string }
		enginetest.EventuallyNil(t, 20*time.Second, "outbox items of "+s.id, func() error {
			_, body := call(t, "GET", n.httpURL+"/v1/outbox?limit=50", "")
			var page struct {
				Items []struct {
					NotificationID string `json:"notification_id"`
					Channel        string `json:"channel"`
					Subject        string `json:"subject"`
					Body           string `json:"body"`
				} `json:"items"`
			}
			_ = json.Unmarshal(body, &page)
			items = items[:0]
			for _, it := range page.Items {
				if it.NotificationID == s.id {
					items = append(items, struct{ Channel, Subject, Body string }{it.Channel, it.Subject, it.Body})
				}
			}
			return enginetest.State(len(items) > 0, "%s", string(body))
		})
		for _, it := range items {
			c, _ := tpl.Content(notify.Channel(it.Channel), "en")
			for _, part := range []struct{ text, got string }{{c.Subject, it.Subject}, {c.Body, it.Body}} {
				if missing := notify.Missing(part.text, s.data); len(missing) > 0 {
					t.Errorf("%s example leaves %v of %q empty; pass them in its data", s.typ, missing, part.text)
				}
				for _, p := range notify.Placeholders(part.text) {
					if _, given := s.data[p.Name]; !given {
						t.Errorf("%s example does not pass %q, which its template uses (%q)", s.typ, p.Name, part.text)
					}
				}
				if want := notify.Render(part.text, s.data); part.got != want || strings.HasSuffix(want, ": ") {
					t.Errorf("%s on %s rendered %q; want %q", s.typ, it.Channel, part.got, want)
				}
			}
		}
	}
}

// TestReadmeCommandTableMatchesCLI: the README's command table and the
// CLI's command table name the same commands and subcommands, both ways:
// a row "`sluice links list\|get\|...`" per command, its subcommands the
// words joined by "\|" after the command's name.
func TestReadmeCommandTableMatchesCLI(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "| command | what it does |")
	if !ok {
		t.Fatal("README.md has no command table (| command | what it does |)")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	row := regexp.MustCompile("^\\| `sluice ([a-z-]+)((?: [a-z-]+(?:\\\\\\|[a-z-]+)*)?)")
	readme := map[string][]string{}
	for line := range strings.SplitSeq(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		m := row.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("README command row %q does not start with `sluice COMMAND", line)
			continue
		}
		name, subs := m[1], strings.TrimSpace(m[2])
		if _, dup := readme[name]; dup {
			t.Errorf("README names sluice %s twice", name)
		}
		readme[name] = nil
		if c, ok := commands[name]; ok && c.subs != nil {
			readme[name] = strings.Split(subs, `\|`)
		}
	}
	for name, c := range commands {
		subs, ok := readme[name]
		if !ok {
			t.Errorf("sluice %s is not in the README's command table", name)
			continue
		}
		for sub := range c.subs {
			if !slices.Contains(subs, sub) {
				t.Errorf("README's row of sluice %s does not name its subcommand %s (it names %q)", name, sub, subs)
			}
		}
		for _, sub := range subs {
			if _, ok := c.subs[sub]; !ok {
				t.Errorf("README names sluice %s %s, which the CLI does not have", name, sub)
			}
		}
	}
	for name := range readme {
		if _, ok := commands[name]; !ok && name != "help" {
			t.Errorf("README names sluice %s, which the CLI does not have", name)
		}
	}
}
