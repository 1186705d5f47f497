package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/client"
)

var inboxSubcommands = map[string]subcommand{
	"list":          {usage: "USER [--limit N] [--cursor C] [--archived]: list a page of the inbox, newest first", run: inboxList},
	"read":          {usage: "USER MESSAGE_ID: mark a message read", run: inboxMark(client.InboxRead)},
	"unread":        {usage: "USER MESSAGE_ID: mark a message unread", run: inboxMark(client.InboxUnread)},
	"archive":       {usage: "USER MESSAGE_ID: archive a message (and mark it read)", run: inboxMark(client.InboxArchive)},
	"read-all":      {usage: "USER: mark every message read", run: inboxReadAll},
	"token":         {usage: "USER [--ttl 24h] [-v]: mint a token that opens the user's inbox; prints the token (-v: the page URL and expiry too)", run: inboxTokenCmd},
	"revoke-tokens": {usage: "USER: revoke every inbox token of the user minted so far (every node within 10s)", run: inboxRevoke},
}

func inboxList(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env)
	limit := fs.Int("limit", 0, "messages per page, 1 to 200 (default 50)")
	cursor := fs.String("cursor", "", "the next_cursor of the previous page")
	archived := fs.Bool("archived", false, "list the archived messages instead")
	pos, err := parseArgs(env, fs, args, "USER")
	if err != nil {
		return err
	}
	p, err := newClient().Inbox(ctx, pos[0], client.InboxQuery{Limit: *limit, Cursor: *cursor, Archived: *archived})
	if err != nil {
		return err
	}
	err = show(env, fs, p, func(w io.Writer) {
		fmt.Fprintf(w, "%d unread\n", p.Unread)
		row(w, "ID", "READ", "TYPE", "CREATED", "SUBJECT")
		for _, m := range p.Items {
			row(w, m.ID, m.Read, m.Type, m.CreatedAt, m.Subject)
		}
	})
	if err != nil {
		return err
	}
	nextPage(env, fs, p.NextCursor)
	return nil
}

func inboxMark(a client.InboxAction) func(context.Context, *environment, *flag.FlagSet, []string) error {
	return func(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
		newClient := clientFlags(fs, env)
		pos, err := parseArgs(env, fs, args, "USER", "MESSAGE_ID")
		if err != nil {
			return err
		}
		m, unread, err := newClient().MarkInboxMessage(ctx, pos[0], pos[1], a)
		if err != nil {
			return err
		}
		return show(env, fs, m, func(w io.Writer) { fmt.Fprintf(w, "unread %d\n", unread) })
	}
}

func inboxReadAll(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env)
	pos, err := parseArgs(env, fs, args, "USER")
	if err != nil {
		return err
	}
	changed, unread, err := newClient().ReadAllInbox(ctx, pos[0])
	if err != nil {
		return err
	}
	return show(env, fs, map[string]int{"changed": changed, "unread": unread}, func(w io.Writer) {
		fmt.Fprintf(w, "changed %d, unread %d\n", changed, unread)
	})
}

func inboxTokenCmd(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env)
	ttl := fs.Duration("ttl", 0, "the token's lifetime, 1m to 8784h (default the server's 24h)")
	verbose := fs.Bool("v", false, "print the inbox page's URL and the expiry too")
	pos, err := parseArgs(env, fs, args, "USER")
	if err != nil {
		return err
	}
	t, err := newClient().InboxToken(ctx, pos[0], *ttl)
	if err != nil {
		return err
	}
	return show(env, fs, t, func(w io.Writer) {
		fmt.Fprintln(w, t.Token)
		if *verbose {
			fmt.Fprintf(env.stderr, "%s (expires %s)\n", t.URL, t.ExpiresAt.Format("2006-01-02T15:04:05Z07:00"))
		}
	})
}

func inboxRevoke(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env)
	pos, err := parseArgs(env, fs, args, "USER")
	if err != nil {
		return err
	}
	if err := newClient().RevokeInboxTokens(ctx, pos[0]); err != nil {
		return err
	}
	return showValue(env, fs, map[string]string{"revoked": pos[0]}, func(io.Writer) {
		fmt.Fprintf(env.stderr, "revoked every inbox token of %s\n", pos[0])
	})
}
