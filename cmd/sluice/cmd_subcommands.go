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
	// own, when set, are the only flags help shows: the subcommand also
	// accepts every serve flag (keys).
	own []string
}

// runGroup runs the subcommand args[0] of group: each gets a flag set
// whose flags may come after its positional arguments, and help in the
// format of every command (setUsage).
func runGroup(ctx context.Context, env *environment, group string, subs map[string]subcommand, args []string) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) == 0 {
			groupUsage(env.stderr, group, subs)
			return errors.New("want a subcommand")
		}
		groupUsage(env.stdout, group, subs)
		return flag.ErrHelp
	}
	sub, ok := subs[args[0]]
	if !ok {
		groupUsage(env.stderr, group, subs)
		return fmt.Errorf("unknown subcommand %q", args[0])
	}
	fs := flag.NewFlagSet(group+" "+args[0], flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	synopsis, about, _ := strings.Cut(sub.usage, ": ")
	setUsage(fs, strings.TrimSpace(group+" "+args[0]+" "+synopsis), capitalize(about)+".", sub.own...)
	return sub.run(ctx, env, fs, args[1:])
}

// capitalize makes a summary a sentence.
func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func groupUsage(w io.Writer, group string, subs map[string]subcommand) {
	fmt.Fprintf(w, "Usage: sluice %s <subcommand> [flags]\n\nSubcommands:\n", group)
	names := make([]string, 0, len(subs))
	for name := range subs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		line := name + " " + subs[name].usage
		if strings.HasPrefix(subs[name].usage, ":") {
			line = name + subs[name].usage
		}
		fmt.Fprintf(w, "  %s\n", line)
	}
	fmt.Fprintf(w, "\n`sluice help %s <subcommand>` lists its flags.\n", group)
}

// printJSON writes v to w as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
