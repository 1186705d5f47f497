package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice/client"
)

var linkSubcommands = map[string]subcommand{
	"list":    {usage: "[--domain D] [--limit N] [--cursor C]: list a page of your links, newest first", run: linksList},
	"get":     {usage: "CODE [--domain D]: show the link with its statistics", run: linksGet},
	"delete":  {usage: "CODE [--domain D]: delete the link and its clicks", run: linksDelete},
	"rules":   {usage: "CODE --file rules.json [--domain D]: replace the link's redirect rules ({\"rules\": [...]} or a bare list; [] removes them)", run: linksRules},
	"stats":   {usage: "CODE [--domain D] [--from T] [--to T] [--by hour|day] [--group country|device|os|referrer|language|source|target]: show clicks and conversions", run: linksStats},
	"live":    {usage: "CODE [--domain D] [--after ID] [--count N]: print the link's hits as they are recorded, one line each (--json: one JSON object a line), until interrupted", run: linksLive},
	"qr":      {usage: "CODE --out FILE [--format png|svg] [--size 256] [--domain D]: write the link's QR code", run: linksQR},
	"convert": {usage: "--click-id ID --event sale [--value 30]: record a conversion against a click", run: linksConvert},
}

// linkTable shows links one a row.
func linkTable(links ...client.Link) func(io.Writer) {
	return func(w io.Writer) {
		row(w, "CODE", "DOMAIN", "SHORT URL", "CLICKS", "BOTS", "CREATED", "EXPIRES", "URL")
		for _, l := range links {
			row(w, l.Code, l.Domain, l.ShortURL, l.Clicks, l.BotHits, l.CreatedAt, l.ExpiresAt, l.URL)
		}
	}
}

func linksList(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the links:write scope")
	var domain optionalString
	fs.Var(&domain, "domain", "only the links on this custom domain (\"\": only those on none); default every link")
	limit := fs.Int("limit", 0, "links per page, 1 to 500 (default 50)")
	cursor := fs.String("cursor", "", "the next_cursor of the previous page")
	if _, err := parseArgs(env, fs, args); err != nil {
		return err
	}
	var (
		p   client.LinkPage
		err error
	)
	if domain.set {
		p, err = newClient().DomainLinks(ctx, domain.v, *limit, *cursor)
	} else {
		p, err = newClient().Links(ctx, *limit, *cursor)
	}
	if err != nil {
		return err
	}
	if err := show(env, fs, p, linkTable(p.Items...)); err != nil {
		return err
	}
	nextPage(env, fs, p.NextCursor)
	return nil
}

func linksGet(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the links:write scope")
	domain := fs.String("domain", "", "the link's custom domain, for a link on one")
	pos, err := parseArgs(env, fs, args, "CODE")
	if err != nil {
		return err
	}
	l, err := newClient().DomainLink(ctx, *domain, pos[0])
	if err != nil {
		return err
	}
	return show(env, fs, l, func(w io.Writer) {
		row(w, "code", l.Code)
		row(w, "domain", l.Domain)
		row(w, "short url", l.ShortURL)
		row(w, "url", l.URL)
		row(w, "created", l.CreatedAt)
		row(w, "expires", l.ExpiresAt)
		row(w, "clicks", l.Clicks)
		row(w, "bot hits", l.BotHits)
		row(w, "first click", l.FirstClickAt)
		if l.MaxVisits != nil {
			row(w, "visits", fmt.Sprintf("%d of %d", l.Visits, *l.MaxVisits))
		}
		row(w, "fallback url", l.FallbackURL)
		row(w, "click ids", l.ClickIDs)
		row(w, "conversions", l.Conversions)
		row(w, "rules", len(l.Rules))
		row(w, "notification", l.NotificationID)
	})
}

func linksDelete(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env, "API key with the links:write scope")
	domain := fs.String("domain", "", "the link's custom domain, for a link on one")
	pos, err := parseArgs(env, fs, args, "CODE")
	if err != nil {
		return err
	}
	if err := newClient().DeleteDomainLink(ctx, *domain, pos[0]); err != nil {
		return err
	}
	return showValue(env, fs, map[string]string{"deleted": pos[0], "domain": *domain}, func(w io.Writer) {
		fmt.Fprintf(w, "deleted %s\n", pos[0])
	})
}

// optionalString is a string flag that tells "not given" from "".
type optionalString struct {
	v   string
	set bool
}

func (o *optionalString) String() string { return o.v }
func (o *optionalString) Type() string   { return "string" }
func (o *optionalString) Set(v string) error {
	o.v, o.set = v, true
	return nil
}

// maxRulesFile bounds a rules file; the server takes at most 32 KiB.
const maxRulesFile = 1 << 20

func linksRules(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env)
	file := fs.String("file", "", "JSON file of the rules: {\"rules\": [...]} or a bare list (required; - reads stdin)")
	domain := fs.String("domain", "", "the link's custom domain, for a link on one")
	pos, err := parseArgs(env, fs, args, "CODE")
	if err != nil {
		return err
	}
	raw, err := readInput(*file, maxRulesFile)
	if err != nil {
		return err
	}
	rules, err := decodeRules(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", *file, err)
	}
	l, err := newClient().PutDomainLinkRules(ctx, *domain, pos[0], rules)
	if err != nil {
		return err
	}
	return show(env, fs, l, func(w io.Writer) {
		fmt.Fprintf(w, "%d rules on %s\n", len(l.Rules), l.Code)
		for i, r := range l.Rules {
			b, _ := json.Marshal(r)
			row(w, i+1, string(b))
		}
	})
}

// decodeRules reads {"rules": [...]} (the API's body) or a bare list,
// refusing unknown fields as the server does.
func decodeRules(raw []byte) ([]client.LinkRule, error) {
	raw = bytes.TrimSpace(raw)
	strict := func(v any) error {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		return dec.Decode(v)
	}
	if len(raw) > 0 && raw[0] == '[' {
		var rules []client.LinkRule
		return rules, strict(&rules)
	}
	var body struct {
		Rules *[]client.LinkRule `json:"rules"`
	}
	if err := strict(&body); err != nil {
		return nil, err
	}
	if body.Rules == nil {
		return nil, errors.New(`want {"rules": [...]} or a list of rules`)
	}
	return *body.Rules, nil
}

func linksStats(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env)
	from := fs.String("from", "", "start, RFC 3339 or a duration back from now (168h); default 7 days before --to")
	to := fs.String("to", "", "end, RFC 3339 or a duration back from now; default now")
	by := fs.String("by", "", "bucket: hour or day (default day)")
	group := fs.String("group", "", "dimension: country, device, os, referrer, language, source or target (default country)")
	domain := fs.String("domain", "", "the link's custom domain, for a link on one")
	pos, err := parseArgs(env, fs, args, "CODE")
	if err != nil {
		return err
	}
	q := client.StatsQuery{By: *by, Group: *group, Domain: *domain}
	now := time.Now()
	if q.From, err = parseWhen(*from, now); err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	if q.To, err = parseWhen(*to, now); err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	s, err := newClient().LinkStats(ctx, pos[0], q)
	if err != nil {
		return err
	}
	return show(env, fs, s, func(w io.Writer) {
		fmt.Fprintf(w, "%s from %s to %s: %d clicks, %d bot hits, %d conversions worth %g\n\n", s.Code, cell(s.From), cell(s.To),
			s.Totals.Humans, s.Totals.Bots, s.Totals.Conversions, s.Totals.ConversionValue)
		row(w, strings.ToUpper(s.By), "CLICKS", "BOTS", "CONVERSIONS", "VALUE")
		for _, b := range s.Series {
			row(w, b.Start, b.Humans, b.Bots, b.Conversions, b.ConversionValue)
		}
		fmt.Fprintln(w)
		row(w, strings.ToUpper(s.Group), "CLICKS", "BOTS")
		for _, g := range s.Groups {
			row(w, cmp.Or(g.Value, "(unknown)"), g.Humans, g.Bots)
		}
	})
}

// parseWhen reads an RFC 3339 time or a duration before now; "" is the
// zero time (the server's default).
func parseWhen(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("want an RFC 3339 time or a duration back from now, not %q", v)
	}
	return now.Add(-d), nil
}

func linksQR(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env)
	out := fs.String("out", "", "file to write the image to (required; - writes stdout)")
	format := fs.String("format", "", "png or svg (default png)")
	size := fs.Int("size", 0, "side in pixels, 64 to 2048 (default 256)")
	domain := fs.String("domain", "", "the link's custom domain, for a link on one")
	pos, err := parseArgs(env, fs, args, "CODE")
	if err != nil {
		return err
	}
	if *out == "" {
		return errors.New("--out is required")
	}
	img, ctype, err := newClient().LinkQR(ctx, pos[0], client.QROptions{Format: *format, Size: *size, Domain: *domain})
	if err != nil {
		return err
	}
	if *out == "-" {
		if wantJSON(fs) {
			return errors.New("--json and --out - both want stdout")
		}
		_, err = env.stdout.Write(img)
		return err
	}
	if err := os.WriteFile(*out, img, 0o644); err != nil {
		return err
	}
	return showValue(env, fs, map[string]any{"file": *out, "content_type": ctype, "bytes": len(img)}, func(w io.Writer) {
		fmt.Fprintf(w, "wrote %s (%s, %d bytes)\n", *out, ctype, len(img))
	})
}

func linksConvert(ctx context.Context, env *environment, fs *flag.FlagSet, args []string) error {
	newClient := clientFlags(fs, env)
	clickID := fs.String("click-id", "", "the sluice_cid the redirect appended to the target (required)")
	event := fs.String("event", "", "what happened, e.g. lead or sale (required)")
	value := fs.Float64("value", 0, "its worth, in a currency of your choosing")
	if _, err := parseArgs(env, fs, args); err != nil {
		return err
	}
	if *clickID == "" || *event == "" {
		return errors.New("--click-id and --event are required")
	}
	c, err := newClient().RecordConversion(ctx, client.ConversionRequest{ClickID: *clickID, Event: *event, Value: *value})
	if err != nil {
		return err
	}
	if c.Duplicate {
		fmt.Fprintf(env.stderr, "recorded before: %s for this click id is unchanged\n", c.Event)
	}
	return show(env, fs, c, func(w io.Writer) {
		row(w, "CLICK ID", "EVENT", "VALUE", "AT", "NOTIFICATION")
		row(w, c.ClickID, c.Event, c.Value, c.At, c.NotificationID)
	})
}
