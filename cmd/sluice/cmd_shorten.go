package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/client"
)

// runShorten is `sluice shorten URL`: it asks a running server for a short
// link and prints it.
func runShorten(ctx context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("shorten", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	server := fs.String("server", cmp.Or(env.getenv("SLUICE_SERVER"), client.DefaultServer), "Sluice server URL [SLUICE_SERVER]")
	apiKey := fs.String("api-key", env.getenv("SLUICE_API_KEY"), "API key with the links:write scope [SLUICE_API_KEY]")
	slug := fs.String("slug", "", "custom code instead of a generated one")
	expiresIn := fs.Duration("expires-in", 0, "expire the link after this long (e.g. 72h); 0: never")
	maxVisits := fs.Int64("max-visits", 0, "human visits the link lets through (1: a one-time link); 0: no limit")
	fallback := fs.String("fallback-url", "", "where the link redirects once expired or used up (default: the server's links.fallback_url, else 410)")
	clickIDs := fs.Bool("click-ids", false, "append a signed click id (sluice_cid) to the target on each human redirect, for `sluice links convert`")
	verbose := fs.Bool("v", false, "print the code, target and expiry too")
	var ct clientTLS
	ct.register(fs, "", "an https:// --server", false)
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "Usage: sluice shorten [flags] URL\n\nPrints the short URL of URL.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(interleaved(fs, args)); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("want exactly one URL")
	}
	req := client.LinkRequest{URL: fs.Arg(0), Slug: *slug, MaxVisits: *maxVisits, FallbackURL: *fallback, ClickIDs: *clickIDs}
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
	l, err := ct.client(*server, *apiKey).Shorten(ctx, req)
	if err != nil {
		return err
	}
	fmt.Fprintln(env.stdout, l.ShortURL)
	if *verbose {
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

// interleaved moves flags after the positional URL in front of it, so
// `sluice shorten URL --slug x` works as users expect.
func interleaved(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) > 1 && a[0] == '-' {
			flags = append(flags, a)
			name := a[1:]
			if len(name) > 0 && name[0] == '-' {
				name = name[1:]
			}
			if f := fs.Lookup(name); f != nil && !isBoolFlag(f) && i+1 < len(args) {
				i++
				flags = append(flags, args[i])
			}
			continue
		}
		pos = append(pos, a)
	}
	return append(flags, pos...)
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
