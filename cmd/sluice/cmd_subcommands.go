package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// subcommand is one verb of a command group such as `sluice links`.
type subcommand struct {
	usage string // arguments and summary, e.g. "CODE --file rules.json: replace the link's rules"
	run   func(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error
}

// runGroup runs the subcommand args[0] of group: each gets a flag set
// with --server and --api-key, whose flags may come after its positional
// arguments.
func runGroup(ctx context.Context, env *environment, group string, subs map[string]subcommand, args []string) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		groupUsage(env.stderr, group, subs)
		if len(args) == 0 {
			return errors.New("want a subcommand")
		}
		return flag.ErrHelp
	}
	sub, ok := subs[args[0]]
	if !ok {
		groupUsage(env.stderr, group, subs)
		return fmt.Errorf("unknown subcommand %q", args[0])
	}
	fs := flag.NewFlagSet(group+" "+args[0], flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprintf(env.stderr, "Usage: sluice %s %s %s\n\nFlags:\n", group, args[0], sub.usage)
		fs.PrintDefaults()
	}
	return sub.run(ctx, env, fs, args[1:])
}

func groupUsage(w io.Writer, group string, subs map[string]subcommand) {
	fmt.Fprintf(w, "Usage: sluice %s <subcommand> [flags]\n\nSubcommands:\n", group)
	names := make([]string, 0, len(subs))
	for name := range subs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %s %s\n", name, subs[name].usage)
	}
	fmt.Fprintf(w, "\n`sluice %s <subcommand> -h` lists its flags.\n", group)
}

// parseArgs parses args (flags before or after the positional ones) and
// checks that exactly the named positional arguments are given.
func parseArgs(fs *flag.FlagSet, args []string, names ...string) ([]string, error) {
	if err := fs.Parse(interleaved(fs, args)); err != nil {
		return nil, err
	}
	if fs.NArg() != len(names) {
		fs.Usage()
		if len(names) == 0 {
			return nil, errors.New("want no arguments")
		}
		return nil, fmt.Errorf("want %s", strings.Join(names, " "))
	}
	return fs.Args(), nil
}

// printJSON writes v to w as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
