package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/store"
)

// openStore opens and migrates the record store named by cfg.
func openStore(ctx context.Context, cfg config.Config, log *slog.Logger) (*store.DB, error) {
	opts := store.Options{URL: cfg.DatabaseURL, DataDir: cfg.DataDir, Logger: log, StatementTimeout: cfg.DatabaseStatementTimeout}
	if !cfg.Notify.GroupCommit {
		opts.MaxBatch = 1
	}
	db, err := store.Open(ctx, opts)
	if err != nil {
		return nil, err
	}
	if _, err := db.Migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return db, nil
}

func runMigrate(ctx context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	cfg, _, err := loadConfig(env, fs, args)
	if err != nil {
		return err
	}
	db, err := store.Open(ctx, store.Options{URL: cfg.DatabaseURL, DataDir: cfg.DataDir, Logger: newLogger(env.stderr, cfg)})
	if err != nil {
		return err
	}
	defer db.Close()
	applied, err := db.Migrate(ctx)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintf(env.stdout, "%s: up to date\n", db.Dialect())
	}
	for _, name := range applied {
		fmt.Fprintf(env.stdout, "%s: applied %s\n", db.Dialect(), name)
	}
	return nil
}

// scopeList is a repeatable, comma-separable --scope flag.
type scopeList []auth.Scope

func (s *scopeList) String() string { return fmt.Sprint(*s) }
func (s *scopeList) Set(v string) error {
	for part := range strings.SplitSeq(v, ",") {
		sc, err := auth.ParseScope(strings.TrimSpace(part))
		if err != nil {
			return err
		}
		*s = append(*s, sc)
	}
	return nil
}

func runKeys(ctx context.Context, env *environment, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return fmt.Errorf("want a subcommand: keys create --scope SCOPE [--name NAME] | keys list | keys revoke ID")
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("keys "+sub, flag.ContinueOnError)
	var scopes scopeList
	var name string
	if sub == "create" {
		fs.Var(&scopes, "scope", "scope to grant (repeat or comma-separate): admin, ratelimit:check, notify:send, notify:read, links:write")
		fs.StringVar(&name, "name", "", "a name to recognise the key by")
	}
	cfg, rest, err := loadConfig(env, fs, args)
	if err != nil {
		return err
	}
	db, err := openStore(ctx, cfg, newLogger(env.stderr, cfg))
	if err != nil {
		return err
	}
	defer db.Close()
	switch sub {
	case "create":
		if len(scopes) == 0 {
			return fmt.Errorf("--scope is required (for example --scope admin)")
		}
		if name == "" {
			name = "cli-" + time.Now().UTC().Format("20060102-150405")
		}
		secret, key, err := auth.NewKey(name, scopes, time.Now(), nil)
		if err != nil {
			return err
		}
		if err := db.CreateAPIKey(ctx, key); err != nil {
			return err
		}
		fmt.Fprintf(env.stderr, "created key %s (%s) with scopes %v; the secret below is shown once:\n", key.ID, key.Name, key.Scopes)
		fmt.Fprintln(env.stdout, secret)
		return nil
	case "list":
		keys, err := db.ListAPIKeys(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tPREFIX\tSCOPES\tCREATED\tREVOKED")
		for _, k := range keys {
			revoked := "-"
			if !k.RevokedAt.IsZero() {
				revoked = k.RevokedAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s…\t%v\t%s\t%s\n", k.ID, k.Name, k.Prefix, k.Scopes, k.CreatedAt.UTC().Format(time.RFC3339), revoked)
		}
		return tw.Flush()
	case "revoke":
		if len(rest) != 1 {
			return fmt.Errorf("want exactly one key id: keys revoke ID")
		}
		if err := db.RevokeAPIKey(ctx, rest[0]); err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "revoked %s\n", rest[0])
		return nil
	default:
		return fmt.Errorf("unknown keys subcommand %q (want create, list or revoke)", sub)
	}
}
