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

// errRefused makes `sluice check` exit 1 when the check is refused, so
// scripts can branch on it.
var errRefused = errors.New("refused")

// runCheck is `sluice check --policy free KEY [KEY...]`: it checks (and
// consumes) the keys on a running server, together and atomically, and
// prints the decision.
func runCheck(ctx context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	policy := fs.String("policy", "", "policy to check the keys against (required)")
	cost := fs.Int64("cost", 1, "units each key consumes")
	newClient := clientFlags(fs, env, "API key with the ratelimit:check scope")
	setUsage(fs, "check --policy NAME [--cost N] KEY [KEY...]",
		"Checks and consumes KEY under the policy on a running server; several keys are checked atomically. Exits 1 when refused,\n"+
			"2 for an error answer (an unknown policy, a bad key, any other 4xx, a 5xx) or no answer.")
	keys, err := parseFlags(env.stdout, fs, args)
	if err != nil {
		return err
	}
	if *policy == "" || len(keys) == 0 {
		fs.Usage()
		return errors.New("--policy and at least one key are required")
	}
	c := newClient()
	reqs := make([]client.CheckRequest, len(keys))
	for i, k := range keys {
		reqs[i] = client.CheckRequest{Policy: *policy, Key: k, Cost: *cost}
	}
	res, err := c.CheckMulti(ctx, reqs)
	if err != nil {
		// Only a refused check is a refusal: an unknown policy, a bad key,
		// any other 4xx and every 5xx are errors.
		return &checkError{err}
	}
	err = showLines(env, fs, res, func(w io.Writer) {
		for i, d := range res.Results {
			printDecision(w, keys[i], *policy, d)
		}
	})
	if err != nil {
		return err
	}
	if !res.Allowed {
		return fmt.Errorf("%w: retry after %v", errRefused, res.RetryAfter())
	}
	return nil
}

// checkError is an error answer to `sluice check` (or no answer): it exits
// 2 whatever the status, where other commands read a 4xx as a refusal.
type checkError struct{ err error }

func (e *checkError) Error() string { return e.err.Error() }
func (e *checkError) Unwrap() error { return e.err }

func printDecision(w io.Writer, key, policy string, d client.Decision) {
	verdict := "allowed"
	if !d.Allowed {
		verdict = "refused"
	}
	if d.WouldRefuse {
		verdict += " (would refuse)"
	}
	fmt.Fprintf(w, "%s\t%s\t%s\tremaining %d/%d\treset in %v", verdict, policy, key, d.Remaining, d.Limit,
		time.Duration(d.ResetAfterMS)*time.Millisecond)
	if !d.Allowed {
		fmt.Fprintf(w, "\tretry after %v\tdecided by %s", d.RetryAfter(), d.DecidedBy)
	}
	fmt.Fprintln(w)
}
