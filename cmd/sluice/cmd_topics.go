package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/sluicehq/sluice/client"
)

// topicSubcommands are `sluice topics`: users subscribed by topic, the
// audiences of broadcasts (`sluice campaign send --topic`).
var topicSubcommands = map[string]subcommand{
	"subscribe":   {usage: "KEY USER...: subscribe users to a topic (up to 1,000 a call; users already subscribed are skipped)", run: topicsSubscribe},
	"unsubscribe": {usage: "KEY USER: unsubscribe a user from a topic", run: topicsUnsubscribe},
	"list":        {usage: ": list the topics with their subscriber counts", run: topicsList},
	"subscribers": {usage: "KEY [--limit N] [--cursor C]: list a topic's subscribers in user id order", run: topicsSubscribers},
}

// broadcastSubcommands are `sluice broadcasts`: follow and cancel the
// broadcasts `sluice campaign send --topic` starts.
var broadcastSubcommands = map[string]subcommand{
	"get":    {usage: "ID: show a broadcast's status and progress", run: broadcastsGet},
	"list":   {usage: "[--limit N] [--cursor C]: list broadcasts, newest first", run: broadcastsList},
	"cancel": {usage: "ID: cancel what a broadcast has not sent yet", run: broadcastsCancel},
}

func topicsSubscribe(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the notify:send scope")
	pos, err := parseFlags(env.stdout, fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		fs.Usage()
		return errors.New("want KEY and at least one USER")
	}
	users := pos[1:]
	n, err := newClient().Subscribe(ctx, pos[0], users)
	if err != nil {
		return err
	}
	return show(env, fs, map[string]any{"topic": pos[0], "added": n}, func(out io.Writer) {
		fmt.Fprintf(out, "subscribed %d new of %d to %s\n", n, len(users), pos[0])
	})
}

func topicsUnsubscribe(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the notify:send scope")
	pos, err := parseArgs(env, fs, args, "KEY", "USER")
	if err != nil {
		return err
	}
	if err := newClient().Unsubscribe(ctx, pos[0], pos[1]); err != nil {
		return err
	}
	return show(env, fs, map[string]any{"topic": pos[0], "user_id": pos[1]}, func(out io.Writer) {
		fmt.Fprintf(out, "unsubscribed %s from %s\n", pos[1], pos[0])
	})
}

func topicsList(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the notify:read scope")
	if _, err := parseArgs(env, fs, args); err != nil {
		return err
	}
	ts, err := newClient().Topics(ctx)
	if err != nil {
		return err
	}
	return show(env, fs, ts, func(out io.Writer) {
		row(out, "KEY", "SUBSCRIBERS", "CREATED")
		for _, t := range ts {
			row(out, t.Key, t.Subscribers, t.CreatedAt)
		}
	})
}

func topicsSubscribers(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the notify:read scope")
	limit := fs.Int("limit", 0, "subscribers per page, 1 to 200 (default 100)")
	cursor := fs.String("cursor", "", "the next_cursor of the previous page")
	pos, err := parseArgs(env, fs, args, "KEY")
	if err != nil {
		return err
	}
	users, next, err := newClient().TopicSubscribers(ctx, pos[0], *cursor, *limit)
	if err != nil {
		return err
	}
	return show(env, fs, map[string]any{"items": users, "next_cursor": next}, func(out io.Writer) {
		for _, u := range users {
			fmt.Fprintln(out, u)
		}
		if next != "" {
			fmt.Fprintf(out, "next page: --cursor %s\n", next)
		}
	})
}

// topicFlags are campaign send's flags of a broadcast to a topic.
func topicFlags(fs *flag.FlagSet) (topic, at, local, date *string) {
	topic = fs.String("topic", "", "send to a topic's subscribers instead of --users: the server sends one broadcast (its request id is the campaign id; follow it with sluice broadcasts get ID)")
	at = fs.String("at", "", "with --topic: send at this RFC 3339 time (default now)")
	local = fs.String("local", "", "with --topic and --date: send at this time of day (HH:MM) in each subscriber's timezone")
	date = fs.String("date", "", "with --local: the date (YYYY-MM-DD)")
	return topic, at, local, date
}

// campaignTopic is `sluice campaign send --topic KEY`: one broadcast the
// server sends to the topic's subscribers, at --at or at --local on
// --date in each subscriber's timezone, now without either.
func campaignTopic(ctx context.Context, env *environment, fs *flag.FlagSet, c *client.Client, typ, topic, campaign string,
	data map[string]any, at, local, date string) error {
	if campaign == "" {
		campaign = typ + "-" + topic + "-" + time.Now().UTC().Format("20060102")
	}
	req := client.BroadcastRequest{RequestID: campaign, Type: typ, To: client.BroadcastTo{Topic: topic}, Data: data}
	switch {
	case local != "" || date != "":
		if local == "" || date == "" {
			return errors.New("--local and --date go together")
		}
		req.Local = &client.LocalTime{Local: local, Date: date}
	case at != "":
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return fmt.Errorf("--at: %w", err)
		}
		req.SendAt = t
	}
	id, dup, err := c.SendBroadcast(ctx, req)
	if err != nil {
		return err
	}
	return show(env, fs, map[string]any{"broadcast_id": id, "duplicate": dup}, func(out io.Writer) {
		what := "scheduled"
		if dup {
			what = "already scheduled (same campaign id)"
		}
		fmt.Fprintf(out, "broadcast %s %s to topic %s; follow it with: sluice broadcasts get %s\n", id, what, req.To.Topic, id)
	})
}

func broadcastsGet(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the notify:read scope")
	pos, err := parseArgs(env, fs, args, "ID")
	if err != nil {
		return err
	}
	b, err := newClient().GetBroadcast(ctx, pos[0])
	if err != nil {
		return err
	}
	return show(env, fs, b, func(out io.Writer) { broadcastTable(out, []client.Broadcast{b}) })
}

func broadcastsList(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the notify:read scope")
	limit := fs.Int("limit", 0, "broadcasts per page, 1 to 200 (default 100)")
	cursor := fs.String("cursor", "", "the next_cursor of the previous page")
	if _, err := parseArgs(env, fs, args); err != nil {
		return err
	}
	bs, next, err := newClient().ListBroadcasts(ctx, *cursor, *limit)
	if err != nil {
		return err
	}
	return show(env, fs, map[string]any{"items": bs, "next_cursor": next}, func(out io.Writer) { broadcastTable(out, bs) })
}

func broadcastsCancel(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the notify:send scope")
	pos, err := parseArgs(env, fs, args, "ID")
	if err != nil {
		return err
	}
	b, err := newClient().CancelBroadcast(ctx, pos[0])
	if err != nil {
		return err
	}
	return show(env, fs, b, func(out io.Writer) { broadcastTable(out, []client.Broadcast{b}) })
}

func broadcastTable(out io.Writer, bs []client.Broadcast) {
	row(out, "ID", "TOPIC", "TYPE", "STATUS", "TARGETED", "ACCEPTED", "SKIPPED", "SEND AT")
	for _, b := range bs {
		row(out, b.ID, b.To.Topic, b.Type, b.Status, b.Targeted, b.Accepted, b.Skipped, b.SendAt)
	}
}
