package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/client"
)

// policySubcommands are `sluice policies`: the rate limit policies in
// force, from the config and the database.
var policySubcommands = map[string]subcommand{
	"list":   {usage: ": list every policy in force, with where it comes from", run: policiesList},
	"get":    {usage: "NAME: show one policy", run: policiesGet},
	"put":    {usage: "NAME [--file policy.json] [--algorithm A --limit N --period P ...]: create or replace a stored policy (flags override the file's fields)", run: policiesPut},
	"delete": {usage: "NAME: delete a stored policy", run: policiesDelete},
}

func policyRow(w io.Writer, p client.Policy) {
	row(w, p.Name, p.Algorithm, p.Limit, p.Period, p.Burst, p.Mode, p.Source, p.Description)
}

const policyHeader = "NAME\tALGORITHM\tLIMIT\tPERIOD\tBURST\tMODE\tSOURCE\tDESCRIPTION\n"

// policiesList is `policies list`.
var policiesList = listRun("ratelimit:check", (*client.Client).Policies, func(ps []client.Policy) func(io.Writer) {
	return func(w io.Writer) {
		io.WriteString(w, policyHeader)
		for _, p := range ps {
			policyRow(w, p)
		}
	}
})

// policiesGet is `policies get`.
var policiesGet = getRun("ratelimit:check", "NAME", (*client.Client).GetPolicy, policyTable)

// policyTable shows one policy, a field a line.
func policyTable(p client.Policy) func(io.Writer) {
	return func(w io.Writer) {
		row(w, "name", p.Name)
		row(w, "algorithm", p.Algorithm)
		row(w, "limit", p.Limit)
		row(w, "period", p.Period)
		row(w, "burst", p.Burst)
		row(w, "mode", p.Mode)
		row(w, "burst over", p.BurstOver)
		row(w, "on store failure", p.OnStoreFailure)
		row(w, "sync", p.Sync)
		row(w, "sync interval", p.SyncInterval)
		row(w, "max debt", p.MaxDebt)
		row(w, "description", p.Description)
		row(w, "source", p.Source)
	}
}

// maxPolicyFile bounds a policy file.
const maxPolicyFile = 64 << 10

func policiesPut(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the admin scope")
	file := fs.String("file", "", "JSON file of the policy, as PUT /v1/ratelimit/policies/{name} takes or `policies get --json` prints (- reads stdin)")
	algorithm := fs.String("algorithm", "", "token_bucket, gcra, fixed_window, sliding_window_log, sliding_window_counter or concurrency")
	limit := fs.Int64("limit", 0, "requests (units) allowed per period")
	period := fs.String("period", "", "the period, e.g. 1m or 1d")
	burst := fs.Int64("burst", 0, "the bucket's size, for token_bucket and gcra (default the limit)")
	mode := fs.String("mode", "", "hard (refuse), soft (admit --burst-over more, flagged) or shadow (refuse nothing, count what hard would refuse); default hard")
	onFailure := fs.String("on-store-failure", "", "while the counter store is down: open (decide on a local limiter) or closed (refuse)")
	description := fs.String("description", "", "what the policy is for")
	pos, err := parseArgs(env, fs, args, "NAME")
	if err != nil {
		return err
	}
	var p client.Policy
	if *file != "" {
		raw, err := readInput(*file, maxPolicyFile)
		if err != nil {
			return err
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return fmt.Errorf("%s: %w", *file, err)
		}
		if p.Name != "" && p.Name != pos[0] {
			return fmt.Errorf("%s: the file is policy %q, not %q", *file, p.Name, pos[0])
		}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for name, apply := range map[string]func(){
		"algorithm": func() { p.Algorithm = *algorithm }, "limit": func() { p.Limit = *limit },
		"period": func() { p.Period = *period }, "burst": func() { p.Burst = *burst }, "mode": func() { p.Mode = *mode },
		"on-store-failure": func() { p.OnStoreFailure = *onFailure }, "description": func() { p.Description = *description },
	} {
		if set[name] {
			apply()
		}
	}
	if *file == "" && p.Algorithm == "" && p.Period == "" {
		return errors.New("--file, or at least --algorithm, --limit and --period, is required")
	}
	p.Name = pos[0]
	stored, err := newClient().PutPolicy(ctx, p)
	if err != nil {
		return err
	}
	return show(env, fs, stored, policyTable(stored))
}

// policiesDelete is `policies delete`.
var policiesDelete = deleteRun("admin", "NAME", (*client.Client).DeletePolicy,
	func(name string) string { return "deleted policy " + name })
