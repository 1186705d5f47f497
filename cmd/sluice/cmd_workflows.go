package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/sluicehq/sluice/client"
)

// workflowSubcommands are `sluice workflows`: the workflow definitions and
// their runs (events go in with `sluice events send`).
var workflowSubcommands = map[string]subcommand{
	"put":    {usage: "KEY --file workflow.json: save a workflow, or a new version of it (the file is the API's body, or what `workflows get --json` prints; - reads stdin)", run: workflowsPut},
	"get":    {usage: "KEY: show a workflow's current version and its steps", run: workflowsGet},
	"list":   {usage: ": list every workflow", run: workflowsList},
	"delete": {usage: "KEY: delete a workflow and cancel its runs not yet ended", run: workflowsDelete},
	"runs":   {usage: "KEY [--user U] [--status S] [--limit N] [--cursor C]: list a workflow's runs, newest first", run: workflowsRuns},
	"run":    {usage: "ID: show one run with the steps it ran", run: workflowsRun},
	"cancel": {usage: "KEY (--user U | --run R): cancel a user's runs of the workflow, or one run; prints the runs canceled", run: workflowsCancel},
}

// maxWorkflowFile bounds a workflow file; the server takes at most 64 KiB
// of definition.
const maxWorkflowFile = 1 << 20

func workflowsPut(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the admin scope")
	file := fs.String("file", "", `JSON file of the workflow: {"trigger": ..., "entry": ..., "steps": [...]} as PUT /v1/workflows/{key} takes, or what `+"`workflows get --json`"+` prints (required; - reads stdin)`)
	pos, err := parseArgs(env, fs, args, "KEY")
	if err != nil {
		return err
	}
	raw, err := readInput(*file, maxWorkflowFile)
	if err != nil {
		return err
	}
	def, err := workflowDefinition(raw, pos[0])
	if err != nil {
		return fmt.Errorf("%s: %w", *file, err)
	}
	w, created, err := newClient().PutWorkflow(ctx, pos[0], def)
	if err != nil {
		return err
	}
	return show(env, fs, w, func(out io.Writer) {
		what := "saved a new version of"
		if created {
			what = "created"
		}
		fmt.Fprintf(out, "%s %s (version %d)\n", what, w.Key, w.Version)
	})
}

// workflowDefinition is a file's definition as PUT takes it: what
// `workflows get --json` prints loses the fields the server sets (key,
// version and times), after a check that it is key's.
func workflowDefinition(raw []byte, key string) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, errors.New("want a JSON object")
	}
	if k, ok := m["key"]; ok {
		var s string
		if err := json.Unmarshal(k, &s); err != nil || s != key {
			return nil, fmt.Errorf("the file is the workflow %s, not %q", k, key)
		}
	}
	for _, f := range []string{"key", "version", "created_at", "updated_at"} {
		delete(m, f)
	}
	return json.Marshal(m)
}

func workflowsGet(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the notify:read scope")
	pos, err := parseArgs(env, fs, args, "KEY")
	if err != nil {
		return err
	}
	w, err := newClient().GetWorkflow(ctx, pos[0])
	if err != nil {
		return err
	}
	return show(env, fs, w, func(out io.Writer) {
		row(out, "key", w.Key)
		row(out, "version", w.Version)
		row(out, "trigger", w.Trigger.Event)
		if w.Entry != nil {
			row(out, "once per", w.Entry.OncePer)
		}
		row(out, "created", w.CreatedAt)
		row(out, "updated", w.UpdatedAt)
		fmt.Fprintln(out)
		row(out, "INDEX", "STEP")
		for i, s := range w.Steps {
			row(out, i, string(s))
		}
	})
}

func workflowsList(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the notify:read scope")
	if _, err := parseArgs(env, fs, args); err != nil {
		return err
	}
	ws, err := newClient().ListWorkflows(ctx)
	if err != nil {
		return err
	}
	return show(env, fs, ws, func(out io.Writer) {
		row(out, "KEY", "VERSION", "TRIGGER", "STEPS", "UPDATED")
		for _, w := range ws {
			row(out, w.Key, w.Version, w.Trigger.Event, len(w.Steps), w.UpdatedAt)
		}
	})
}

func workflowsDelete(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the admin scope")
	pos, err := parseArgs(env, fs, args, "KEY")
	if err != nil {
		return err
	}
	n, err := newClient().DeleteWorkflow(ctx, pos[0])
	if err != nil {
		return err
	}
	return show(env, fs, map[string]any{"key": pos[0], "runs_canceled": n}, func(out io.Writer) {
		fmt.Fprintf(out, "deleted %s; %d runs canceled\n", pos[0], n)
	})
}

func workflowsRuns(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the notify:read scope")
	user := fs.String("user", "", "only this user's runs")
	status := fs.String("status", "", "only runs in this status: running, waiting, completed, canceled or failed")
	limit := fs.Int("limit", 0, "runs per page, 1 to 200 (default 50)")
	cursor := fs.String("cursor", "", "the next_cursor of the previous page")
	pos, err := parseArgs(env, fs, args, "KEY")
	if err != nil {
		return err
	}
	runs, next, err := newClient().ListWorkflowRuns(ctx, client.RunQuery{Workflow: pos[0], UserID: *user, Status: *status,
		Cursor: *cursor, Limit: *limit})
	if err != nil {
		return err
	}
	err = show(env, fs, runs, func(out io.Writer) {
		row(out, "ID", "USER", "STATUS", "VERSION", "STEPS", "WAITING FOR", "CREATED", "UPDATED")
		for _, r := range runs {
			row(out, r.ID, r.UserID, r.Status, r.Version, len(r.Steps), waitingFor(r), r.CreatedAt, r.UpdatedAt)
		}
	})
	nextPage(env, fs, next)
	return err
}

// waitingFor shows what a run waits for: "order.placed until T" (a
// wait_for), "until T" (a wait), or "".
func waitingFor(r client.WorkflowRun) string {
	w := r.WaitingFor
	switch {
	case w == nil:
		return ""
	case w.Until.IsZero():
		return w.Event
	default:
		return strings.TrimSpace(w.Event + " until " + cell(w.Until))
	}
}

func workflowsRun(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the notify:read scope")
	pos, err := parseArgs(env, fs, args, "ID")
	if err != nil {
		return err
	}
	r, err := newClient().GetWorkflowRun(ctx, pos[0])
	if err != nil {
		return err
	}
	return show(env, fs, r, func(out io.Writer) {
		row(out, "id", r.ID)
		row(out, "workflow", fmt.Sprintf("%s (version %d)", r.Workflow, r.Version))
		row(out, "user", r.UserID)
		row(out, "status", r.Status)
		row(out, "waiting for", waitingFor(r))
		row(out, "data", strings.TrimSpace(string(r.Data)))
		row(out, "created", r.CreatedAt)
		row(out, "updated", r.UpdatedAt)
		fmt.Fprintln(out)
		row(out, "INDEX", "NAME", "KIND", "STATUS", "STARTED", "ENDED", "NOTIFICATION", "OUTCOME")
		for _, s := range r.Steps {
			row(out, s.Index, s.Name, s.Kind, s.Status, s.StartedAt, s.EndedAt, s.NotificationID, s.Outcome)
		}
	})
}

func workflowsCancel(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the notify:send scope")
	user := fs.String("user", "", "cancel every run of this user not yet ended")
	run := fs.String("run", "", "cancel this run")
	pos, err := parseArgs(env, fs, args, "KEY")
	if err != nil {
		return err
	}
	if (*user == "") == (*run == "") {
		return errors.New("want one of --user and --run")
	}
	ids, err := newClient().CancelWorkflowRuns(ctx, pos[0], *user, *run)
	if err != nil {
		return err
	}
	return show(env, fs, map[string]any{"canceled": ids}, func(out io.Writer) {
		fmt.Fprintf(out, "%d runs canceled\n", len(ids))
		for _, id := range ids {
			fmt.Fprintln(out, id)
		}
	})
}
