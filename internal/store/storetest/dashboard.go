package storetest

import (
	"fmt"
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
	t.Run("ClickSeries", s.clickSeries)
}

// clickSeries checks LinkClicks against the clicks themselves for buckets
// of whole hours (whole hours read from rollups, the partial first and last
// hours from raw clicks) and of less than an hour (raw clicks), over spans
// that start and end inside an hour or on one.
func (s suite) clickSeries(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	out, _, err := db.CreateLinks(ctx, []shorten.NewLink{
		{URL: "https://example.com/a", CreatedAt: time.Now()},
		{URL: "https://example.com/b", CreatedAt: time.Now()},
	}, codeOf)
	if err != nil {
		t.Fatal(err)
	}
	a, b := out[0], out[1]
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	reasons := []string{shorten.BotPreview, shorten.BotHead}
	var clicks []shorten.Click
	for i := range 300 {
		c := shorten.Click{LinkID: a.ID, At: t0.Add(time.Duration(i*i) * 1733 * time.Millisecond), Visitor: fmt.Sprint("v", i)}
		if i%7 == 0 {
			c.Bot, c.Reason = true, reasons[i%2]
		}
		if i%5 == 0 {
			c.Source = shorten.SourceQR
		}
		clicks = append(clicks, c, shorten.Click{LinkID: b.ID, At: c.At, Visitor: c.Visitor})
	}
	for chunk := range slices.Chunk(clicks, 97) {
		if err := db.RecordClicks(ctx, chunk); err != nil {
			t.Fatal(err)
		}
	}
	last := clicks[len(clicks)-1].At
	spans := [][2]time.Time{
		{t0, last.Add(time.Second)},
		{t0.Add(17 * time.Minute), last.Add(-23 * time.Minute)},
		{t0.Add(3*time.Hour + time.Second), t0.Add(9*time.Hour - time.Second)},
		{t0.Add(5 * time.Hour), t0.Add(7 * time.Hour)},
		{t0.Add(10 * time.Minute), t0.Add(50 * time.Minute)},
	}
	for _, span := range spans {
		for _, bucket := range []time.Duration{time.Hour, 2 * time.Hour, 24 * time.Hour, 30 * time.Minute, 7 * time.Second} {
			byStart := map[time.Time]*shorten.ClickBucket{}
			wantReasons := map[string]int64{}
			for _, c := range clicks {
				if c.LinkID != a.ID || c.At.Before(span[0]) || !c.At.Before(span[1]) {
					continue
				}
				start := time.UnixMicro(c.At.UnixMicro() / bucket.Microseconds() * bucket.Microseconds()).UTC()
				w := byStart[start]
				if w == nil {
					w = &shorten.ClickBucket{Start: start}
					byStart[start] = w
				}
				if c.Bot {
					w.Bot++
					wantReasons[c.Reason]++
				} else {
					w.Human++
				}
			}
			want := []shorten.ClickBucket{}
			for _, w := range byStart {
				want = append(want, *w)
			}
			slices.SortFunc(want, func(x, y shorten.ClickBucket) int { return x.Start.Compare(y.Start) })
			got, gotReasons, err := db.LinkClicks(ctx, a.ID, span[0], span[1], bucket)
			if err != nil {
				t.Fatalf("LinkClicks(%v, %v): %v", span, bucket, err)
			}
			if !slices.EqualFunc(want, got, func(w, g shorten.ClickBucket) bool {
				return w.Start.Equal(g.Start) && w.Human == g.Human && w.Bot == g.Bot
			}) {
				t.Errorf("LinkClicks(%v, %v) buckets = %v, want %v", span, bucket, got, want)
			}
			if !maps.Equal(wantReasons, gotReasons) {
				t.Errorf("LinkClicks(%v, %v) reasons = %v, want %v", span, bucket, gotReasons, wantReasons)
			}
		}
	}
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
