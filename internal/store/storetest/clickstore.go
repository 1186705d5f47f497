package storetest

import (
	"database/sql"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/shorten"
	"github.com/sluicehq/sluice/internal/store"
)

// linkClickStore covers how the click flusher's batches are written
// (chunked multi-row statements, the visitor hash as bytes since
// migration 0019) and the click retention purge.
func (s suite) linkClickStore(t *testing.T) {
	t.Run("LargeBatchesInChunks", s.linkClickChunks)
	t.Run("VisitorsOldAndNewRows", s.linkVisitors)
	t.Run("ClickRetention", s.linkClickRetention)
	t.Run("RollUpAt", s.rollUpAt)
	t.Run("RollUpConcurrent", s.rollUpConcurrent)
}

// hexVisitor is a visitor hash in the form shorten makes it.
func hexVisitor(i int) string { return fmt.Sprintf("%032x", 7919*(i+1)) }

func (s suite) linkClickChunks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, out := s.withLinks(t, "https://example.com/a", "https://example.com/b")
	t0 := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	// Sizes around the chunking: one row, a power of two, one past the
	// 512-row chunk, several chunks with an odd remainder; a third of
	// the rows on a link deleted meanwhile, so fewer rows and rollups are
	// written than were prepared for.
	for _, n := range []int{1, 64, 513, 1301} {
		var batch []shorten.Click
		humans := map[int64]int64{}
		bots := map[int64]int64{}
		for i := range n {
			link := []int64{out[0].ID, out[1].ID, 999_999}[i%3]
			c := shorten.Click{LinkID: link, At: t0.Add(time.Duration(i) * 7 * time.Second), Visitor: hexVisitor(i % 50),
				Dimensions: shorten.Dimensions{Country: []string{"FR", "DE", "US", "IN"}[i%4], Device: shorten.DeviceMobile, OS: "android"}}
			if i%5 == 0 {
				c.Bot, c.Reason, c.Dimensions = true, shorten.BotPreview, shorten.Dimensions{Device: shorten.DeviceBot, OS: "other"}
				bots[link]++
			} else {
				humans[link]++
			}
			batch = append(batch, c)
		}
		before := map[int64]shorten.Link{}
		for _, l := range out {
			before[l.ID], _ = db.LinkByCode(ctx, "", l.Code)
		}
		if err := db.RecordClicks(ctx, batch); err != nil {
			t.Fatalf("RecordClicks(%d clicks): %v", n, err)
		}
		h0 := t0.Unix() / 3600
		for _, l := range out {
			got, err := db.LinkByCode(ctx, "", l.Code)
			if err != nil {
				t.Fatal(err)
			}
			if got.Clicks-before[l.ID].Clicks != humans[l.ID] || got.BotHits-before[l.ID].BotHits != bots[l.ID] {
				t.Errorf("batch of %d, link %d: +%d clicks +%d bot hits, want +%d +%d", n, l.ID,
					got.Clicks-before[l.ID].Clicks, got.BotHits-before[l.ID].BotHits, humans[l.ID], bots[l.ID])
			}
			series, _, err := db.LinkStats(ctx, l.ID, h0, h0+24, 24, shorten.DimCountry, 10)
			if err != nil {
				t.Fatal(err)
			}
			var sh, sb int64
			for _, b := range series {
				sh, sb = sh+b.Humans, sb+b.Bots
			}
			if sh != got.Clicks || sb != got.BotHits {
				t.Errorf("batch of %d, link %d: rollups sum to %d humans %d bots, the counters say %d %d", n, l.ID, sh, sb, got.Clicks, got.BotHits)
			}
			buckets, _, err := db.LinkClicks(ctx, l.ID, t0, t0.Add(24*time.Hour), 24*time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			var rh, rb int64
			for _, b := range buckets {
				rh, rb = rh+b.Human, rb+b.Bot
			}
			if rh != got.Clicks || rb != got.BotHits {
				t.Errorf("batch of %d, link %d: %d human and %d bot rows, the counters say %d %d", n, l.ID, rh, rb, got.Clicks, got.BotHits)
			}
		}
	}
}

func (s suite) linkVisitors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, out := s.withLinks(t, "https://example.com/a")
	id := out[0].ID
	t0 := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	// A row as written before migration 0019: the hash as text.
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO link_clicks (link_id, at, bot, reason, visitor) VALUES (?, ?, 0, '', ?)`),
			id, t0.UnixMicro(), hexVisitor(1))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	batch := []shorten.Click{
		{LinkID: id, At: t0.Add(time.Second), Visitor: hexVisitor(1)}, // the old row's visitor
		{LinkID: id, At: t0.Add(2 * time.Second), Visitor: hexVisitor(2)},
		{LinkID: id, At: t0.Add(3 * time.Second), Visitor: hexVisitor(2)},
		{LinkID: id, At: t0.Add(4 * time.Second), Visitor: "v-other"},                          // not a hash: kept as text
		{LinkID: id, At: t0.Add(5 * time.Second), Visitor: "0123456789ABCDEF0123456789ABCDEF"}, // upper case: kept as text
		{LinkID: id, At: t0.Add(time.Hour), Visitor: hexVisitor(3)},                            // outside the span
	}
	if err := db.RecordClicks(ctx, batch); err != nil {
		t.Fatal(err)
	}
	n, err := db.LinkVisitors(ctx, id, t0, t0.Add(time.Minute))
	if err != nil || n != 4 {
		t.Errorf("LinkVisitors = %d, %v; want 4 (the old text row and the new bytes row of visitor 1 are one visitor)", n, err)
	}
}

func (s suite) linkClickRetention(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	t0 := time.Date(2026, 7, 10, 0, 0, 0, 0, time.UTC)
	var nl []shorten.NewLink
	for i := range 3 {
		nl = append(nl, shorten.NewLink{URL: fmt.Sprintf("https://example.com/%d", i), CreatedAt: t0.Add(-30 * 24 * time.Hour)})
	}
	nl = append(nl, shorten.NewLink{URL: "https://example.com/new", CreatedAt: t0.Add(time.Hour)})
	out, _, err := db.CreateLinks(ctx, nl, codeOf)
	if err != nil {
		t.Fatal(err)
	}
	cutoff := t0
	var batch []shorten.Click
	old := map[int64]int64{}
	for i := range 40 {
		l := out[i%3]
		at := t0.Add(time.Duration(i-25) * time.Hour) // 25 before the cutoff, 15 from it
		if i%3 == 2 {
			at = t0.Add(time.Duration(i) * time.Hour) // link 2: only new clicks
		}
		if at.Before(cutoff) {
			old[l.ID]++
		}
		batch = append(batch, shorten.Click{LinkID: l.ID, At: at, Bot: i%4 == 0, Visitor: hexVisitor(i), Dimensions: shorten.Dimensions{Country: "FR"}})
	}
	// Several clicks at the same instant, all old: deleted together.
	for range 3 {
		batch = append(batch, shorten.Click{LinkID: out[0].ID, At: t0.Add(-100 * time.Hour), Visitor: hexVisitor(99)})
		old[out[0].ID]++
	}
	batch = append(batch, shorten.Click{LinkID: out[3].ID, At: t0.Add(2 * time.Hour), Visitor: hexVisitor(7)})
	if err := db.RecordClicks(ctx, batch); err != nil {
		t.Fatal(err)
	}
	from, to := t0.Add(-200*time.Hour), t0.Add(200*time.Hour)
	h0, h1 := from.Unix()/3600, to.Unix()/3600
	type snapshot struct {
		link   shorten.Link
		series []shorten.StatsBucket
		groups []shorten.GroupCount
	}
	snap := func() map[int64]snapshot {
		m := map[int64]snapshot{}
		for _, l := range out {
			got, err := db.LinkByCode(ctx, "", l.Code)
			if err != nil {
				t.Fatal(err)
			}
			series, groups, err := db.LinkStats(ctx, l.ID, h0, h1, 24, shorten.DimCountry, 10)
			if err != nil {
				t.Fatal(err)
			}
			m[l.ID] = snapshot{got, series, groups}
		}
		return m
	}
	rawClicks := func(id int64, since, until time.Time) int64 {
		// Buckets of less than an hour are counted from the raw clicks
		// (whole hours from the rollups, which the purge keeps).
		buckets, _, err := db.LinkClicks(ctx, id, since, until, 59*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, b := range buckets {
			n += b.Human + b.Bot
		}
		return n
	}
	before := snap()
	// A small limit, so the walk resumes inside a link and across links.
	total := purgeWalk(t, db, cutoff, 4)
	var want int64
	for _, n := range old {
		want += n
	}
	if total != want {
		t.Errorf("purged %d clicks, want the %d older than the retention", total, want)
	}
	for _, l := range out {
		if n := rawClicks(l.ID, from, cutoff); n != 0 {
			t.Errorf("link %d: %d raw clicks left before the cutoff", l.ID, n)
		}
	}
	if n := rawClicks(out[0].ID, cutoff, to) + rawClicks(out[1].ID, cutoff, to) + rawClicks(out[2].ID, cutoff, to) + rawClicks(out[3].ID, cutoff, to); n != int64(len(batch))-want {
		t.Errorf("%d raw clicks from the cutoff on, want %d (none of them purged)", n, int64(len(batch))-want)
	}
	if after := snap(); !reflect.DeepEqual(before, after) {
		t.Errorf("counters or stats changed by the purge:\nbefore %+v\nafter  %+v", before, after)
	}
	if n, next, err := db.PurgeClicks(ctx, cutoff, 0, 1000); n != 0 || next != 0 || err != nil {
		t.Errorf("PurgeClicks again = %d, %d, %v; want nothing left", n, next, err)
	}
}

// purgeWalk purges the clicks before cutoff, limit a call, until the walk
// ends, and returns how many went; a call may delete more than limit only
// by the ties at its last instant.
func purgeWalk(t *testing.T, db *store.DB, cutoff time.Time, limit int) int64 {
	t.Helper()
	var total int64
	calls := 0
	for next := int64(0); ; calls++ {
		if calls > 100 {
			t.Fatal("PurgeClicks walk did not end")
		}
		n, nx, err := db.PurgeClicks(t.Context(), cutoff, next, limit)
		if err != nil {
			t.Fatalf("PurgeClicks: %v", err)
		}
		if n > limit+2 { // ties at one instant may go together
			t.Errorf("PurgeClicks(limit %d) deleted %d", limit, n)
		}
		total += int64(n)
		if nx == 0 {
			return total
		}
		next = nx
	}
}
