package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/client"
)

// runFunc is how a subcommand runs (subcommand.run).
type runFunc = func(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error

// The subcommands that make one API call with an API key of scope and
// no flags of their own are made by these three: listRun (no arguments),
// getRun (one, named arg in the usage) and deleteRun. Each prints the
// server's JSON with --json, else the table or line it is given.

// listRun is the run of a subcommand that takes no arguments and shows
// what list answers as table shows it.
func listRun[T any](scope string, list func(c *client.Client, ctx context.Context) (T, error), table func(T) func(io.Writer)) runFunc {
	return func(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
		newClient := clientFlags(fs, env, "API key with the "+scope+" scope")
		if _, err := parseArgs(env, fs, args); err != nil {
			return err
		}
		v, err := list(newClient(), ctx)
		if err != nil {
			return err
		}
		return show(env, fs, v, table(v))
	}
}

// getRun is the run of a subcommand that takes one argument, arg, and
// shows what get answers for it as table shows it.
func getRun[T any](scope, arg string, get func(c *client.Client, ctx context.Context, name string) (T, error), table func(T) func(io.Writer)) runFunc {
	return func(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
		newClient := clientFlags(fs, env, "API key with the "+scope+" scope")
		pos, err := parseArgs(env, fs, args, arg)
		if err != nil {
			return err
		}
		v, err := get(newClient(), ctx, pos[0])
		if err != nil {
			return err
		}
		return show(env, fs, v, table(v))
	}
}

// deleteRun is the run of a `delete NAME` subcommand, arg naming NAME in
// its usage: it calls del with NAME and prints {"deleted": NAME} with
// --json, else the line said returns.
func deleteRun(scope, arg string, del func(c *client.Client, ctx context.Context, name string) error, said func(name string) string) runFunc {
	return func(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
		newClient := clientFlags(fs, env, "API key with the "+scope+" scope")
		pos, err := parseArgs(env, fs, args, arg)
		if err != nil {
			return err
		}
		if err := del(newClient(), ctx, pos[0]); err != nil {
			return err
		}
		return showValue(env, fs, map[string]string{"deleted": pos[0]}, func(w io.Writer) { fmt.Fprintln(w, said(pos[0])) })
	}
}
