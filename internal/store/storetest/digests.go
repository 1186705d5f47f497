package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/store"
)

func (s suite) digests(t *testing.T) {
	t.Run("WindowsAndItems", s.digestWindows)
	t.Run("ConcurrentJoins", s.digestConcurrentJoins)
	t.Run("TemplateRules", s.digestTemplateRules)
}

// join saves notification id of user at at, digested on email, joining a
// digest of window w and max items.
func join(t *testing.T, db *store.DB, id, reqID, user string, at time.Time, w time.Duration, maxItems int) bool {
	t.Helper()
	n, ds := newNotification(id, reqID, user, at, notify.Email)
	n.Data = []byte(fmt.Sprintf(`{"order":%q}`, id))
	ds[0].Status, ds[0].Error = notify.StatusSuppressed, notify.ReasonDigested
	_, created, err := db.CreateDigested(t.Context(), n, ds,
		[]notify.DigestJoin{{Channel: notify.Email, Window: w, MaxItems: maxItems, NewID: "dig_" + id}})
	if err != nil {
		t.Errorf("CreateDigested(%s): %v", id, err)
	}
	return created
}

// digestWindows pins a window's life: the first event opens it, later ones
// join it in order, a repeated request_id joins nothing (a repeated id is
// reported created and joins nothing either), a full digest is
// closed and due at once, an ended window makes the next event open a new
// one, closing stops joins, and DigestsOf shows both sides.
func (s suite) digestWindows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	w := 10 * time.Minute
	join(t, db, "ntf_a", "req-a", "u1", t0, w, 3)
	join(t, db, "ntf_b", "", "u1", t0.Add(time.Minute), w, 3)
	// The same notification again (a retry whose first commit's answer was
	// lost): reported created, joined once (CloseDigest below counts 2).
	if !join(t, db, "ntf_b", "", "u1", t0.Add(time.Minute), w, 3) {
		t.Error("CreateDigested of a notification already stored under its id: not reported created")
	}
	if join(t, db, "ntf_a2", "req-a", "u1", t0.Add(2*time.Minute), w, 3) {
		t.Fatal("a repeated request_id was created again")
	}
	join(t, db, "ntf_other", "", "u2", t0, w, 3) // another user: a digest of its own

	if due, err := db.DueDigests(ctx, t0.Add(w-time.Microsecond), 10); err != nil || len(due) != 0 {
		t.Fatalf("DueDigests inside the window = %+v, %v; want none", due, err)
	}
	due, err := db.DueDigests(ctx, t0.Add(w), 10)
	if err != nil || len(due) != 2 || due[0].Count+due[1].Count != 3 {
		t.Fatalf("DueDigests at the window's end = %+v, %v; want u1's (2 items) and u2's (1)", due, err)
	}
	d, err := db.CloseDigest(ctx, "dig_ntf_a")
	if err != nil || !d.Closed || d.Count != 2 || len(d.Items) != 2 || d.Items[0].NotificationID != "ntf_a" ||
		d.Items[1].NotificationID != "ntf_b" || string(d.Items[1].Data) != `{"order":"ntf_b"}` ||
		d.UserID != "u1" || d.Channel != notify.Email || d.Type != "order.shipped" || !d.WindowEnd.Equal(t0.Add(w)) {
		t.Fatalf("CloseDigest = %+v, %v", d, err)
	}
	// Closed: the next event opens a new window, even before the old one ends.
	join(t, db, "ntf_c", "", "u1", t0.Add(3*time.Minute), w, 3)
	if d, _ := db.CloseDigest(ctx, "dig_ntf_a"); d.Count != 2 {
		t.Errorf("a closed digest took an event: count %d", d.Count)
	}
	if _, err := db.CloseDigest(ctx, "dig_none"); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("CloseDigest(unknown) = %v, want NotFound", err)
	}

	// Full: closed and due at once; the next event opens another.
	join(t, db, "ntf_d", "", "u1", t0.Add(4*time.Minute), w, 3)
	join(t, db, "ntf_e", "", "u1", t0.Add(5*time.Minute), w, 3)
	due, err = db.DueDigests(ctx, t0.Add(5*time.Minute), 10)
	if err != nil || len(due) != 1 || due[0].ID != "dig_ntf_c" || due[0].Count != 3 || !due[0].Closed {
		t.Fatalf("DueDigests after a digest filled = %+v, %v; want dig_ntf_c, full and closed", due, err)
	}
	join(t, db, "ntf_f", "", "u1", t0.Add(6*time.Minute), w, 3)

	// Ended but not yet sent: the next event closes it and opens a new one.
	join(t, db, "ntf_g", "", "u1", t0.Add(6*time.Minute+w), w, 3)
	if d, _ := db.CloseDigest(ctx, "dig_ntf_f"); d.Count != 1 {
		t.Errorf("an ended window took an event: count %d", d.Count)
	}

	n, ds := newNotification("ntf_msg", "digest:dig_ntf_a", "u1", t0.Add(w), notify.Email)
	mustCreate(t, db, n, ds)
	for range 2 {
		if err := db.MarkDigestSent(ctx, "dig_ntf_a", "ntf_msg"); err != nil {
			t.Fatalf("MarkDigestSent: %v", err)
		}
	}
	if err := db.MarkDigestSent(ctx, "dig_ntf_a", "ntf_other"); err != nil {
		t.Fatalf("MarkDigestSent again: %v", err)
	}
	for _, id := range []string{"ntf_msg", "ntf_b"} {
		ds, err := db.DigestsOf(ctx, id)
		if err != nil || len(ds) != 1 || ds[0].ID != "dig_ntf_a" || ds[0].NotificationID != "ntf_msg" || len(ds[0].Items) != 2 ||
			ds[0].Items[1].NotificationID != "ntf_b" || string(ds[0].Items[1].Data) != "{}" {
			t.Errorf("DigestsOf(%s) = %+v, %v; want dig_ntf_a with its message ntf_msg and 2 items, their data left out", id, ds, err)
		}
	}
	due, err = db.DueDigests(ctx, t0.Add(time.Hour), 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range due {
		if d.ID == "dig_ntf_a" {
			t.Errorf("a sent digest is still due: %+v", d)
		}
	}
	if ds, err := db.DigestsOf(ctx, "ntf_none"); err != nil || len(ds) != 0 {
		t.Errorf("DigestsOf(unknown) = %+v, %v; want none", ds, err)
	}
}

// digestConcurrentJoins: many events of one user at once, on one store,
// make exactly one digest with exactly their count (nothing lost, nothing
// twice), whatever the engine's locking.
func (s suite) digestConcurrentJoins(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	const events = 60
	var wg sync.WaitGroup
	for i := range events {
		wg.Go(func() {
			join(t, db, fmt.Sprintf("ntf_%03d", i), "", "u1", t0.Add(time.Duration(i)*time.Microsecond), time.Minute, 1000)
		})
	}
	wg.Wait()
	due, err := db.DueDigests(ctx, t0.Add(time.Hour), 10)
	if err != nil || len(due) != 1 || due[0].Count != events {
		t.Fatalf("DueDigests = %+v, %v; want one digest of %d", due, err, events)
	}
	d, err := db.CloseDigest(ctx, due[0].ID)
	if err != nil || len(d.Items) != events {
		t.Fatalf("CloseDigest: %d items, %v; want %d", len(d.Items), err, events)
	}
	seen := map[string]bool{}
	for _, it := range d.Items {
		seen[it.NotificationID] = true
	}
	if len(seen) != events {
		t.Errorf("%d distinct events in the digest, want %d", len(seen), events)
	}
}

// digestTemplateRules: a template's digest and escalation rules are
// stored with it and replaced with it.
func (s suite) digestTemplateRules(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	tpl := notify.Template{Type: "news", Category: notify.Marketing, UpdatedAt: t0,
		Channels:   map[string]map[string]notify.Content{"default": {"en": {Body: "{count} news:\n{items}"}}},
		Digest:     &notify.DigestRule{Window: "10m", MaxItems: 20, Item: "- {title}"},
		Escalation: &notify.EscalationRule{After: "1h", Unless: []string{"clicked"}, To: []notify.Channel{notify.SMS}}}
	if err := db.PutTemplate(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	got, found, err := db.Template(ctx, "news")
	if err != nil || !found || got.Digest == nil || *got.Digest != *tpl.Digest || got.Escalation == nil ||
		got.Escalation.After != "1h" || len(got.Escalation.To) != 1 || got.Escalation.Unless[0] != "clicked" {
		t.Fatalf("Template = %+v, %v, %v", got, found, err)
	}
	tpl.Digest, tpl.Escalation = nil, nil
	if err := db.PutTemplate(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := db.Template(ctx, "news"); got.Digest != nil || got.Escalation != nil {
		t.Errorf("rules survived a template without them: %+v", got)
	}
}
