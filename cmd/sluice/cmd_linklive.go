package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/client"
)

// liveReconnect is how long links live waits before reopening a stream
// the server ended (as the stream's retry: suggests).
const liveReconnect = 2 * time.Second

// linksLive prints a link's hits as they are recorded, one a line (with
// --json one JSON object a line, as the stream sends it), until interrupted or --count hits; a stream the server ends (its
// node shutting down, the client too slow) is reopened after the last hit
// printed, so none is printed twice nor, within the server's replay
// window, missed.
func linksLive(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env)
	after := fs.String("after", "", "start after this hit id (a printed \"id\"), replaying the hits since that the server still keeps")
	count := fs.Int("count", 0, "stop after this many hits; 0: until interrupted")
	domain := fs.String("domain", "", "the link's custom domain, for a link on one")
	pos, err := parseArgs(env, fs, args, "CODE")
	if err != nil {
		return err
	}
	if *count < 0 {
		return errors.New("--count must not be negative")
	}
	c, last, printed := newClient(), *after, 0
	enc := json.NewEncoder(env.stdout)
	for {
		s, err := c.DomainLinkHits(ctx, *domain, pos[0], last)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for {
			h, err := s.Next()
			if err != nil {
				break
			}
			last = h.ID
			if err := printHit(env, enc, wantJSON(fs), h); err != nil {
				s.Close()
				return err
			}
			if printed++; *count > 0 && printed >= *count {
				s.Close()
				return nil
			}
		}
		s.Close()
		if ctx.Err() != nil {
			return nil
		}
		fmt.Fprintf(env.stderr, "the stream ended; reconnecting after hit %q\n", last)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(liveReconnect):
		}
	}
}

// printHit writes one hit: its JSON, or a line of its time, id, whether a
// person or a bot, and where it came from.
func printHit(env *environment, enc *json.Encoder, asJSON bool, h client.LinkHit) error {
	if asJSON {
		return enc.Encode(struct {
			ID string `json:"id"`
			client.LinkHit
		}{h.ID, h})
	}
	who := "human"
	if h.Bot {
		who = "bot:" + cell(h.BotReason)
	}
	_, err := fmt.Fprintf(env.stdout, "%s  %s  %s  country=%s device=%s os=%s source=%s referrer=%s language=%s target=%s\n",
		cell(h.At), h.ID, who, cell(h.Country), cell(h.Device), cell(h.OS), cell(h.Source), cell(h.Referrer), cell(h.Language), cell(h.Target))
	return err
}
