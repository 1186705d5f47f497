package shorten_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/shorten"
)

// TestRedirectDecidesInOneCall follows Service.Redirect through what it
// decides: a bot on a one-time link gets the bot page and spends nothing,
// the first human spends the visit, the next finds it used up; a link with
// click ids gives a human an id and a bot none; every hit on a live link is
// recorded, bots' included.
func TestRedirectDecidesInOneCall(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := t.Context()
	once := b.create(t, shorten.CreateRequest{URL: "https://example.com/once", LinkExtras: shorten.LinkExtras{MaxVisits: 1}})
	cid := b.create(t, shorten.CreateRequest{URL: "https://example.com/cid?a=1", LinkExtras: shorten.LinkExtras{ClickIDs: true}})
	const human = "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0"
	req := func(code string, head bool, agent string) shorten.Request {
		return shorten.Request{Host: "sho.rt", Code: code, Client: "198.51.100.7", Head: head, UserAgent: agent}
	}

	a, err := b.svc.Redirect(ctx, req(once.Code, true, human))
	if err != nil || !a.BotPage || a.Location != "" || !a.Found {
		t.Fatalf("HEAD of a one-time link = %+v, %v; want the bot page", a, err)
	}
	a, err = b.svc.Redirect(ctx, req(once.Code, false, human))
	if err != nil || a.BotPage || a.Location != "https://example.com/once" {
		t.Fatalf("first human visit = %+v, %v; want the target", a, err)
	}
	a, err = b.svc.Redirect(ctx, req(once.Code, false, human))
	if !errors.Is(err, shorten.ErrUsedUp) || !a.Found {
		t.Fatalf("second human visit = %+v, %v; want ErrUsedUp, found", a, err)
	}

	a, err = b.svc.Redirect(ctx, req(cid.Code, false, human))
	if err != nil || !strings.HasPrefix(a.Location, "https://example.com/cid?a=1&sluice_cid=") {
		t.Fatalf("human on a click-id link = %+v, %v; want the target with a click id", a, err)
	}
	a, err = b.svc.Redirect(ctx, req(cid.Code, false, "curl/8.0"))
	if err != nil || a.Location != "https://example.com/cid?a=1" {
		t.Fatalf("bot on a click-id link = %+v, %v; want the bare target", a, err)
	}

	a, err = b.svc.Redirect(ctx, req("nosuch1", false, human))
	if !errors.Is(err, shorten.ErrNotFound) || a.Found {
		t.Fatalf("unknown code = %+v, %v; want ErrNotFound, not found", a, err)
	}

	if err := b.svc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		code        string
		clicks, bot int64
	}{{once.Code, 1, 1}, {cid.Code, 1, 1}} {
		l, err := b.svc.Get(ctx, shorten.Caller{Admin: true}, c.code)
		if err != nil {
			t.Fatal(err)
		}
		if l.Clicks != c.clicks || l.BotHits != c.bot {
			t.Errorf("link %s: clicks %d, bot hits %d; want %d and %d", c.code, l.Clicks, l.BotHits, c.clicks, c.bot)
		}
	}
}
