package storetest

import (
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/shorten"
)

// linkAnalytics covers visit limits, click dimensions and their rollups,
// and conversions (migration 0018).
func (s suite) linkAnalytics(t *testing.T) {
	t.Run("VisitLimitIsExactUnderConcurrency", s.linkVisitLimit)
	t.Run("RollupsByDimension", s.linkRollups)
	t.Run("Conversions", s.linkConversions)
}

func (s suite) linkVisitLimit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	out, _, err := db.CreateLinks(ctx, []shorten.NewLink{
		{URL: "https://example.com/once", CreatedAt: time.Now(),
			LinkExtras: shorten.LinkExtras{MaxVisits: 3, FallbackURL: "https://example.com/gone", ClickIDs: true}},
		{URL: "https://example.com/plain", CreatedAt: time.Now()},
	}, codeOf)
	if err != nil {
		t.Fatal(err)
	}
	limited, plain := out[0], out[1]
	got, err := db.LinkByCode(ctx, "", limited.Code)
	if err != nil {
		t.Fatal(err)
	}
	want := shorten.LinkExtras{MaxVisits: 3, FallbackURL: "https://example.com/gone", ClickIDs: true}
	if got.LinkExtras != want || got.Visits != 0 {
		t.Errorf("LinkByCode extras = %+v, visits %d; want %+v, 0", got.LinkExtras, got.Visits, want)
	}
	var wg sync.WaitGroup
	var ok atomic.Int64
	for range 20 {
		wg.Go(func() {
			consumed, err := db.ConsumeVisit(ctx, limited.ID)
			if err != nil {
				t.Errorf("ConsumeVisit: %v", err)
			}
			if consumed {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 3 {
		t.Errorf("20 concurrent ConsumeVisit on max_visits 3: %d succeeded, want exactly 3", ok.Load())
	}
	if got, _ := db.LinkByCode(ctx, "", limited.Code); got.Visits != 3 {
		t.Errorf("visits = %d, want 3", got.Visits)
	}
	if consumed, err := db.ConsumeVisit(ctx, plain.ID); consumed || err != nil {
		t.Errorf("ConsumeVisit(plain link) = %v, %v; want false: a link without a limit has no visits to spend", consumed, err)
	}
	if consumed, err := db.ConsumeVisit(ctx, 999_999); consumed || err != nil {
		t.Errorf("ConsumeVisit(no such link) = %v, %v; want false", consumed, err)
	}
}

func (s suite) linkRollups(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, out := s.withLinks(t, "https://example.com/a")
	a := out[0]
	t0 := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	fr := shorten.Dimensions{Country: "FR", Device: shorten.DeviceMobile, OS: "ios", Language: "fr"}
	de := shorten.Dimensions{Country: "DE", Device: shorten.DeviceDesktop, OS: "windows", Referrer: "news.example", Source: shorten.SourceQR}
	bot := shorten.Dimensions{Device: shorten.DeviceBot, OS: "other"}
	batch := []shorten.Click{
		{LinkID: a.ID, At: t0.Add(time.Minute), Visitor: "v1", Dimensions: fr},
		{LinkID: a.ID, At: t0.Add(2 * time.Minute), Visitor: "v2", Dimensions: fr},
		{LinkID: a.ID, At: t0.Add(90 * time.Minute), Visitor: "v3", Dimensions: de},
		{LinkID: a.ID, At: t0.Add(91 * time.Minute), Bot: true, Reason: shorten.BotPreview, Visitor: "v4", Dimensions: bot},
		{LinkID: a.ID, At: t0.Add(26 * time.Hour), Visitor: "v5", Dimensions: de}, // the next day
	}
	// Two flushes: the second adds to the counters the first made.
	if err := db.RecordClicks(ctx, batch[:2]); err != nil {
		t.Fatal(err)
	}
	if err := db.RecordClicks(ctx, batch[2:]); err != nil {
		t.Fatal(err)
	}
	h0 := t0.Unix() / 3600
	series, groups, err := db.LinkStats(ctx, a.ID, h0, h0+24, 1, shorten.DimCountry, 10)
	if err != nil {
		t.Fatalf("LinkStats: %v", err)
	}
	wantSeries := []shorten.StatsBucket{{Start: t0, Humans: 2}, {Start: t0.Add(time.Hour), Humans: 1, Bots: 1}}
	if !reflect.DeepEqual(wantSeries, series) {
		t.Errorf("hourly series = %+v, want %+v", series, wantSeries)
	}
	wantGroups := []shorten.GroupCount{{Value: "FR", Humans: 2}, {Value: "DE", Humans: 1}, {Value: "", Bots: 1}}
	if !reflect.DeepEqual(wantGroups, groups) {
		t.Errorf("by country = %+v, want %+v", groups, wantGroups)
	}
	day := h0 - h0%24
	series, groups, err = db.LinkStats(ctx, a.ID, day, day+48, 24, shorten.DimSource, 1)
	if err != nil {
		t.Fatal(err)
	}
	wantSeries = []shorten.StatsBucket{{Start: time.Unix(day*3600, 0).UTC(), Humans: 3, Bots: 1}, {Start: time.Unix((day+24)*3600, 0).UTC(), Humans: 1}}
	if !reflect.DeepEqual(wantSeries, series) {
		t.Errorf("daily series = %+v, want %+v", series, wantSeries)
	}
	if !reflect.DeepEqual([]shorten.GroupCount{{Value: "link", Humans: 2, Bots: 1}}, groups) {
		t.Errorf("by source, limit 1 = %+v, want %+v", groups, []shorten.GroupCount{{Value: "link", Humans: 2, Bots: 1}})
	}
	for _, tc := range []struct {
		dim  shorten.Dim
		want []shorten.GroupCount
	}{
		{shorten.DimDevice, []shorten.GroupCount{{Value: "desktop", Humans: 2}, {Value: "mobile", Humans: 2}, {Value: "bot", Bots: 1}}},
		{shorten.DimReferrer, []shorten.GroupCount{{Value: "", Humans: 2, Bots: 1}, {Value: "news.example", Humans: 2}}}, // ties: more bots first
	} {
		_, groups, err := db.LinkStats(ctx, a.ID, day, day+48, 24, tc.dim, 10)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(tc.want, groups) {
			t.Errorf("by %s = %+v, want %+v", shorten.DimNames[tc.dim], groups, tc.want)
		}
	}
	if err := db.DeleteLink(ctx, "", a.Code); err != nil {
		t.Fatal(err)
	}
	if series, groups, err := db.LinkStats(ctx, a.ID, day, day+48, 24, shorten.DimSource, 10); err != nil || len(series) != 0 || len(groups) != 0 {
		t.Errorf("LinkStats after delete = %v, %v, %v; want nothing left", series, groups, err)
	}
}

func (s suite) linkConversions(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	out, _, err := db.CreateLinks(ctx, []shorten.NewLink{
		{URL: "https://example.com/sms", NotificationID: "ntf_1", CreatedAt: time.Now(), LinkExtras: shorten.LinkExtras{ClickIDs: true}},
		{URL: "https://example.com/web", CreatedAt: time.Now(), LinkExtras: shorten.LinkExtras{ClickIDs: true}},
	}, codeOf)
	if err != nil {
		t.Fatal(err)
	}
	sms, web := out[0], out[1]
	t0 := time.Date(2026, 7, 1, 10, 30, 0, 0, time.UTC)
	first := shorten.Conversion{ClickID: "cid1", Event: "sale", Value: 12.5, At: t0, LinkID: sms.ID}
	got, created, err := db.RecordConversion(ctx, first)
	if err != nil || !created || got.NotificationID != "ntf_1" || got.Value != 12.5 || !got.At.Equal(t0) {
		t.Fatalf("RecordConversion = %+v, %v, %v; want created with the link's notification", got, created, err)
	}
	again := first
	again.Value, again.At = 99, t0.Add(time.Hour)
	got, created, err = db.RecordConversion(ctx, again)
	if err != nil || created || got.Value != 12.5 || !got.At.Equal(t0) {
		t.Errorf("RecordConversion again = %+v, %v, %v; want the first one back, not created", got, created, err)
	}
	for _, c := range []shorten.Conversion{
		{ClickID: "cid1", Event: "lead", Value: 0, At: t0, LinkID: sms.ID},
		{ClickID: "cid2", Event: "sale", Value: 7.5, At: t0.Add(2 * time.Hour), LinkID: sms.ID},
		{ClickID: "cid3", Event: "sale", Value: 1, At: t0, LinkID: web.ID},
	} {
		if _, created, err := db.RecordConversion(ctx, c); err != nil || !created {
			t.Fatalf("RecordConversion(%+v) = %v, %v", c, created, err)
		}
	}
	if _, _, err := db.RecordConversion(ctx, shorten.Conversion{ClickID: "x", Event: "sale", At: t0, LinkID: 999_999}); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("RecordConversion(no such link) = %v, want NotFound", err)
	}
	if l, err := db.LinkByID(ctx, web.ID); err != nil || l.Code != web.Code || l.Owner != web.Owner {
		t.Errorf("LinkByID = %+v, %v; want %+v", l, err, web)
	}
	if _, err := db.LinkByID(ctx, 999_999); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("LinkByID(no such link) = %v, want NotFound", err)
	}
	// A click id takes at most MaxClickEvents event names; repeats of
	// those it has still answer.
	for i := range shorten.MaxClickEvents {
		c := shorten.Conversion{ClickID: "cid4", Event: fmt.Sprintf("e%d", i), At: t0, LinkID: web.ID}
		if _, created, err := db.RecordConversion(ctx, c); err != nil || !created {
			t.Fatalf("RecordConversion(%+v) = %v, %v", c, created, err)
		}
	}
	if _, _, err := db.RecordConversion(ctx, shorten.Conversion{ClickID: "cid4", Event: "more", At: t0, LinkID: web.ID}); !apperr.Is(err, apperr.Conflict) {
		t.Errorf("RecordConversion past MaxClickEvents = %v, want Conflict", err)
	}
	if _, created, err := db.RecordConversion(ctx, shorten.Conversion{ClickID: "cid4", Event: "e0", At: t0, LinkID: web.ID}); err != nil || created {
		t.Errorf("a repeat past MaxClickEvents = %v, %v; want the first one back", created, err)
	}
	total, err := db.NotificationConversions(ctx, "ntf_1")
	if err != nil || total != (shorten.ConversionTotal{Count: 3, Value: 20}) {
		t.Errorf("NotificationConversions = %+v, %v; want 3 worth 20", total, err)
	}
	if l, _ := db.LinkByCode(ctx, "", sms.Code); l.Conversions != 3 {
		t.Errorf("link conversions = %d, want 3", l.Conversions)
	}
	h0 := t0.Unix() / 3600
	series, _, err := db.LinkStats(ctx, sms.ID, h0, h0+24, 1, shorten.DimCountry, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []shorten.StatsBucket{
		{Start: t0.Truncate(time.Hour), Conversions: 2, ConversionValue: 12.5},
		{Start: t0.Truncate(time.Hour).Add(2 * time.Hour), Conversions: 1, ConversionValue: 7.5},
	}
	if !reflect.DeepEqual(want, series) {
		t.Errorf("series with conversions = %+v, want %+v", series, want)
	}
}
