package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/client"
)

// clientFlags registers --server, --api-key, --json (cmd_output.go) and
// the TLS flags of an https:// server (--ca-file, --server-name,
// --insecure-skip-verify) and returns a constructor for the client they name (--server, else
// serverURL's rule; --api-key, else SLUICE_API_KEY). keyUsage names the
// scope the key needs. Bad TLS flags fail its first call.
func clientFlags(fs *flag.FlagSet, env *environment, keyUsage ...string) func() *client.Client {
	server := fs.String("server", "", serverUsage)
	key := fs.String("api-key", "", cmp.Or(strings.Join(keyUsage, ""), "API key")+" (default $SLUICE_API_KEY)")
	var ct clientTLS
	ct.register(fs, "", "an https:// --server", false)
	ans := registerJSON(fs)
	return func() *client.Client {
		c := ct.client(serverURL(env, *server), cmp.Or(*key, env.getenv("SLUICE_API_KEY")))
		ans.record(c)
		return c
	}
}

// dataFlags collects repeated --data key=value pairs.
type dataFlags map[string]any

func (d dataFlags) String() string { return fmt.Sprint(map[string]any(d)) }
func (d dataFlags) Type() string   { return "key=value" }
func (d dataFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, not %q", v)
	}
	d[k] = val
	return nil
}

// listFlag collects repeated or comma-separated values.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Type() string   { return "list" }
func (l *listFlag) Set(v string) error {
	for p := range strings.SplitSeq(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

func runSend(ctx context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	newClient := clientFlags(fs, env)
	user := fs.String("user", "", "user id (required)")
	typ := fs.String("type", "", "notification type, e.g. otp or order.shipped (required)")
	reqID := fs.String("request-id", "", "idempotency key: the same value on every retry of one event")
	expiresIn := fs.Duration("expires-in", 0, "drop the notification if not sent within this long")
	data := dataFlags{}
	fs.Var(data, "data", "template data as key=value (repeatable)")
	var channels listFlag
	fs.Var(&channels, "channel", "narrow to these channels (repeatable or comma-separated)")
	setUsage(fs, "send --user USER --type TYPE [--data key=value]... [flags]",
		"Sends one notification through a running server and prints its id (--json: the API's answer).")
	if _, err := parseArgs(env, fs, args); err != nil {
		return err
	}
	if *user == "" || *typ == "" {
		return errors.New("--user and --type are required")
	}
	n := client.Notification{RequestID: *reqID, UserID: *user, Type: *typ, Data: data, Channels: channels}
	if *expiresIn > 0 {
		t := time.Now().Add(*expiresIn).UTC()
		n.ExpiresAt = &t
	}
	a, err := newClient().Send(ctx, n)
	if err != nil {
		return err
	}
	if a.Duplicate {
		fmt.Fprintf(env.stderr, "request id %s was sent before; nothing new was sent\n", *reqID)
	}
	return show(env, fs, a, func(w io.Writer) { fmt.Fprintln(w, a.NotificationID) })
}

// campaignSubcommands are `sluice campaign`.
var campaignSubcommands = map[string]subcommand{
	"send": {usage: "--type TYPE (--users FILE.csv | --topic KEY [--at T | --local HH:MM --date D]) [--data key=value] [--campaign ID]: send a notification to every user of a CSV, with a progress bar, or have the server broadcast it to a topic", run: campaignSend},
}

func campaignSend(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env)
	typ := fs.String("type", "", "notification type, e.g. flash_sale (required)")
	users := fs.String("users", "", "CSV file of users (required; - reads stdin): one column of user ids (a first line user_id is skipped), or a header line naming user_id and other columns, which become each user's template data; a file of any other shape is refused before anything is sent")
	campaign := fs.String("campaign", "", "campaign id; request ids are <campaign>:<user>, so running the same campaign again sends nothing twice (default: type and today's date)")
	batch := fs.Int("batch", 500, "notifications per request (at most 1000)")
	workers := fs.Int("concurrency", 4, "requests in flight")
	expiresIn := fs.Duration("expires-in", 0, "drop notifications not sent within this long")
	data := dataFlags{}
	fs.Var(data, "data", "template data for everyone as key=value (repeatable)")
	topic, at, local, date := topicFlags(fs) // cmd_topics.go
	if _, err := parseArgs(env, fs, args); err != nil {
		return err
	}
	if *topic != "" && *typ != "" && *users == "" {
		return campaignTopic(ctx, env, fs, newClient(), *typ, *topic, *campaign, data, *at, *local, *date)
	}
	if *typ == "" || *users == "" {
		return errors.New("--type and --users are required")
	}
	if *batch < 1 || *batch > 1000 || *workers < 1 {
		return errors.New("--batch must be 1 to 1000 and --concurrency at least 1")
	}
	if *campaign == "" {
		*campaign = *typ + "-" + time.Now().UTC().Format("20060102")
	}
	in, done, err := openInput(*users)
	if err != nil {
		return err
	}
	defer done()
	ns, err := client.ReadCampaignCSV(in, *typ, *campaign, data)
	if err != nil {
		return fmt.Errorf("%s: %w", *users, err)
	}
	if *expiresIn > 0 {
		t := time.Now().Add(*expiresIn).UTC()
		for i := range ns {
			ns[i].ExpiresAt = &t
		}
	}
	return sendCampaign(ctx, env, fs, newClient(), ns, *batch, *workers)
}

// sendCampaign posts ns in batches with a progress bar on stderr and a
// summary at the end. Items refused by the server are counted, the first
// few reasons shown, and make the command a refusal (exit 1); a failed
// request fails the command.
func sendCampaign(ctx context.Context, env *environment, fs *flag.FlagSet, c *client.Client, ns []client.Notification, batch, workers int) error {
	var done atomic.Int64
	start := time.Now()
	stopBar := progressBar(env.stderr, int64(len(ns)), &done, start)
	res, sendErr := c.SendCampaign(ctx, ns, client.CampaignOptions{Batch: batch, Workers: workers,
		Progress: func(n int) { done.Store(int64(n)) }})
	stopBar()
	elapsed := time.Since(start)
	summary := struct {
		Total      int             `json:"total"`
		Done       int             `json:"done"`
		Accepted   int             `json:"accepted"`
		Duplicates int             `json:"duplicates"`
		Refused    int             `json:"refused"`
		Refusals   []*client.Error `json:"refusals,omitempty"`
		ElapsedMS  int64           `json:"elapsed_ms"`
	}{len(ns), res.Done, res.Accepted, res.Duplicates, res.Refused, res.Refusals, elapsed.Milliseconds()}
	if err := showValue(env, fs, summary, func(w io.Writer) {
		fmt.Fprintf(w, "sent %d of %d in %s (%.0f/s): %d accepted, %d duplicates, %d refused\n",
			res.Done, len(ns), elapsed.Round(time.Millisecond), float64(res.Done)/max(elapsed.Seconds(), 1e-9),
			res.Accepted, res.Duplicates, res.Refused)
		for _, r := range res.Refusals {
			fmt.Fprintln(w, "  refused:", r.Error())
		}
	}); err != nil {
		return err
	}
	if sendErr == nil && res.Refused > 0 {
		return fmt.Errorf("%w: %d of %d notifications", errRefused, res.Refused, len(ns))
	}
	return sendErr
}

// progressBar redraws a bar on w every 200ms until the returned stop is
// called, which draws it a last time.
func progressBar(w io.Writer, total int64, done *atomic.Int64, start time.Time) (stop func()) {
	draw := func() {
		n := done.Load()
		const width = 30
		filled := int(float64(width) * float64(n) / float64(max(total, 1)))
		rate := float64(n) / max(time.Since(start).Seconds(), 1e-9)
		fmt.Fprintf(w, "\r[%s%s] %d/%d %3.0f%% %.0f/s", strings.Repeat("#", filled), strings.Repeat(" ", width-filled),
			n, total, 100*float64(n)/float64(max(total, 1)), rate)
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				draw()
			}
		}
	})
	return func() {
		close(quit)
		wg.Wait()
		draw()
		fmt.Fprintln(w)
	}
}
