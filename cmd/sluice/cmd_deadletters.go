package main

import (
	"context"
	"flag"
	"fmt"
	"io"
)

// deadLetterSubcommands are `sluice dead-letters`: deliveries that failed
// for good, and sending them again.
var deadLetterSubcommands = map[string]subcommand{
	"list":   {usage: "[--limit N] [--cursor C]: list a page of dead letters, newest first", run: deadLettersList},
	"replay": {usage: "ID: send a dead letter's delivery again", run: deadLettersReplay},
}

func deadLettersList(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the notify:read scope")
	limit := fs.Int("limit", 0, "dead letters per page, 1 to 200 (default 50)")
	cursor := fs.String("cursor", "", "the next_cursor of the previous page")
	if _, err := parseArgs(env, fs, args); err != nil {
		return err
	}
	p, err := newClient().DeadLetters(ctx, *cursor, *limit)
	if err != nil {
		return err
	}
	err = show(env, fs, p, func(w io.Writer) {
		row(w, "ID", "NOTIFICATION", "CHANNEL", "USER", "ATTEMPTS", "CREATED", "REPLAYED", "ERROR")
		for _, d := range p.Items {
			row(w, d.ID, d.NotificationID, d.Channel, d.UserID, d.Attempts, d.CreatedAt, d.ReplayedAt, d.Error)
		}
	})
	if err != nil {
		return err
	}
	nextPage(env, fs, p.NextCursor)
	return nil
}

func deadLettersReplay(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the admin scope")
	pos, err := parseArgs(env, fs, args, "ID")
	if err != nil {
		return err
	}
	r, err := newClient().ReplayDeadLetter(ctx, pos[0])
	if err != nil {
		return err
	}
	return show(env, fs, r, func(w io.Writer) {
		fmt.Fprintf(w, "replayed %s: the %s delivery of %s is %s\n", r.ID, r.Channel, r.NotificationID, r.Status)
	})
}
