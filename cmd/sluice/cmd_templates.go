package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"

	"github.com/sluicehq/sluice/client"
)

// templateSubcommands are `sluice templates`: the message templates of the
// notification types, shipped and custom.
var templateSubcommands = map[string]subcommand{
	"list":   {usage: ": list every notification type, shipped and custom, with its channels and locales and whether it is the shipped template", run: templatesList},
	"get":    {usage: "TYPE: show a type's template, per channel and locale", run: templatesGet},
	"put":    {usage: "TYPE --file template.json: replace a type's template, or define a new type (the file is the API's body, or what `templates get --json` prints)", run: templatesPut},
	"delete": {usage: "TYPE: put a shipped type back to its shipped template, or remove a custom type", run: templatesDelete},
}

// templatesList is `templates list`.
var templatesList = listRun("notify:read", (*client.Client).Templates, func(ts []client.TemplateSummary) func(io.Writer) {
	return func(w io.Writer) {
		row(w, "TYPE", "CATEGORY", "DEFAULT", "CHANNELS", "LOCALES", "UPDATED")
		for _, t := range ts {
			row(w, t.Type, t.Category, t.Default, t.Channels, t.Locales, t.UpdatedAt)
		}
	}
})

// templateTable shows a template: its type, then one row per channel and
// locale.
func templateTable(t client.Template) func(io.Writer) {
	return func(w io.Writer) {
		state := "custom"
		if t.Default {
			state = "shipped default"
		}
		fmt.Fprintf(w, "%s (%s, %s)", t.Type, t.Category, state)
		if !t.UpdatedAt.IsZero() {
			fmt.Fprintf(w, ", updated %s", cell(t.UpdatedAt))
		}
		fmt.Fprintln(w)
		for _, rule := range []struct {
			name string
			raw  json.RawMessage
		}{{"digest", t.Digest}, {"escalation", t.Escalation}} {
			if len(rule.raw) > 0 && string(rule.raw) != "null" {
				fmt.Fprintf(w, "%s: %s\n", rule.name, rule.raw)
			}
		}
		if t.TrackLinks {
			fmt.Fprintln(w, "track links: true")
		}
		fmt.Fprintln(w)
		row(w, "CHANNEL", "LOCALE", "SUBJECT", "BODY")
		for _, ch := range slices.Sorted(maps.Keys(t.Channels)) {
			for _, loc := range slices.Sorted(maps.Keys(t.Channels[ch])) {
				c := t.Channels[ch][loc]
				row(w, ch, loc, c.Subject, c.Body)
			}
		}
	}
}

// templatesGet is `templates get`.
var templatesGet = getRun("notify:read", "TYPE", (*client.Client).Template, templateTable)

// maxTemplateFile bounds a template file; the server takes at most 1 MiB.
const maxTemplateFile = 1 << 20

func templatesPut(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the admin scope")
	file := fs.String("file", "", "JSON file of the template: {\"category\": ..., \"channels\": {...}} as PUT /v1/templates/{type} takes, or what `templates get --json` prints (required; - reads stdin)")
	pos, err := parseArgs(env, fs, args, "TYPE")
	if err != nil {
		return err
	}
	raw, err := readInput(*file, maxTemplateFile)
	if err != nil {
		return err
	}
	var t client.Template
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return fmt.Errorf("%s: %w", *file, err)
	}
	if t.Type != "" && t.Type != pos[0] {
		return fmt.Errorf("%s: the file is the template of %q, not %q", *file, t.Type, pos[0])
	}
	t.Type = pos[0]
	stored, err := newClient().PutTemplate(ctx, t)
	if err != nil {
		return err
	}
	return show(env, fs, stored, templateTable(stored))
}

// openInput opens file for reading, or stdin for "-"; done closes it.
func openInput(file string) (in io.Reader, done func(), err error) {
	if file == "-" {
		return os.Stdin, func() {}, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, nil, err
	}
	return f, func() { f.Close() }, nil
}

// readInput reads file (- for stdin), at most limit bytes; file is
// required.
func readInput(file string, limit int64) ([]byte, error) {
	if file == "" {
		return nil, errors.New("--file is required")
	}
	in, done, err := openInput(file)
	if err != nil {
		return nil, err
	}
	defer done()
	raw, err := io.ReadAll(io.LimitReader(in, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(raw)) > limit {
		return nil, fmt.Errorf("%s: over %d bytes", file, limit)
	}
	return raw, nil
}

// templatesDelete is `templates delete`.
var templatesDelete = deleteRun("admin", "TYPE", (*client.Client).DeleteTemplate,
	func(typ string) string {
		return "deleted the stored template of " + typ + " (a shipped type is back to its shipped template)"
	})
