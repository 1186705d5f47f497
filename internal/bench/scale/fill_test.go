package scale_test

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/shorten"
	"github.com/sluicehq/sluice/internal/store"
)

// The data's shape: links made evenly over the last 90 days; one click in
// ten goes to the first (hot) link, spread over the whole window, the rest
// to links picked evenly, each click a few hours (exponentially, mean 6 h)
// after its link was made, as shared links are clicked; 1.75
// deliveries a notification (email always, push three times in four), one
// in a thousand dead-lettered.
const (
	window        = 90 * 24 * time.Hour
	linkBatch     = 1000
	clickBatch    = 4096
	notifBatch    = 20_000
	sampleCodes   = 1000
	hotClickShare = 10 // one click in hotClickShare goes to the hot link
)

// grower fills one store step by step and keeps what the measurements
// need: link ids for clicks and a sample of codes to redirect.
type grower struct {
	t      *testing.T
	db     *store.DB
	engine string
	dir    string
	rnd    *rand.Rand
	now    time.Time

	ids     []int64
	codes   []string // a reservoir sample of codes; codes[0] is the hot link
	links   int64
	clicks  int64
	notifs  int64
	users   int64
	bytesPC float64 // bytes per click, from the last step that added clicks

	emptyRate float64 // redirects/s at the first step, for the ratios
	flushNote string  // the store path's cost a click, when a step used it
}

// writers is how many RecordClicks callers the store path runs: one on
// SQLite (one writer), four on PostgreSQL.
func (g *grower) writers() int {
	if g.engine == "sqlite" {
		return 1
	}
	return 4
}

// bulkGrowClicks adds clicks up to want with the bulk SQL fill
// (bulkclicks_test.go): the links' ids must be one run, as a fresh
// store's are.
func (g *grower) bulkGrowClicks(ctx context.Context, want int64) {
	first, n := g.ids[0], int64(len(g.ids))
	if g.ids[n-1]-first != n-1 {
		g.t.Fatalf("link ids %d to %d are not one run of %d", first, g.ids[n-1], n)
	}
	span := bulkSpan{lo: g.clicks, hi: want, stepLo: g.clicks, stepHi: want, firstID: first, links: n,
		from: g.now.Add(-window).UnixMicro(), linkStep: window.Microseconds() / max(1, scaled(*links)), now: g.now.UnixMicro()}
	if err := bulkClicks(ctx, g.db, g.engine, span, bulkBatch); err != nil {
		g.t.Fatalf("bulk fill clicks: %v", err)
	}
	g.clicks = want
}

func newGrower(t *testing.T, db *store.DB, engine, dir string) *grower {
	return &grower{t: t, db: db, engine: engine, dir: dir, rnd: rand.New(rand.NewPCG(1, 2)), now: time.Now(), users: max(1, scaled(*users))}
}

func (g *grower) growTo(ctx context.Context, links, clicks, notifs int64) {
	g.t.Helper()
	began := time.Now()
	g.growLinks(ctx, max(links, sampleCodes)) // the redirects spread over as many links at every step
	g.t.Logf("%s: links to %d in %s", g.engine, g.links, time.Since(began).Round(time.Millisecond))
	if clicks > g.clicks {
		began = time.Now()
		before := g.size(ctx)
		added := clicks - g.clicks
		how := "bulk SQL"
		if g.clicks == 0 && *storeClicks {
			how = "the store (the flusher's RecordClicks)"
			var took time.Duration
			measuring(func() {
				began = time.Now()
				g.growClicks(ctx, clicks)
				took = time.Since(began)
			})
			g.flushNote = fmt.Sprintf("\nClicks through the store (RecordClicks, batches of %d, %d writers), 0 to %d clicks: %.1f µs a click, %.0f clicks/s.\n",
				clickBatch, g.writers(), clicks, float64(took.Microseconds())/float64(added), float64(added)/max(took.Seconds(), 1e-9))
		} else {
			g.bulkGrowClicks(ctx, clicks)
		}
		g.bytesPC = float64(g.size(ctx)-before) / float64(added)
		took := time.Since(began)
		g.t.Logf("%s: clicks to %d by %s in %s (%.0f clicks/s)", g.engine, g.clicks, how, took.Round(time.Millisecond), float64(added)/max(took.Seconds(), 1e-9))
	}
	began = time.Now()
	g.growNotifications(ctx, notifs)
	g.t.Logf("%s: notifications to %d in %s", g.engine, g.notifs, time.Since(began).Round(time.Millisecond))
	g.analyze(ctx)
}

// analyze gives PostgreSQL's planner the statistics of what the step
// wrote. A store that grew over 90 days has them (autovacuum analyzes a
// table as a tenth of it changes), but the fill writes tens of millions of
// rows in minutes, faster than autovacuum's workers, busy vacuuming the
// clicks, get to analyze them. Without them the planner takes a user's
// 17 notifications for 600,000 deliveries and scans the table in
// parallel: the first full-size run's history page ran past the 10 s
// statement timeout. What an operator runs after a bulk load or a
// restore (docs/operations.md).
func (g *grower) analyze(ctx context.Context) {
	if g.engine != "postgres" {
		return
	}
	began := time.Now()
	err := filling(func() error {
		return g.db.InTx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `DO $$ DECLARE t text; BEGIN
				FOR t IN SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = current_schema() LOOP
					EXECUTE 'ANALYZE ' || t;
				END LOOP; END $$`)
			return err
		})
	})
	if err != nil {
		g.t.Fatalf("analyze: %v", err)
	}
	g.t.Logf("%s: analyzed in %s", g.engine, time.Since(began).Round(time.Millisecond))
}

func (g *grower) growLinks(ctx context.Context, want int64) {
	for g.links < want {
		n := int(min(linkBatch, want-g.links))
		batch := make([]shorten.NewLink, n)
		for i := range batch {
			j := g.links + int64(i)
			batch[i] = shorten.NewLink{URL: "https://shop.example.com/p/" + strconv.FormatInt(j, 10), Owner: "scale", CreatedAt: g.madeAt(j)}
		}
		var out []shorten.Link
		err := filling(func() (err error) {
			out, _, err = g.db.CreateLinks(ctx, batch, func(id int64) (string, error) { return "s" + strconv.FormatInt(id, 36), nil })
			return err
		})
		if err != nil {
			g.t.Fatalf("create links: %v", err)
		}
		for _, l := range out {
			g.ids = append(g.ids, l.ID)
			g.links++
			// Reservoir sampling keeps sampleCodes codes picked evenly
			// from every link made so far; the hot link stays first.
			switch {
			case len(g.codes) < sampleCodes:
				g.codes = append(g.codes, l.Code)
			default:
				if j := g.rnd.Int64N(g.links); j > 0 && j < sampleCodes {
					g.codes[j] = l.Code
				}
			}
		}
	}
}

var (
	countries = []string{"US", "DE", "FR", "GB", "BR", "IN", "JP", "ES", "IT", "NL", "PL", "SE", "CA", "MX", "AU", "KR", "TR", "ID", "NG", ""}
	devices   = []string{shorten.DeviceMobile, shorten.DeviceMobile, shorten.DeviceDesktop, shorten.DeviceTablet}
	systems   = []string{"android", "ios", "windows", "macos", "linux"}
	referrers = []string{"", "", "", "t.co", "www.google.com", "l.facebook.com", "news.ycombinator.com", "www.reddit.com"}
	languages = []string{"en", "de", "fr", "es", "pt", "ja", ""}
)

// growClicks records clicks through the store as the flusher does, in
// batches of 4,096, one writer on SQLite and four on PostgreSQL. The
// batches walk the links in order (each link's clicks together, a tenth of
// every batch on the hot link), as a flusher's batch holds the links
// clicked in its second rather than a random draw from every link ever
// made.
func (g *grower) growClicks(ctx context.Context, want int64) {
	writers := g.writers()
	work := make(chan []shorten.Click, writers)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for batch := range work {
				if err := g.db.RecordClicks(ctx, batch); err != nil {
					errs <- err
					for range work {
					}
					return
				}
			}
		}()
	}
	total := want - g.clicks
	perLink := float64(total) * (1 - 1.0/hotClickShare) / float64(len(g.ids))
	var owed float64
	batch := make([]shorten.Click, 0, clickBatch)
	j := 0
	for made := int64(0); made < total; made++ {
		var c shorten.Click
		if g.rnd.IntN(hotClickShare) == 0 {
			c = g.click(0, g.now.Add(-time.Duration(g.rnd.Int64N(int64(window)))))
		} else {
			for owed < 1 {
				j = (j + 1) % len(g.ids)
				owed += perLink * 2 * g.rnd.Float64() // mean perLink
			}
			owed--
			at := g.madeAt(int64(j)).Add(time.Duration(g.rnd.ExpFloat64() * float64(6*time.Hour)))
			if at.After(g.now) {
				at = g.now
			}
			c = g.click(j, at)
		}
		batch = append(batch, c)
		if len(batch) == clickBatch || made == total-1 {
			select {
			case work <- batch:
			case err := <-errs:
				close(work)
				wg.Wait()
				g.t.Fatalf("record clicks: %v", err)
			}
			batch = make([]shorten.Click, 0, clickBatch)
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		g.t.Fatalf("record clicks: %v", err)
	default:
	}
	g.clicks = want
}

// madeAt is when link j (counted from 0) was made.
func (g *grower) madeAt(j int64) time.Time {
	return g.now.Add(-window + time.Duration(float64(window)*float64(j)/float64(max(1, scaled(*links)))))
}

// click is a hit on link j at at, from a random visitor with random
// dimensions; one in twenty is a bot's.
func (g *grower) click(j int, at time.Time) shorten.Click {
	rnd := g.rnd
	var v [16]byte
	for i := range v {
		v[i] = byte(rnd.Uint32())
	}
	return shorten.Click{
		LinkID:  g.ids[j],
		At:      at,
		Bot:     rnd.IntN(20) == 0,
		Visitor: hex.EncodeToString(v[:]),
		Dimensions: shorten.Dimensions{
			Country:  countries[rnd.IntN(len(countries))],
			Device:   devices[rnd.IntN(len(devices))],
			OS:       systems[rnd.IntN(len(systems))],
			Referrer: referrers[rnd.IntN(len(referrers))],
			Language: languages[rnd.IntN(len(languages))],
		},
	}
}

// growNotifications adds notifications and their deliveries (and dead
// letters) with one INSERT ... SELECT per table and batch, spread evenly
// over the 90 days of the largest step.
func (g *grower) growNotifications(ctx context.Context, want int64) {
	final := max(1, scaled(*notifs))
	stepMicros := window.Microseconds() / final
	from := g.now.Add(-window).UnixMicro()
	for g.notifs < want {
		lo, hi := g.notifs, min(want, g.notifs+notifBatch)
		err := filling(func() error {
			return g.db.InTx(ctx, func(tx *sql.Tx) error {
				for _, q := range notificationFill(g.engine) {
					if _, err := tx.ExecContext(ctx, q, lo, hi, g.users, from, stepMicros); err != nil {
						return fmt.Errorf("%w\n%s", err, q)
					}
				}
				return nil
			})
		})
		if err != nil {
			g.t.Fatalf("fill notifications: %v", err)
		}
		g.notifs = hi
	}
}

// notificationFill is the fill's statements for one batch; each takes
// (lo, hi, users, from, step): notifications lo to hi-1, user i % users,
// created at from + i*step microseconds.
func notificationFill(engine string) []string {
	series, id, user, dl := "WITH RECURSIVE s(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < ?2) ",
		"printf('n%012d', i)", "'u' || (i % ?3)", "printf('d%012d', i)"
	from := " FROM s"
	if engine == "postgres" {
		series, id, user, dl = "", "'n' || lpad(i::text, 12, '0')", "'u' || (i % $3)", "'d' || lpad(i::text, 12, '0')"
		from = " FROM generate_series($1::bigint, $2::bigint - 1) AS s(i)"
	}
	at := "(?4 + i * ?5)"
	if engine == "postgres" {
		at = "($4 + i * $5)"
	}
	category := "CASE WHEN i % 10 = 0 THEN 'critical' WHEN i % 10 < 7 THEN 'orders' ELSE 'marketing' END"
	status := "CASE WHEN i % 1000 = 0 THEN 'dead' ELSE 'delivered' END"
	return []string{
		series + "INSERT INTO notifications (id, request_id, request_hash, user_id, type, category, data, channels, expires_at, created_at) " +
			"SELECT " + id + ", NULL, '', " + user + ", 'order_shipped', " + category + `, '{"order":"A-1042","carrier":"DHL"}', '[]', NULL, ` + at + from,
		series + "INSERT INTO deliveries (notification_id, channel, user_id, category, provider, status, attempts, error, next_attempt_at, expires_at, created_at, updated_at) " +
			"SELECT " + id + ", 'email', " + user + ", " + category + ", 'smtp', " + status + ", 1, '', NULL, NULL, " + at + ", " + at + from,
		series + "INSERT INTO deliveries (notification_id, channel, user_id, category, provider, status, attempts, error, next_attempt_at, expires_at, created_at, updated_at) " +
			"SELECT " + id + ", 'push', " + user + ", " + category + ", 'fcm', 'delivered', 1, '', NULL, NULL, " + at + ", " + at + from + " WHERE i % 4 < 3",
		series + "INSERT INTO dead_letters (id, notification_id, channel, user_id, error, attempts, created_at, replayed_at) " +
			"SELECT " + dl + ", " + id + ", 'email', " + user + ", 'smtp: 550 mailbox unavailable', 5, " + at + ", NULL" + from + " WHERE i % 1000 = 0",
	}
}

// size is what the store takes on disk: SQLite's file and its WAL, or the
// relations (with indexes and TOAST) of PostgreSQL's schema.
func (g *grower) size(ctx context.Context) int64 {
	if g.engine == "sqlite" {
		// The WAL keeps its largest size: fold it into the file first, on
		// a connection of the harness's own.
		path := filepath.Join(g.dir, "sluice.db")
		c, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
		if err == nil {
			_, err = c.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
			err = errors.Join(err, c.Close())
		}
		if err != nil {
			g.t.Fatalf("checkpoint: %v", err)
		}
		st, err := os.Stat(path)
		if err != nil {
			g.t.Fatal(err)
		}
		return st.Size()
	}
	var n int64
	err := g.db.InTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c
			JOIN pg_namespace ns ON ns.oid = c.relnamespace WHERE ns.nspname = current_schema() AND c.relkind = 'r'`).Scan(&n)
	})
	if err != nil {
		g.t.Fatalf("schema size: %v", err)
	}
	return n
}

// purge deletes the clicks of the oldest -scale.purge of the window (a
// hundredth: the rate, not the size, is what it measures) as
// links.click_retention's purge does, in batches of 10,000, and reports
// its rate.
func (g *grower) purge(ctx context.Context) string {
	machine.Lock()
	defer machine.Unlock()
	before := g.now.Add(-window + time.Duration(*purgeShare*float64(window)))
	start := time.Now()
	var deleted int
	var from int64
	for {
		n, next, err := g.db.PurgeClicks(ctx, before, from, 10_000)
		if err != nil {
			g.t.Fatalf("purge clicks: %v", err)
		}
		deleted += n
		if next == 0 || (n == 0 && next == from) {
			break
		}
		from = next
	}
	took := time.Since(start)
	return fmt.Sprintf("\nPurge of the clicks of the oldest %g of the window (batches of 10,000): %d clicks in %s, %.0f clicks/s.\n",
		*purgeShare, deleted, took.Round(time.Millisecond), float64(deleted)/max(took.Seconds(), 1e-9))
}

// keptSchema creates a schema that outlives the run (-scale.keep) and
// returns base with search_path set to it.
func keptSchema(t *testing.T, base string) string {
	var b [4]byte
	_, _ = crand.Read(b[:])
	schema := "sluice_scale_" + hex.EncodeToString(b[:])
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	t.Logf("schema kept: %s", schema)
	return u.String()
}
