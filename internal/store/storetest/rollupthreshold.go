package storetest

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/shorten"
	"github.com/sluicehq/sluice/internal/store"
)

// clickModel is what a link's stats must say: the clicks recorded for it,
// added up here.
type clickModel []shorten.Click

func (m clickModel) series(from, to int64) map[int64][2]int64 {
	out := map[int64][2]int64{}
	for _, c := range m {
		h := c.At.Unix() / 3600
		if h < from || h >= to {
			continue
		}
		n := out[h]
		n[boolIndex(c.Bot)]++
		out[h] = n
	}
	return out
}

func (m clickModel) groups(dim shorten.Dim) map[string][2]int64 {
	out := map[string][2]int64{}
	for _, c := range m {
		n := out[c.Value(dim)]
		n[boolIndex(c.Bot)]++
		out[c.Value(dim)] = n
	}
	return out
}

func (m clickModel) reasons() map[string]int64 {
	out := map[string]int64{}
	for _, c := range m {
		if c.Bot {
			out[c.Reason]++
		}
	}
	return out
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// checkStats compares the link's stats over [t0, t0+span) with the
// model: by hour from LinkStats and LinkClicks, grouped by every
// dimension, and the bot reasons.
func checkStats(t *testing.T, db *store.DB, link int64, t0 time.Time, span time.Duration, m clickModel, when string) {
	t.Helper()
	ctx := t.Context()
	h0, h1 := t0.Unix()/3600, t0.Add(span).Unix()/3600
	want := m.series(h0, h1)
	for _, dim := range shorten.Dims {
		series, groups, err := db.LinkStats(ctx, link, h0, h1, 1, dim, 100)
		if err != nil {
			t.Fatalf("%s: LinkStats: %v", when, err)
		}
		got := map[int64][2]int64{}
		for _, b := range series {
			got[b.Start.Unix()/3600] = [2]int64{b.Humans, b.Bots}
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s: LinkStats series = %v, want %v", when, got, want)
		}
		gotGroups := map[string][2]int64{}
		for _, g := range groups {
			gotGroups[g.Value] = [2]int64{g.Humans, g.Bots}
		}
		if wantGroups := m.groups(dim); !maps.Equal(gotGroups, wantGroups) {
			t.Errorf("%s: LinkStats by %s = %v, want %v", when, shorten.DimNames[dim], gotGroups, wantGroups)
		}
		if !slices.IsSortedFunc(groups, func(a, b shorten.GroupCount) int {
			if a.Humans != b.Humans {
				return int(b.Humans - a.Humans)
			}
			return int(b.Bots - a.Bots)
		}) {
			t.Errorf("%s: LinkStats by %s not most clicks first: %v", when, shorten.DimNames[dim], groups)
		}
	}
	buckets, reasons, err := db.LinkClicks(ctx, link, t0, t0.Add(span), time.Hour)
	if err != nil {
		t.Fatalf("%s: LinkClicks: %v", when, err)
	}
	got := map[int64][2]int64{}
	for _, b := range buckets {
		got[b.Start.Unix()/3600] = [2]int64{b.Human, b.Bot}
	}
	if !maps.Equal(got, want) {
		t.Errorf("%s: LinkClicks = %v, want %v", when, got, want)
	}
	if w := m.reasons(); !maps.Equal(reasons, w) && (len(reasons) > 0 || len(w) > 0) {
		t.Errorf("%s: LinkClicks reasons = %v, want %v", when, reasons, w)
	}
}

// rollupRows counts the link's rows of link_rollups.
func rollupRows(t *testing.T, db *store.DB, link int64) int64 {
	t.Helper()
	var n int64
	err := db.InTx(t.Context(), func(tx *sql.Tx) error {
		return tx.QueryRowContext(t.Context(), db.Rebind(`SELECT COUNT(*) FROM link_rollups WHERE link_id = ?`), link).Scan(&n)
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// testClick is click i of a link: spread over 30 hours, every fourth a
// bot's, with dimensions that vary.
func testClick(link int64, t0 time.Time, i int) shorten.Click {
	c := shorten.Click{LinkID: link, At: t0.Add(time.Duration(i*37) * time.Minute % (30 * time.Hour)), Visitor: hexVisitor(i),
		Dimensions: shorten.Dimensions{Country: []string{"FR", "DE", "US"}[i%3], Device: []string{shorten.DeviceMobile, shorten.DeviceDesktop}[i%2],
			OS: []string{"android", "ios", "linux"}[i%3], Language: []string{"fr", "en"}[i%2], Referrer: []string{"", "news.example.com"}[i%2],
			Source: shorten.Source(i % 2), Target: []string{"", "ios-store"}[i%2]}}
	if i%4 == 0 {
		c.Bot, c.Reason = true, []string{shorten.BotPreview, shorten.BotScanner}[i/4%2]
	}
	return c
}

// rollUpAt covers the rollups' threshold: a link below store.RollUpAt
// hits has no rollup rows and its stats come from its raw clicks; the
// batch that reaches it, whether in one step or in the middle of a batch,
// rolls up every click so far; the stats say the same throughout; and the
// retention purge keeps a link's purged clicks in its stats on either
// side.
func (s suite) rollUpAt(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, out := s.withLinks(t, "https://example.com/steps", "https://example.com/jump", "https://example.com/purged")
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	span := 48 * time.Hour

	// Batches of 9 from 0 to 144 hits: the 8th batch crosses RollUpAt.
	steps := out[0].ID
	var m clickModel
	for b := range 16 {
		var batch []shorten.Click
		for i := range 9 {
			batch = append(batch, testClick(steps, t0, b*9+i))
		}
		if err := db.RecordClicks(ctx, batch); err != nil {
			t.Fatal(err)
		}
		m = append(m, batch...)
		rows := rollupRows(t, db, steps)
		if len(m) < store.RollUpAt && rows != 0 {
			t.Errorf("after %d hits: %d rollup rows, want none below %d", len(m), rows, store.RollUpAt)
		}
		if len(m) >= store.RollUpAt && rows == 0 {
			t.Errorf("after %d hits: no rollup rows", len(m))
		}
		checkStats(t, db, steps, t0, span, m, fmt.Sprintf("after %d hits", len(m)))
	}

	// From none to 2 x RollUpAt in one batch, then one more click.
	jump := out[1].ID
	m = nil
	var batch []shorten.Click
	for i := range 2 * store.RollUpAt {
		batch = append(batch, testClick(jump, t0, i))
	}
	if err := db.RecordClicks(ctx, batch); err != nil {
		t.Fatal(err)
	}
	m = append(m, batch...)
	one := testClick(jump, t0, 3)
	if err := db.RecordClicks(ctx, []shorten.Click{one}); err != nil {
		t.Fatal(err)
	}
	m = append(m, one)
	checkStats(t, db, jump, t0, span, m, "one batch past the threshold")

	// Old clicks purged below the threshold, then the link reaches it.
	purged := out[2].ID
	m = nil
	batch = nil
	for i := range 30 {
		batch = append(batch, testClick(purged, t0, i))
	}
	if err := db.RecordClicks(ctx, batch); err != nil {
		t.Fatal(err)
	}
	m = append(m, batch...)
	cutoff := t0.Add(15 * time.Hour)
	purge := func(when string) {
		for next, calls := int64(0), 0; ; calls++ {
			if calls > 100 {
				t.Fatalf("%s: PurgeClicks walk did not end", when)
			}
			_, nx, err := db.PurgeClicks(ctx, cutoff, next, 7)
			if err != nil {
				t.Fatalf("%s: PurgeClicks: %v", when, err)
			}
			if nx == 0 {
				break
			}
			next = nx
		}
	}
	// The links are made now, after the cutoff: the purge skips them.
	// Move them back first.
	if err := db.InTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, db.Rebind(`UPDATE links SET created_at = ?`), t0.Add(-time.Hour).UnixMicro())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	purge("below the threshold")
	checkStats(t, db, purged, t0, span, m, "purged below the threshold")
	batch = nil
	for i := 30; i < 30+store.RollUpAt; i++ {
		batch = append(batch, testClick(purged, t0, i))
	}
	if err := db.RecordClicks(ctx, batch); err != nil {
		t.Fatal(err)
	}
	m = append(m, batch...)
	checkStats(t, db, purged, t0, span, m, "past the threshold after a purge")
	purge("past the threshold")
	checkStats(t, db, purged, t0, span, m, "purged past the threshold")
}

// rollUpConcurrent records one link's clicks from several flushers at
// once (on PostgreSQL each its own transaction, as nodes sharing the
// database run them) across the threshold, with a purge running beside
// them: every click is counted once in the stats.
func (s suite) rollUpConcurrent(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	db, out := s.withLinks(t, "https://example.com/a", "https://example.com/b")
	if err := db.InTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, db.Rebind(`UPDATE links SET created_at = ?`), int64(0))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	const flushers, batches, size = 4, 16, 3
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		all  = map[int64]clickModel{}
		errs = make(chan error, flushers+1)
	)
	for f := range flushers {
		wg.Go(func() {
			for b := range batches {
				var batch []shorten.Click
				for i := range size {
					n := (f*batches+b)*size + i
					batch = append(batch, testClick(out[n%2].ID, t0, n))
				}
				if err := db.RecordClicks(ctx, batch); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, c := range batch {
					all[c.LinkID] = append(all[c.LinkID], c)
				}
				mu.Unlock()
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			if _, _, err := db.PurgeClicks(ctx, t0.Add(10*time.Hour), 0, 5); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, l := range out {
		if len(all[l.ID]) < store.RollUpAt {
			t.Fatalf("link %d: %d clicks, the test needs at least %d", l.ID, len(all[l.ID]), store.RollUpAt)
		}
		checkStats(t, db, l.ID, t0, 48*time.Hour, all[l.ID], fmt.Sprintf("link %d after concurrent flushes", l.ID))
	}
}
