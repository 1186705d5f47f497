package storetest

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/shorten"
	"github.com/sluicehq/sluice/internal/store"
)

func (s suite) links(t *testing.T) {
	t.Run("CreateAndRead", s.linkCreateAndRead)
	t.Run("TakenCodesAreSkipped", s.linkTakenCodes)
	t.Run("IDsAreUniqueAcrossWriters", s.linkConcurrentIDs)
	t.Run("Clicks", s.linkClicks)
	t.Run("ListAndDelete", s.linkListAndDelete)
	t.Run("Purge", s.linkPurge)
	t.Run("Rules", s.linkRules)
	t.Run("ClickTargets", s.linkClickTargets)
	t.Run("ClickStore", s.linkClickStore)
}

// codeOf is the code callback of the tests: readable codes from ids.
func codeOf(id int64) (string, error) { return fmt.Sprintf("c%d", id), nil }

// withLinks opens a migrated store holding one link, created now and
// coded by codeOf, to each of urls in order.
func (s suite) withLinks(t *testing.T, urls ...string) (*store.DB, []shorten.Link) {
	t.Helper()
	db := s.migrated(t)
	nl := make([]shorten.NewLink, len(urls))
	for i, u := range urls {
		nl[i] = shorten.NewLink{URL: u, CreatedAt: time.Now()}
	}
	out, _, err := db.CreateLinks(t.Context(), nl, codeOf)
	if err != nil {
		t.Fatal(err)
	}
	return db, out
}

func (s suite) linkCreateAndRead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	created := time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.UTC)
	expires := created.Add(48 * time.Hour)
	in := []shorten.NewLink{
		{URL: "https://example.com/a", Owner: "key_1", CreatedAt: created},
		{URL: "https://example.com/b", Code: "spring-sale", Owner: "key_1", CreatedAt: created, ExpiresAt: expires},
		{URL: "https://example.com/c", NotificationID: "ntf_1", CreatedAt: created},
	}
	out, ok, err := db.CreateLinks(ctx, in, codeOf)
	if err != nil {
		t.Fatalf("CreateLinks: %v", err)
	}
	for i := range in {
		if !ok[i] {
			t.Fatalf("link %d not created", i)
		}
	}
	if out[0].Code != fmt.Sprintf("c%d", out[0].ID) || out[1].Code != "spring-sale" || out[0].ID >= out[1].ID || out[1].ID >= out[2].ID {
		t.Errorf("created %+v, want generated codes from ascending ids and the slug kept", out)
	}
	for i, want := range out {
		got, err := db.LinkByCode(ctx, "", want.Code)
		if err != nil {
			t.Fatalf("LinkByCode(%q): %v", want.Code, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("LinkByCode(%q) = %+v, want %+v", want.Code, got, want)
		}
		if i == 1 && (!got.ExpiresAt.Equal(expires.Truncate(time.Microsecond)) || got.ExpiresAt.Location() != time.UTC) {
			t.Errorf("ExpiresAt = %v, want %v in UTC", got.ExpiresAt, expires)
		}
		if !got.CreatedAt.Equal(created.Truncate(time.Microsecond)) {
			t.Errorf("CreatedAt = %v, want %v to the microsecond", got.CreatedAt, created)
		}
	}
	if _, err := db.LinkByCode(ctx, "", "absent"); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("LinkByCode(absent) = %v, want NotFound", err)
	}
	if got, err := db.NotificationLink(ctx, "ntf_1", "https://example.com/c"); err != nil || got.ID != out[2].ID {
		t.Errorf("NotificationLink = %+v, %v; want link %d", got, err, out[2].ID)
	}
	if _, err := db.NotificationLink(ctx, "ntf_1", "https://example.com/other"); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("NotificationLink(other URL) = %v, want NotFound", err)
	}
}

func (s suite) linkTakenCodes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	now := time.Now()
	first, _, err := db.CreateLinks(ctx, []shorten.NewLink{
		{URL: "https://example.com/1", Code: "slug", CreatedAt: now},
		{URL: "https://example.com/2", NotificationID: "ntf", CreatedAt: now},
	}, codeOf)
	if err != nil {
		t.Fatal(err)
	}
	next := fmt.Sprintf("c%d", first[1].ID+1) // the code the next id would get
	in := []shorten.NewLink{
		{URL: "https://example.com/3", Code: "slug", CreatedAt: now},                // taken slug
		{URL: "https://example.com/2", NotificationID: "ntf", CreatedAt: now},       // same notification and URL
		{URL: "https://example.com/4", Code: next, CreatedAt: now},                  // takes the next generated code
		{URL: "https://example.com/5", CreatedAt: now},                              // gets id+2: fine
		{URL: "https://example.com/6", Code: "fresh", CreatedAt: now},               // goes in
		{URL: "https://example.com/6", Code: "fresh", CreatedAt: now},               // same slug in the batch
		{URL: "https://example.com/2", NotificationID: "ntf_other", CreatedAt: now}, // other notification: fine
	}
	out, ok, err := db.CreateLinks(ctx, in, codeOf)
	if err != nil {
		t.Fatalf("CreateLinks with conflicts = %v, want them skipped", err)
	}
	want := []bool{false, false, true, true, true, false, true}
	for i := range want {
		if ok[i] != want[i] {
			t.Errorf("link %d (%+v) created = %v, want %v", i, in[i], ok[i], want[i])
		}
		if !ok[i] && out[i].ID != 0 {
			t.Errorf("skipped link %d returned %+v, want the zero Link", i, out[i])
		}
	}
	if got, _ := db.LinkByCode(ctx, "", "slug"); got.URL != "https://example.com/1" {
		t.Errorf("taken slug now points at %q, want the first link kept", got.URL)
	}
}

func (s suite) linkConcurrentIDs(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	var (
		mu  sync.Mutex
		ids = map[int64]bool{}
		wg  sync.WaitGroup
	)
	for w := range 8 {
		wg.Go(func() {
			for i := range 5 {
				batch := make([]shorten.NewLink, 3)
				for j := range batch {
					batch[j] = shorten.NewLink{URL: fmt.Sprintf("https://example.com/%d/%d/%d", w, i, j), CreatedAt: time.Now()}
				}
				out, ok, err := db.CreateLinks(ctx, batch, codeOf)
				if err != nil {
					t.Errorf("concurrent CreateLinks: %v", err)
					return
				}
				mu.Lock()
				for j, l := range out {
					if !ok[j] || ids[l.ID] {
						t.Errorf("link %+v created=%v; duplicate id or skipped", l, ok[j])
					}
					ids[l.ID] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(ids) != 8*5*3 {
		t.Errorf("%d distinct ids, want %d", len(ids), 8*5*3)
	}
}

func (s suite) linkClicks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, out := s.withLinks(t, "https://example.com/a", "https://example.com/b")
	a, b := out[0], out[1]
	t0 := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	batch := []shorten.Click{
		{LinkID: a.ID, At: t0.Add(2 * time.Second), Visitor: "v1"},
		{LinkID: a.ID, At: t0.Add(time.Second), Visitor: "v2"},
		{LinkID: a.ID, At: t0, Bot: true, Reason: shorten.BotPreview, Visitor: "v3"},
		{LinkID: b.ID, At: t0, Bot: true, Reason: shorten.BotHead, Visitor: "v1"},
		{LinkID: 999_999, At: t0, Visitor: "v9"}, // a link deleted meanwhile
	}
	if err := db.RecordClicks(ctx, batch); err != nil {
		t.Fatalf("RecordClicks: %v", err)
	}
	if err := db.RecordClicks(ctx, []shorten.Click{{LinkID: a.ID, At: t0.Add(-time.Hour), Visitor: "v4"}}); err != nil {
		t.Fatalf("RecordClicks: %v", err)
	}
	ga, _ := db.LinkByCode(ctx, "", a.Code)
	gb, _ := db.LinkByCode(ctx, "", b.Code)
	if ga.Clicks != 3 || ga.BotHits != 1 || !ga.FirstClickAt.Equal(t0.Add(time.Second)) {
		t.Errorf("link a: %d clicks, %d bot hits, first click %v; want 3, 1, %v (the first batch's earliest human click is kept)",
			ga.Clicks, ga.BotHits, ga.FirstClickAt, t0.Add(time.Second))
	}
	if gb.Clicks != 0 || gb.BotHits != 1 || !gb.FirstClickAt.IsZero() {
		t.Errorf("link b: %+v, want one bot hit and no first click", gb)
	}
	if err := db.RecordClicks(ctx, nil); err != nil {
		t.Errorf("RecordClicks(nil) = %v", err)
	}
}

func (s suite) linkListAndDelete(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	var in []shorten.NewLink
	for i := range 5 {
		in = append(in, shorten.NewLink{URL: fmt.Sprintf("https://example.com/%d", i), Owner: "key_a", CreatedAt: time.Now()})
	}
	in = append(in, shorten.NewLink{URL: "https://example.com/b", Owner: "key_b", CreatedAt: time.Now()})
	out, _, err := db.CreateLinks(ctx, in, codeOf)
	if err != nil {
		t.Fatal(err)
	}
	page, err := db.ListLinks(ctx, "key_a", nil, 0, 3)
	if err != nil || len(page) != 3 || page[0].ID != out[4].ID || page[2].ID != out[2].ID {
		t.Fatalf("ListLinks first page = %+v, %v; want links 4, 3, 2", page, err)
	}
	page, err = db.ListLinks(ctx, "key_a", nil, page[2].ID, 3)
	if err != nil || len(page) != 2 || page[0].ID != out[1].ID {
		t.Fatalf("ListLinks second page = %+v, %v; want links 1, 0", page, err)
	}
	if empty, err := db.ListLinks(ctx, "key_z", nil, 0, 3); err != nil || empty == nil || len(empty) != 0 {
		t.Errorf("ListLinks(no links) = %v, %v; want an empty non-nil list", empty, err)
	}
	if err := db.RecordClicks(ctx, []shorten.Click{{LinkID: out[0].ID, At: time.Now(), Visitor: "v"}}); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteLink(ctx, "", out[0].Code); err != nil {
		t.Fatalf("DeleteLink: %v", err)
	}
	if err := db.DeleteLink(ctx, "", out[0].Code); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("DeleteLink twice = %v, want NotFound", err)
	}
	if _, err := db.LinkByCode(ctx, "", out[0].Code); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("LinkByCode after delete = %v, want NotFound", err)
	}
}

func (s suite) linkPurge(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var in []shorten.NewLink
	for i := range 5 {
		in = append(in, shorten.NewLink{URL: "https://example.com", CreatedAt: t0, ExpiresAt: t0.Add(time.Duration(i) * time.Hour)})
	}
	in = append(in, shorten.NewLink{URL: "https://example.com/forever", CreatedAt: t0})
	out, _, err := db.CreateLinks(ctx, in, codeOf)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.RecordClicks(ctx, []shorten.Click{{LinkID: out[0].ID, At: t0, Visitor: "v"}}); err != nil {
		t.Fatal(err)
	}
	n, err := db.PurgeExpiredLinks(ctx, t0.Add(3*time.Hour), 2)
	if err != nil || n != 2 {
		t.Fatalf("PurgeExpiredLinks(limit 2) = %d, %v; want 2", n, err)
	}
	n, err = db.PurgeExpiredLinks(ctx, t0.Add(3*time.Hour), 10)
	if err != nil || n != 1 {
		t.Fatalf("PurgeExpiredLinks again = %d, %v; want 1 (expiry 3h is not before 3h)", n, err)
	}
	for i, l := range out {
		_, err := db.LinkByCode(ctx, "", l.Code)
		if gone := apperr.Is(err, apperr.NotFound); gone != (i < 3) {
			t.Errorf("link %d (expires %v): gone = %v, want %v", i, in[i].ExpiresAt, gone, i < 3)
		}
	}
}
