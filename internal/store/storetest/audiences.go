package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/audience"
)

// audiences pins audience.Store: topics and their subscribers, the caps,
// broadcasts' creation, claims, progress and cancel.
func (s suite) audiences(t *testing.T) {
	t.Run("Subscribe", s.auSubscribe)
	t.Run("Caps", s.auCaps)
	t.Run("BroadcastIdempotency", s.auCreate)
	t.Run("ClaimConcurrent", s.auClaim)
	t.Run("CheckpointAndResume", s.auProgress)
	t.Run("Cancel", s.auCancel)
	t.Run("Purge", s.auPurge)
}

var auT0 = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func users(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("u%04d", i)
	}
	return out
}

func (s suite) auSubscribe(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), s.migrated(t)
	all := users(1000)
	if n, err := db.Subscribe(ctx, "news", all, auT0, 10, 10_000); err != nil || n != 1000 {
		t.Fatalf("Subscribe 1,000 = %d, %v; want 1000", n, err)
	}
	if n, err := db.Subscribe(ctx, "news", all[:10], auT0, 10, 10_000); err != nil || n != 0 {
		t.Fatalf("Subscribe again = %d, %v; want 0 (idempotent)", n, err)
	}
	if _, err := db.Subscribe(ctx, "sale", all[:3], auT0, 10, 10_000); err != nil {
		t.Fatal(err)
	}
	var got []string
	for cursor := ""; ; {
		page, err := db.Subscribers(ctx, "news", cursor, 300)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page...)
		if len(page) < 300 {
			break
		}
		cursor = page[len(page)-1]
	}
	if !slices.Equal(got, all) {
		t.Fatalf("paging read %d subscribers, want the 1,000 in order", len(got))
	}
	if gone, err := db.Unsubscribe(ctx, "news", "u0005"); err != nil || !gone {
		t.Fatalf("Unsubscribe = %v, %v", gone, err)
	}
	if gone, err := db.Unsubscribe(ctx, "news", "u0005"); err != nil || gone {
		t.Fatalf("Unsubscribe again = %v, %v; want false", gone, err)
	}
	for _, u := range all[:3] {
		if _, err := db.Unsubscribe(ctx, "sale", u); err != nil {
			t.Fatal(err)
		}
	}
	topics, err := db.Topics(ctx)
	if err != nil || len(topics) != 1 || topics[0].Key != "news" || topics[0].Subscribers != 999 {
		t.Fatalf("Topics = %+v, %v; want news with 999 (sale left empty is gone)", topics, err)
	}
}

func (s suite) auCaps(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), s.migrated(t)
	if _, err := db.Subscribe(ctx, "a", users(5), auT0, 2, 8); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Subscribe(ctx, "b", users(3), auT0, 2, 8); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Subscribe(ctx, "c", users(1), auT0, 2, 100); !apperr.Is(err, apperr.TooMany) {
		t.Fatalf("a third topic past 2 = %v, want TooMany", err)
	}
	if _, err := db.Subscribe(ctx, "a", []string{"x", "y"}, auT0, 2, 8); !apperr.Is(err, apperr.TooMany) {
		t.Fatalf("a ninth subscription past 8 = %v, want TooMany", err)
	}
	if n, err := db.Subscribe(ctx, "a", users(5), auT0, 2, 8); err != nil || n != 0 {
		t.Fatalf("resubscribing at the cap = %d, %v; want 0, nil", n, err)
	}
	topics, _ := db.Topics(ctx)
	if len(topics) != 2 || topics[0].Subscribers != 5 || topics[1].Subscribers != 3 {
		t.Fatalf("Topics after refusals = %+v, want a 5 and b 3", topics)
	}
}

// auBroadcast is a broadcast due at auT0 with one group.
func auBroadcast(id, req string) audience.Broadcast {
	return audience.Broadcast{ID: id, RequestID: req, Hash: "h", Type: "promo", To: audience.To{Topic: "news"},
		Data: []byte(`{}`), Status: audience.StatusScheduled, Planned: true, SendAt: auT0, DueAt: auT0,
		CreatedAt: auT0, UpdatedAt: auT0, Groups: []audience.Group{{DueAt: auT0}}}
}

func (s suite) auCreate(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), s.migrated(t)
	b, created, err := db.CreateBroadcast(ctx, auBroadcast("bc_1", "r1"), 2)
	if err != nil || !created {
		t.Fatalf("CreateBroadcast = %v, %v", created, err)
	}
	again, created, err := db.CreateBroadcast(ctx, auBroadcast("bc_2", "r1"), 2)
	if err != nil || created || again.ID != b.ID {
		t.Fatalf("CreateBroadcast with the same request id = %s %v %v, want bc_1, false", again.ID, created, err)
	}
	if _, _, err := db.CreateBroadcast(ctx, auBroadcast("bc_3", "r3"), 2); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.CreateBroadcast(ctx, auBroadcast("bc_4", "r4"), 2); !apperr.Is(err, apperr.TooMany) {
		t.Fatalf("a third live broadcast past 2 = %v, want TooMany", err)
	}
	got, err := db.Broadcast(ctx, "bc_1")
	if err != nil || got.Type != "promo" || got.To.Topic != "news" || len(got.Groups) != 1 || !got.DueAt.Equal(auT0) {
		t.Fatalf("Broadcast = %+v, %v", got, err)
	}
	list, err := db.Broadcasts(ctx, "", 10)
	if err != nil || len(list) != 2 || list[0].ID != "bc_3" {
		t.Fatalf("Broadcasts = %v, %v; want bc_3, bc_1", list, err)
	}
	if list, _ := db.Broadcasts(ctx, "bc_3", 10); len(list) != 1 || list[0].ID != "bc_1" {
		t.Fatalf("Broadcasts before bc_3 = %v, want bc_1", list)
	}
	if _, err := db.Broadcast(ctx, "bc_none"); !apperr.Is(err, apperr.NotFound) {
		t.Fatalf("Broadcast of an unknown id = %v, want NotFound", err)
	}
}

func (s suite) auClaim(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), s.migrated(t)
	if _, _, err := db.CreateBroadcast(ctx, auBroadcast("bc_1", "r1"), 10); err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		claims int
		wg     sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			_, ok, err := db.ClaimBroadcast(ctx, auT0, time.Minute)
			if err != nil {
				t.Errorf("ClaimBroadcast: %v", err)
			}
			if ok {
				mu.Lock()
				claims++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if claims != 1 {
		t.Fatalf("8 concurrent claims took the broadcast %d times, want 1", claims)
	}
	if _, ok, _ := db.ClaimBroadcast(ctx, auT0.Add(59*time.Second), time.Minute); ok {
		t.Fatal("claimed again within the lease")
	}
	if _, ok, _ := db.ClaimBroadcast(ctx, auT0.Add(time.Minute), time.Minute); !ok {
		t.Fatal("not claimed once the lease lapsed")
	}
}

func (s suite) auProgress(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), s.migrated(t)
	b := auBroadcast("bc_1", "r1")
	b.Planned, b.Groups = false, nil
	if _, _, err := db.CreateBroadcast(ctx, b, 10); err != nil {
		t.Fatal(err)
	}
	c, ok, err := db.ClaimBroadcast(ctx, auT0, time.Minute)
	if err != nil || !ok {
		t.Fatalf("ClaimBroadcast = %v, %v", ok, err)
	}
	plan := []audience.Group{{Timezone: "Europe/Berlin", DueAt: auT0}, {Timezone: "America/New_York", DueAt: auT0.Add(6 * time.Hour)}}
	seq, err := db.SaveProgress(ctx, audience.Progress{ID: c.ID, Seq: c.Seq, Status: audience.StatusSending, DueAt: auT0.Add(time.Minute), Plan: plan, Now: auT0})
	if err != nil {
		t.Fatal(err)
	}
	seq, err = db.SaveProgress(ctx, audience.Progress{ID: c.ID, Seq: seq, Status: audience.StatusSending, DueAt: auT0.Add(time.Minute),
		Group: &audience.Group{Timezone: "Europe/Berlin", Cursor: "u0499"}, Targeted: 500, Accepted: 498, Skipped: 2, Now: auT0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.SaveProgress(ctx, audience.Progress{ID: c.ID, Seq: seq - 1, Status: audience.StatusDone, Now: auT0}); !apperr.Is(err, apperr.Conflict) {
		t.Fatalf("a write on a stale seq = %v, want Conflict", err)
	}
	// The node dies: the lease lapses and another claim resumes.
	r, ok, err := db.ClaimBroadcast(ctx, auT0.Add(time.Minute), time.Minute)
	if err != nil || !ok {
		t.Fatalf("resume claim = %v, %v", ok, err)
	}
	if !r.Planned || r.Status != audience.StatusSending || r.Targeted != 500 || r.Accepted != 498 || r.Skipped != 2 ||
		len(r.Groups) != 2 || r.Groups[0].Timezone != "Europe/Berlin" || r.Groups[0].Cursor != "u0499" || r.Groups[0].Done || r.Groups[1].Cursor != "" {
		t.Fatalf("resumed broadcast = %+v", r)
	}
	if _, err := db.SaveProgress(ctx, audience.Progress{ID: c.ID, Seq: seq, Status: audience.StatusSending, Now: auT0}); !apperr.Is(err, apperr.Conflict) {
		t.Fatalf("the first node's write after the lapse = %v, want Conflict", err)
	}
	if _, err := db.SaveProgress(ctx, audience.Progress{ID: r.ID, Seq: r.Seq, Status: audience.StatusDone,
		Group: &audience.Group{Timezone: "Europe/Berlin", Cursor: "u0600", Done: true}, Now: auT0}); err != nil {
		t.Fatal(err)
	}
	done, _ := db.Broadcast(ctx, "bc_1")
	if done.Status != audience.StatusDone || !done.DueAt.IsZero() || !done.Groups[0].Done || done.Groups[0].Cursor != "u0600" {
		t.Fatalf("finished broadcast = %+v", done)
	}
	if _, ok, _ := db.ClaimBroadcast(ctx, auT0.Add(time.Hour), time.Minute); ok {
		t.Fatal("a done broadcast was claimed")
	}
}

func (s suite) auCancel(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), s.migrated(t)
	if _, _, err := db.CreateBroadcast(ctx, auBroadcast("bc_1", "r1"), 10); err != nil {
		t.Fatal(err)
	}
	c, _, err := db.ClaimBroadcast(ctx, auT0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.CancelBroadcast(ctx, "bc_1", auT0)
	if err != nil || got.Status != audience.StatusCanceled || !got.DueAt.IsZero() {
		t.Fatalf("CancelBroadcast = %+v, %v", got, err)
	}
	if _, err := db.SaveProgress(ctx, audience.Progress{ID: c.ID, Seq: c.Seq, Status: audience.StatusSending, Now: auT0}); !apperr.Is(err, apperr.Conflict) {
		t.Fatalf("the sender's write after cancel = %v, want Conflict", err)
	}
	if _, ok, _ := db.ClaimBroadcast(ctx, auT0.Add(time.Hour), time.Minute); ok {
		t.Fatal("a canceled broadcast was claimed")
	}
	if again, err := db.CancelBroadcast(ctx, "bc_1", auT0); err != nil || again.Status != audience.StatusCanceled {
		t.Fatalf("cancel again = %+v, %v", again, err)
	}
	if _, err := db.CancelBroadcast(ctx, "bc_none", auT0); !apperr.Is(err, apperr.NotFound) {
		t.Fatalf("cancel of an unknown id = %v, want NotFound", err)
	}
}

func (s suite) auPurge(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), s.migrated(t)
	for _, id := range []string{"bc_1", "bc_2", "bc_3"} {
		if _, _, err := db.CreateBroadcast(ctx, auBroadcast(id, "r"+id), 10); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.CancelBroadcast(ctx, "bc_1", auT0); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CancelBroadcast(ctx, "bc_2", auT0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	n, err := db.PurgeBroadcasts(ctx, auT0.Add(time.Minute), 10)
	if err != nil || n != 1 {
		t.Fatalf("PurgeBroadcasts = %d, %v; want bc_1 only", n, err)
	}
	if _, err := db.Broadcast(ctx, "bc_1"); !apperr.Is(err, apperr.NotFound) {
		t.Fatalf("bc_1 after the purge: %v, want NotFound", err)
	}
	// bc_2 ended after the cut, bc_3 is live (scheduled): both stay.
	if n, _ := db.PurgeBroadcasts(ctx, auT0.Add(time.Minute), 10); n != 0 {
		t.Fatalf("a second purge deleted %d", n)
	}
	for _, id := range []string{"bc_2", "bc_3"} {
		if b, err := db.Broadcast(ctx, id); err != nil || len(b.Groups) != 1 {
			t.Fatalf("%s after the purge: %+v, %v", id, b, err)
		}
	}
}
