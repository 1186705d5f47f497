package storetest

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/shorten"
)

// dashboard covers what the dashboard reads and keeps: server secrets and
// link statistics.
func (s suite) dashboard(t *testing.T) {
	t.Run("Secret", s.secret)
	t.Run("LinkStats", s.linkStats)
}

func (s suite) secret(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	v, err := db.Secret(ctx, "ui", "first")
	if err != nil || v != "first" {
		t.Fatalf("Secret = %q, %v; want first", v, err)
	}
	if v, err := db.Secret(ctx, "ui", "second"); err != nil || v != "first" {
		t.Errorf("Secret again = %q, %v; want the first value kept", v, err)
	}
	if v, err := db.Secret(ctx, "other", "x"); err != nil || v != "x" {
		t.Errorf("Secret(other) = %q, %v; want x", v, err)
	}
}

func (s suite) linkStats(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	now := time.Now()
	out, _, err := db.CreateLinks(ctx, []shorten.NewLink{
		{URL: "https://example.com/a", Owner: "key_a", CreatedAt: now},
		{URL: "https://example.com/b", Owner: "key_a", CreatedAt: now},
		{URL: "https://example.com/c", Owner: "key_b", CreatedAt: now},
	}, codeOf)
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := out[0], out[1], out[2]
	t0 := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	clicks := []shorten.Click{
		{LinkID: a.ID, At: t0.Add(10 * time.Minute), Visitor: "v1"},
		{LinkID: a.ID, At: t0.Add(70 * time.Minute), Visitor: "v2"},
		{LinkID: a.ID, At: t0.Add(80 * time.Minute), Bot: true, Reason: shorten.BotPreview, Visitor: "v3"},
		{LinkID: a.ID, At: t0.Add(81 * time.Minute), Bot: true, Reason: shorten.BotHead, Visitor: "v3"},
		{LinkID: a.ID, At: t0.Add(5 * time.Hour), Visitor: "v4"}, // after the span
		{LinkID: b.ID, At: t0, Bot: true, Reason: shorten.BotHead, Visitor: "v1"},
		{LinkID: c.ID, At: t0, Visitor: "v1"},
		{LinkID: c.ID, At: t0, Visitor: "v2"},
		{LinkID: c.ID, At: t0, Visitor: "v5"},
		{LinkID: c.ID, At: t0, Visitor: "v6"},
	}
	if err := db.RecordClicks(ctx, clicks); err != nil {
		t.Fatal(err)
	}

	top, err := db.TopLinks(ctx, "key_a", false, nil, 10)
	if err != nil || len(top) != 2 || top[0].ID != a.ID || top[1].ID != b.ID {
		t.Errorf("TopLinks(key_a) = %v, %v; want a then b", top, err)
	}
	all, err := db.TopLinks(ctx, "", true, nil, 2)
	if err != nil || len(all) != 2 || all[0].ID != c.ID || all[1].ID != a.ID {
		t.Errorf("TopLinks(all, 2) = %v, %v; want c then a", all, err)
	}

	buckets, reasons, err := db.LinkClicks(ctx, a.ID, t0, t0.Add(3*time.Hour), time.Hour)
	if err != nil {
		t.Fatalf("LinkClicks: %v", err)
	}
	want := []shorten.ClickBucket{
		{Start: t0, Human: 1},
		{Start: t0.Add(time.Hour), Human: 1, Bot: 2},
	}
	if !slices.EqualFunc(want, buckets, func(w, g shorten.ClickBucket) bool {
		return w.Start.Equal(g.Start) && w.Human == g.Human && w.Bot == g.Bot
	}) {
		t.Errorf("LinkClicks buckets = %v, want %v", buckets, want)
	}
	if wantR := map[string]int64{shorten.BotPreview: 1, shorten.BotHead: 1}; !maps.Equal(wantR, reasons) {
		t.Errorf("LinkClicks reasons = %v, want %v", reasons, wantR)
	}
	none, _, err := db.LinkClicks(ctx, b.ID, t0.Add(time.Hour), t0.Add(2*time.Hour), time.Minute)
	if err != nil || len(none) != 0 {
		t.Errorf("LinkClicks on an empty span = %v, %v; want none", none, err)
	}
}
