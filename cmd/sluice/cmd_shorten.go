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

// runShorten is `sluice shorten URL`: it asks a running server for a short
// link and prints it.
func runShorten(ctx context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("shorten", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	newClient := clientFlags(fs, env, "API key with the links:write scope")
	slug := fs.String("slug", "", "custom code instead of a generated one")
	domain := fs.String("domain", "", "a custom domain you registered (`sluice domains add`): the link answers on it")
	expiresIn := fs.Duration("expires-in", 0, "expire the link after this long (e.g. 72h); 0: never")
	maxVisits := fs.Int64("max-visits", 0, "human visits the link lets through (1: a one-time link); 0: no limit")
	fallback := fs.String("fallback-url", "", "where the link redirects once expired or used up (default: the server's links.fallback_url, else 410)")
	clickIDs := fs.Bool("click-ids", false, "append a signed click id (sluice_cid) to the target on each human redirect, for `sluice links convert`")
	verbose := fs.Bool("v", false, "print the code, target and expiry too")
	setUsage(fs, "shorten [flags] URL", "Prints the short URL of URL, made by a running server (--json: the link as the API answers it).")
	pos, err := parseArgs(env, fs, args, "URL")
	if err != nil {
		return err
	}
	req := client.LinkRequest{URL: pos[0], Slug: *slug, Domain: *domain, MaxVisits: *maxVisits, FallbackURL: *fallback, ClickIDs: *clickIDs}
	if *maxVisits < 0 {
		return errors.New("--max-visits must not be negative")
	}
	if *expiresIn < 0 {
		return errors.New("--expires-in must not be negative")
	}
	if *expiresIn > 0 {
		t := time.Now().Add(*expiresIn).UTC()
		req.ExpiresAt = &t
	}
	l, err := newClient().Shorten(ctx, req)
	if err != nil {
		return err
	}
	if err := show(env, fs, l, func(w io.Writer) { fmt.Fprintln(w, l.ShortURL) }); err != nil {
		return err
	}
	if *verbose && !wantJSON(fs) {
		exp := "never"
		if l.ExpiresAt != nil {
			exp = l.ExpiresAt.Format(time.RFC3339)
		}
		fmt.Fprintf(env.stderr, "code %s -> %s (expires %s)\n", l.Code, l.URL, exp)
		if l.MaxVisits != nil {
			fmt.Fprintf(env.stderr, "max visits %d\n", *l.MaxVisits)
		}
	}
	return nil
}
