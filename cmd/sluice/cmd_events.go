package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/sluicehq/sluice/client"
)

var eventSubcommands = map[string]subcommand{
	"create":  {usage: "--url URL --events delivery.failed,delivery.dead [--disable-after 120h] [--disable-after-failures N]: subscribe a URL; prints the subscription with its secret", run: eventsCreate},
	"list":    {usage: ": list every subscription", run: eventsList},
	"get":     {usage: "ID: show one subscription", run: eventsGet},
	"delete":  {usage: "ID: delete a subscription", run: eventsDelete},
	"recover": {usage: "ID --since T [--all]: enable it again and resend the retained events since T (RFC 3339 or a duration back from now) it did not receive; --all: every one", run: eventsRecover},
	"send":    {usage: "--name N --user U [--data JSON] [--request-id R]: send a user's event to the workflows: prints the runs it started and resumed", run: eventsSend},
}

func eventsSend(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the notify:send scope")
	name := fs.String("name", "", "the event's name, e.g. cart.abandoned (required)")
	user := fs.String("user", "", "the user it happened to (required)")
	data := fs.String("data", "", `the event's data, a JSON object: '{"cart_id":"c1"}'`)
	reqID := fs.String("request-id", "", "idempotency key: the same value on every retry of one event")
	if _, err := parseArgs(env, fs, args); err != nil {
		return err
	}
	if *name == "" || *user == "" {
		return errors.New("--name and --user are required")
	}
	e := client.Event{Name: *name, UserID: *user, RequestID: *reqID}
	if *data != "" {
		if err := json.Unmarshal([]byte(*data), &e.Data); err != nil || e.Data == nil {
			return fmt.Errorf("--data: want a JSON object such as '{\"cart_id\":\"c1\"}'")
		}
	}
	a, err := newClient().SendEvent(ctx, e)
	if err != nil {
		return err
	}
	return show(env, fs, a, func(w io.Writer) {
		if a.Duplicate {
			fmt.Fprintf(w, "%s (a repeated request id: the first answer)\n", a.EventID)
		} else {
			fmt.Fprintln(w, a.EventID)
		}
		row(w, "runs started", a.RunsStarted)
		row(w, "runs resumed", a.RunsResumed)
	})
}

func eventsCreate(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env)
	url := fs.String("url", "", "http or https URL the events are posted to (required)")
	var events listFlag
	fs.Var(&events, "events", "event types, repeatable or comma-separated: notification.accepted, delivery.sent, delivery.delivered, delivery.failed, delivery.dead, link.clicked (required)")
	disableAfter := fs.String("disable-after", "", "disable once failing without a success this long (Go duration; 0s: never); default the server's")
	failures := fs.Int("disable-after-failures", -1, "disable after this many consecutive failed attempts (0: never); default the server's")
	if _, err := parseArgs(env, fs, args); err != nil {
		return err
	}
	if *url == "" || len(events) == 0 {
		return errors.New("--url and --events are required")
	}
	req := client.EventSubscriptionRequest{URL: *url, Events: events, DisableAfter: *disableAfter}
	if *failures >= 0 {
		req.DisableAfterFailures = failures
	}
	s, err := newClient().CreateEventSubscription(ctx, req)
	if err != nil {
		return err
	}
	fmt.Fprintln(env.stderr, "keep the secret: no later answer shows it")
	return show(env, fs, s, subscriptionTable(s))
}

func eventsList(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env)
	if _, err := parseArgs(env, fs, args); err != nil {
		return err
	}
	subs, err := newClient().EventSubscriptions(ctx)
	if err != nil {
		return err
	}
	return show(env, fs, subs, func(w io.Writer) {
		row(w, "ID", "STATUS", "FAILURES", "EVENTS", "CREATED", "URL")
		for _, s := range subs {
			row(w, s.ID, s.Status, s.Failures, s.Events, s.CreatedAt, s.URL)
		}
	})
}

func eventsGet(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env)
	pos, err := parseArgs(env, fs, args, "ID")
	if err != nil {
		return err
	}
	s, err := newClient().EventSubscription(ctx, pos[0])
	if err != nil {
		return err
	}
	return show(env, fs, s, subscriptionTable(s))
}

func eventsDelete(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env)
	pos, err := parseArgs(env, fs, args, "ID")
	if err != nil {
		return err
	}
	if err := newClient().DeleteEventSubscription(ctx, pos[0]); err != nil {
		return err
	}
	return showValue(env, fs, map[string]string{"deleted": pos[0]}, func(w io.Writer) { fmt.Fprintf(w, "deleted %s\n", pos[0]) })
}

func eventsRecover(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env)
	sinceFlag := fs.String("since", "", "resend the events generated at or after this: RFC 3339 or a duration back from now, e.g. 24h (required)")
	all := fs.Bool("all", false, "resend every event since --since, those the endpoint received too (receivers drop repeats by webhook-id)")
	pos, err := parseArgs(env, fs, args, "ID")
	if err != nil {
		return err
	}
	if *sinceFlag == "" {
		return errors.New("--since is required")
	}
	since, err := parseWhen(*sinceFlag, time.Now())
	if err != nil {
		return fmt.Errorf("--since: %w", err)
	}
	r, err := newClient().RecoverEventSubscription(ctx, pos[0], since, *all)
	if err != nil {
		return err
	}
	if r.More {
		fmt.Fprintf(env.stderr, "more events remain: run again with --since %s\n", r.Until)
	}
	return show(env, fs, r, func(w io.Writer) { fmt.Fprintf(w, "%s: %d events queued again\n", r.ID, r.Queued) })
}

var notificationSubcommands = map[string]subcommand{
	"get":    {usage: "ID: show the notification with its deliveries", run: notificationsGet},
	"cancel": {usage: "ID: cancel its deliveries not yet sent; shows the outcome and the notification", run: notificationsCancel},
}

func notificationsGet(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env)
	pos, err := parseArgs(env, fs, args, "ID")
	if err != nil {
		return err
	}
	n, err := newClient().Notification(ctx, pos[0])
	if err != nil {
		return err
	}
	return show(env, fs, n, notificationTable(n, ""))
}

func notificationsCancel(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env)
	pos, err := parseArgs(env, fs, args, "ID")
	if err != nil {
		return err
	}
	n, err := newClient().CancelNotification(ctx, pos[0])
	if err != nil {
		return err
	}
	return show(env, fs, n, notificationTable(n.NotificationRecord, n.Outcome))
}

// subscriptionTable shows one event subscription, a field a line.
func subscriptionTable(s client.EventSubscription) func(io.Writer) {
	return func(w io.Writer) {
		row(w, "id", s.ID)
		row(w, "url", s.URL)
		row(w, "events", s.Events)
		if s.Secret != "" {
			row(w, "secret", s.Secret)
		}
		row(w, "status", s.Status)
		row(w, "disable after", s.DisableAfter)
		row(w, "disable after failures", s.DisableAfterFailures)
		row(w, "created", s.CreatedAt)
		row(w, "failures", s.Failures)
		row(w, "last error", s.LastError)
		row(w, "last success", s.LastSuccessAt)
		row(w, "disabled", s.DisabledAt)
	}
}

// notificationTable shows a notification (and a cancel's outcome, when
// not empty) and its deliveries, one a row. Times the server left out
// (no expiry, no next attempt) show as "-".
func notificationTable(n client.NotificationRecord, outcome string) func(io.Writer) {
	return func(w io.Writer) {
		if outcome != "" {
			row(w, "outcome", outcome)
		}
		row(w, "id", n.ID)
		row(w, "user", n.UserID)
		row(w, "type", n.Type+" ("+n.Category+")")
		row(w, "request id", n.RequestID)
		row(w, "channels", n.Channels)
		row(w, "created", n.CreatedAt)
		row(w, "expires", n.ExpiresAt)
		fmt.Fprintln(w)
		row(w, "CHANNEL", "PROVIDER", "STATUS", "ATTEMPTS", "UPDATED", "NEXT ATTEMPT", "ERROR")
		for _, d := range n.Deliveries {
			row(w, d.Channel, d.Provider, d.Status, d.Attempts, d.UpdatedAt, d.NextAttemptAt, d.Error)
		}
	}
}
