package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/client"
)

// blockSubcommands are `sluice blocks`: emergency blocks of the rate
// limiter, which refuse every check of a key until they expire.
var blockSubcommands = map[string]subcommand{
	"list":   {usage: ": list the blocks in force", run: blocksList},
	"add":    {usage: "KEY --duration 15m --reason R [--policy P] [--domain D]: refuse every check of KEY (under P only, with --policy) for the duration, on every node", run: blocksAdd},
	"delete": {usage: "KEY [--policy P] [--domain D]: lift the key's blocks (only that policy's or Envoy domain's, when given)", run: blocksDelete},
}

func blockRows(w io.Writer, bs ...client.Block) {
	row(w, "KEY", "POLICY", "DOMAIN", "CREATED", "EXPIRES", "REASON")
	for _, b := range bs {
		policy := b.Policy
		if policy == "" {
			policy = "(every)"
		}
		row(w, b.Key, policy, b.Domain, b.CreatedAt, b.ExpiresAt, b.Reason)
	}
}

// blocksList is `blocks list`.
var blocksList = listRun("admin", (*client.Client).Blocks, func(bs []client.Block) func(io.Writer) {
	return func(w io.Writer) { blockRows(w, bs...) }
})

func blocksAdd(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the admin scope")
	duration := fs.Duration("duration", 0, "how long the block lasts, e.g. 15m (required)")
	reason := fs.String("reason", "", "why, for whoever reads the block later")
	policy := fs.String("policy", "", "block the key under this policy only (default every policy)")
	domain := fs.String("domain", "", "the Envoy domain of an entry_key=entry_value KEY")
	pos, err := parseArgs(env, fs, args, "KEY")
	if err != nil {
		return err
	}
	if *duration <= 0 {
		return errors.New("--duration is required, e.g. 15m")
	}
	b, err := newClient().Block(ctx, client.BlockRequest{Key: pos[0], Policy: *policy, Domain: *domain, Duration: *duration, Reason: *reason})
	if err != nil {
		return err
	}
	return show(env, fs, b, func(w io.Writer) { blockRows(w, b) })
}

func blocksDelete(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the admin scope")
	var policy, domain optionalString
	fs.Var(&policy, "policy", "lift only the block under this policy (\"\": the block of every policy)")
	fs.Var(&domain, "domain", "lift only the block of this Envoy domain (\"\": those of none)")
	pos, err := parseArgs(env, fs, args, "KEY")
	if err != nil {
		return err
	}
	req := client.UnblockRequest{Key: pos[0]}
	if policy.set {
		req.Policy = &policy.v
	}
	if domain.set {
		req.Domain = &domain.v
	}
	if err := newClient().DeleteBlock(ctx, req); err != nil {
		return err
	}
	return showValue(env, fs, map[string]string{"deleted": pos[0]}, func(w io.Writer) { fmt.Fprintf(w, "lifted the blocks of %s\n", pos[0]) })
}
