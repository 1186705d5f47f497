package store

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/shorten"
)

// pgOutage is how long the PostgreSQL restarts below keep the server down:
// a fault's length, not a wait for a condition.
const pgOutage = time.Second

func testCode(id int64) (string, error) { return "c" + strconv.FormatInt(id, 10), nil }

// ownedLinks returns how many links owner has.
func ownedLinks(t *testing.T, db *DB, owner string) int {
	t.Helper()
	ls, err := db.ListLinks(t.Context(), owner, nil, 0, 100)
	if err != nil {
		t.Fatalf("ListLinks(%s): %v", owner, err)
	}
	return len(ls)
}

// TestCreateLinksAfterALostCommit runs what CreateLinks does when an
// attempt's COMMIT reached the server but its answer was lost: the next
// attempt, with the ids the first reserved, finds its links stored under
// them and reports them created, making none twice; a custom code taken by
// another link stays taken.
func TestCreateLinksAfterALostCommit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openPostgresForTest(t, enginetest.PostgresURL(t))
	now := time.Now()
	if _, created, err := db.CreateLinks(ctx, []shorten.NewLink{{Code: "taken", URL: "https://example.com/other", Owner: "other", CreatedAt: now}}, testCode); err != nil || !created[0] {
		t.Fatalf("CreateLinks(taken) = %v, %v", created, err)
	}
	c := &linkCreate{
		links: []shorten.NewLink{
			{URL: "https://example.com/a", Owner: "me", CreatedAt: now},
			{Code: "mine", URL: "https://example.com/b", Owner: "me", CreatedAt: now},
			{Code: "taken", URL: "https://example.com/c", Owner: "me", CreatedAt: now},
		},
		code: testCode, out: make([]shorten.Link, 3), created: make([]bool, 3),
	}
	if err := db.createLinksAttempt(ctx, c, false); err != nil {
		t.Fatalf("first attempt: %v", err)
	}
	first := append([]shorten.Link(nil), c.out...)
	// Its caller never heard of the commit: the retry.
	if err := db.createLinksAttempt(ctx, c, true); err != nil {
		t.Fatalf("second attempt: %v", err)
	}
	if !c.created[0] || !c.created[1] || c.created[2] {
		t.Errorf("created after the retry = %v, want [true true false] (the taken code stays taken)", c.created)
	}
	for i := range 2 {
		if c.out[i].ID != first[i].ID || c.out[i].Code != first[i].Code {
			t.Errorf("link %d after the retry = id %d code %q, want the first attempt's %d %q", i, c.out[i].ID, c.out[i].Code, first[i].ID, first[i].Code)
		}
	}
	if n := ownedLinks(t, db, "me"); n != 2 {
		t.Errorf("%d links stored for the call, want 2", n)
	}
}

// TestCreateLinksRidesOutAPostgresRestart restarts a private PostgreSQL
// under CreateLinks: a creation while the server is down succeeds once it
// is back within Options.LinkCreateRetry, stored once; one whose window
// ends first fails with a transient Unavailable error (503 with
// Retry-After at the edge) after retrying for the whole window, having
// stored nothing.
func TestCreateLinksRidesOutAPostgresRestart(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pg := enginetest.StartPostgres(t)
	// 10 s rather than the default 4 s, so that a restart slowed by a
	// loaded machine stays inside the window.
	patient := openMigrated(t, Options{URL: pg.URL(), LinkCreateRetry: 10 * time.Second})
	const window = time.Second
	hasty := openMigrated(t, Options{URL: pg.URL(), LinkCreateRetry: window})
	links := func(owner string) []shorten.NewLink {
		return []shorten.NewLink{
			{URL: "https://example.com/" + owner, Owner: owner, CreatedAt: time.Now()},
			{Code: owner + "-slug", URL: "https://example.com/" + owner + "/slug", Owner: owner, CreatedAt: time.Now()},
		}
	}
	type answer struct {
		created []bool
		err     error
	}

	t.Run("back within the window", func(t *testing.T) {
		r := enginetest.AcrossOutage(t, pg, pgOutage, "CreateLinks", func() answer {
			_, created, err := patient.CreateLinks(ctx, links("within"), testCode)
			return answer{created, err}
		})
		if r.err != nil || len(r.created) != 2 || !r.created[0] || !r.created[1] {
			t.Fatalf("CreateLinks across the restart = %v, %v; want both created (the slug is not taken by the call itself)", r.created, r.err)
		}
		if n := ownedLinks(t, patient, "within"); n != 2 {
			t.Errorf("%d links stored, want 2", n)
		}
	})

	t.Run("down past the window", func(t *testing.T) {
		pg.Stop()
		start := time.Now()
		_, _, err := hasty.CreateLinks(ctx, links("past"), testCode)
		took := time.Since(start)
		pg.Start()
		if !apperr.Is(err, apperr.Unavailable) || !apperr.IsTransient(err) {
			t.Fatalf("CreateLinks with PostgreSQL down = %v; want a transient Unavailable error", err)
		}
		if took < window/2 || took > window+10*time.Second {
			t.Errorf("CreateLinks gave up after %v, want about the %v window", took, window)
		}
		if n := ownedLinks(t, hasty, "past"); n != 0 {
			t.Errorf("a failed creation stored %d links", n)
		}
	})

	t.Run("ctx's deadline ends the retries", func(t *testing.T) {
		pg.Stop()
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, _, err := patient.CreateLinks(cctx, links("deadline"), testCode)
		took := time.Since(start)
		pg.Start()
		if err == nil || took > 5*time.Second {
			t.Errorf("CreateLinks under a 300 ms deadline with PostgreSQL down = %v after %v; want an error at about the deadline, not the 10 s window", err, took)
		}
	})
}
