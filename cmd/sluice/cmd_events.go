package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/client"
)

var eventSubcommands = map[string]subcommand{
	"create":  {usage: "--url URL --events delivery.failed,delivery.dead [--disable-after 120h] [--disable-after-failures N]: subscribe a URL; prints the subscription with its secret", run: eventsCreate},
	"list":    {usage: ": print every subscription as JSON", run: eventsList},
	"get":     {usage: "ID: print one subscription as JSON", run: eventsGet},
	"delete":  {usage: "ID: delete a subscription", run: eventsDelete},
	"recover": {usage: "ID --since T [--all]: enable it again and resend the retained events since T (RFC 3339 or a duration back from now) it did not receive; --all: every one", run: eventsRecover},
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
	return printJSON(env.stdout, s)
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
	return printJSON(env.stdout, subs)
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
	return printJSON(env.stdout, s)
}

func eventsDelete(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env)
	pos, err := parseArgs(env, fs, args, "ID")
	if err != nil {
		return err
	}
	return newClient().DeleteEventSubscription(ctx, pos[0])
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
	return printJSON(env.stdout, r)
}

var notificationSubcommands = map[string]subcommand{
	"get":    {usage: "ID: print the notification with its deliveries as JSON", run: notificationsGet},
	"cancel": {usage: "ID: cancel its deliveries not yet sent; prints the outcome and the notification", run: notificationsCancel},
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
	return printJSON(env.stdout, n)
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
	fmt.Fprintln(env.stderr, n.Outcome)
	return printJSON(env.stdout, n)
}
