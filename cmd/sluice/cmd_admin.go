package main

import (
	"cmp"
	"context"
	"errors"
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

// storeFlags are the settings of the commands that open the node's
// database, shown in their help (they accept every serve flag).
var storeFlags = []string{"config", "data-dir", "database-url", "log-format", "log-level"}

// loadConfigOnly is loadConfig for a command that takes flags and no
// arguments.
func loadConfigOnly(env *environment, fs *flag.FlagSet, args []string) (config.Config, error) {
	cfg, rest, err := loadConfig(env, fs, args)
	if err != nil {
		return config.Config{}, err
	}
	if len(rest) > 0 {
		fs.Usage()
		return config.Config{}, errors.New("want no arguments")
	}
	return cfg, nil
}

func runMigrate(ctx context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	setUsage(fs, "migrate [flags]", "Applies the pending migrations to the node's database (SQLite in --data-dir, or --database-url) and exits; serve does it at start too.", storeFlags...)
	cfg, err := loadConfigOnly(env, fs, args)
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

func (s *scopeList) Type() string { return "scope" }

// keySubcommands are `sluice keys`: they work on the node's database
// directly, so the first admin key can be made before the API answers.
var keySubcommands = map[string]subcommand{
	"create": {usage: "--scope SCOPE [--name NAME]: create an API key in the node's database and print its secret once", run: keysCreate, own: keyFlags("scope", "name")},
	"list":   {usage: ": list the API keys of the node's database", run: keysList, own: keyFlags()},
	"revoke": {usage: "ID: revoke an API key in the node's database", run: keysRevoke, own: keyFlags()},
}

func keyFlags(own ...string) []string { return append(own, storeFlags...) }

// openKeys loads the configuration and opens the node's database, checking
// that exactly the named positional arguments are given.
func openKeys(ctx context.Context, env *environment, fs *flag.FlagSet, args []string, names ...string) (*store.DB, []string, error) {
	cfg, rest, err := loadConfig(env, fs, args)
	if err != nil {
		return nil, nil, err
	}
	if len(rest) != len(names) {
		fs.Usage()
		return nil, nil, fmt.Errorf("want %s", cmp.Or(strings.Join(names, " "), "no arguments"))
	}
	db, err := openStore(ctx, cfg, newLogger(env.stderr, cfg))
	return db, rest, err
}

func keysCreate(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	var scopes scopeList
	fs.Var(&scopes, "scope", "scope to grant (repeat or comma-separate): admin, ratelimit:check, notify:send, notify:read, links:write (required)")
	name := fs.String("name", "", "a name to recognise the key by (default cli-<date>-<time>)")
	db, _, err := openKeys(ctx, env, fs, args)
	if err != nil {
		return err
	}
	defer db.Close()
	if len(scopes) == 0 {
		return fmt.Errorf("--scope is required (for example --scope admin)")
	}
	if *name == "" {
		*name = "cli-" + time.Now().UTC().Format("20060102-150405")
	}
	secret, key, err := auth.NewKey(*name, scopes, time.Now(), nil)
	if err != nil {
		return err
	}
	if err := db.CreateAPIKey(ctx, key); err != nil {
		return err
	}
	fmt.Fprintf(env.stderr, "created key %s (%s) with scopes %v; the secret below is shown once:\n", key.ID, key.Name, key.Scopes)
	fmt.Fprintln(env.stdout, secret)
	return nil
}

func keysList(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	db, _, err := openKeys(ctx, env, fs, args)
	if err != nil {
		return err
	}
	defer db.Close()
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
}

func keysRevoke(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	db, pos, err := openKeys(ctx, env, fs, args, "ID")
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.RevokeAPIKey(ctx, pos[0]); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "revoked %s\n", pos[0])
	return nil
}
