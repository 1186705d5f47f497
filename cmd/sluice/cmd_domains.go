package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/client"
)

var domainSubcommands = map[string]subcommand{
	"add":    {usage: "DOMAIN [--fallback-url URL]: register a custom short domain (links made with `shorten --domain` answer on it)", run: domainsAdd},
	"list":   {usage: ": list your domains (every one with an admin key)", run: domainsList},
	"update": {usage: "DOMAIN --fallback-url URL: change where an unknown code on the domain redirects (\"\" for a 404)", run: domainsUpdate},
	"delete": {usage: "DOMAIN: remove a domain (delete its links first)", run: domainsDelete},
	"verify": {usage: "DOMAIN: look the domain's TXT record _sluice.DOMAIN up now; exits 1 while it does not hold the domain's verification_token", run: domainsVerify},
}

func domainsAdd(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the links:write scope")
	fallback := fs.String("fallback-url", "", "where an unknown code on the domain redirects (default: 404)")
	pos, err := parseArgs(env, fs, args, "DOMAIN")
	if err != nil {
		return err
	}
	d, err := newClient().CreateDomain(ctx, client.DomainRequest{Domain: pos[0], FallbackURL: *fallback})
	if err != nil {
		return err
	}
	if d.Verified {
		fmt.Fprintf(env.stderr, "point %s's DNS at this service; links made with --domain %s answer there\n", d.Domain, d.Domain)
	} else {
		fmt.Fprintf(env.stderr, "create a TXT record %s holding %s, then run: sluice domains verify %s\n", d.VerificationRecord, d.VerificationToken, d.Domain)
	}
	return show(env, fs, d, domainTable(d))
}

// domainsList is `domains list`.
var domainsList = listRun("links:write", (*client.Client).Domains, func(ds []client.Domain) func(io.Writer) { return domainTable(ds...) })

func domainsUpdate(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the links:write scope")
	fallback := fs.String("fallback-url", "", "where an unknown code on the domain redirects (required; \"\" for a 404)")
	pos, err := parseArgs(env, fs, args, "DOMAIN")
	if err != nil {
		return err
	}
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "fallback-url" })
	if !set {
		fs.Usage()
		return errors.New(`want --fallback-url URL ("" clears it)`)
	}
	d, err := newClient().UpdateDomain(ctx, pos[0], *fallback)
	if err != nil {
		return err
	}
	return show(env, fs, d, domainTable(d))
}

func domainsVerify(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the links:write scope")
	pos, err := parseArgs(env, fs, args, "DOMAIN")
	if err != nil {
		return err
	}
	d, err := newClient().VerifyDomain(ctx, pos[0])
	if err != nil {
		return err
	}
	if err := show(env, fs, d, domainTable(d)); err != nil {
		return err
	}
	if !d.Verified {
		return fmt.Errorf("%s is not verified: %s (the TXT record %s must hold %s): %w", d.Domain, d.VerificationError, d.VerificationRecord, d.VerificationToken, errRefused)
	}
	return nil
}

// domainsDelete is `domains delete`.
var domainsDelete = deleteRun("links:write", "DOMAIN", (*client.Client).DeleteDomain,
	func(domain string) string { return "deleted " + domain })
