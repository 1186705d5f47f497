package rediscache

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/shorten"
)

// TestRulesRedirectFromRedis sets rules on one node and redirects the link
// on another whose database never saw it: the rules came with the link
// from Redis.
func TestRulesRedirectFromRedis(t *testing.T) {
	t.Parallel()
	shared := New(client(t), fmt.Sprintf("sluice-test:%d:", time.Now().UnixNano()))
	a, b := newNode(t, shared, false, nil), newNode(t, shared, false, nil)
	ctx := t.Context()
	l, err := a.Create(ctx, shorten.CreateRequest{URL: "https://example.com/plain"})
	if err != nil {
		t.Fatal(err)
	}
	rules := []shorten.Rule{{Name: "de", If: shorten.Conditions{Language: []string{"de"}}, URL: "https://example.de/"}}
	if _, err := a.SetRules(ctx, shorten.Caller{Admin: true}, l.Code, rules); err != nil {
		t.Fatalf("SetRules: %v", err)
	}
	tg, err := b.Resolve(ctx, l.Code, "client")
	if err != nil {
		t.Fatalf("Resolve on B = %v", err)
	}
	if got := b.Choose(tg, shorten.Visit{AcceptLanguage: "de-DE"}); got.URL != "https://example.de/" || got.Rule != "de" {
		t.Errorf("B chose %q by %q; want the rule's target, from the rules in Redis", got.URL, got.Rule)
	}
	if got := b.Choose(tg, shorten.Visit{AcceptLanguage: "en"}); got.URL != "https://example.com/plain" || got.Rule != shorten.DefaultTarget {
		t.Errorf("B chose %q by %q for an English visitor; want the link's URL by default", got.URL, got.Rule)
	}
}
