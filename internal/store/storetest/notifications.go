package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/store"
)

func (s suite) notifications(t *testing.T) {
	t.Run("CreateAndRead", s.notificationCreate)
	t.Run("UserHistoryPages", s.notificationPages)
	t.Run("FinishAttemptOnce", s.notificationFinish)
	t.Run("FinishAttemptWithOutbox", s.notificationFinishOutbox)
	t.Run("Claims", s.notificationClaims)
	t.Run("ClaimRace", s.notificationClaimRace)
	t.Run("Cancel", s.notificationCancel)
	t.Run("CancelRace", s.notificationCancelRace)
	t.Run("DueAndStale", s.notificationDue)
	t.Run("SettingsAndTemplates", s.notificationSettings)
	t.Run("Templates", s.notificationTemplates)
	t.Run("Outbox", s.notificationOutbox)
	t.Run("DeleteBefore", s.notificationDelete)
	t.Run("GroupCommit", s.groupCommit)
	t.Run("GroupCommitFailure", s.groupCommitFailure)
	t.Run("UrgentWrites", s.urgentFirst)
	t.Run("Receipts", s.receipts)
}

var t0 = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// newNotification makes a notification of user at created with one
// delivery per channel given, all queued.
func newNotification(id, reqID, user string, created time.Time, chs ...notify.Channel) (notify.Notification, []notify.Delivery) {
	n := notify.Notification{ID: id, RequestID: reqID, RequestHash: "h-" + id, UserID: user, Type: "order.shipped",
		Category: notify.Orders, Data: json.RawMessage(`{"order":"#42"}`), Channels: chs, ExpiresAt: created.Add(time.Hour), CreatedAt: created}
	var ds []notify.Delivery
	for _, ch := range chs {
		ds = append(ds, notify.Delivery{NotificationID: id, Channel: ch, UserID: user, Category: notify.Orders, Provider: "outbox",
			Status: notify.StatusQueued, ExpiresAt: n.ExpiresAt, CreatedAt: created, UpdatedAt: created})
	}
	return n, ds
}

func mustCreate(t *testing.T, db *store.DB, n notify.Notification, ds []notify.Delivery) {
	t.Helper()
	if _, created, err := db.CreateNotification(t.Context(), n, ds); err != nil || !created {
		t.Fatalf("CreateNotification(%s) = %v, %v; want created", n.ID, created, err)
	}
}

func (s suite) notificationCreate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	n, ds := newNotification("ntf_1", "req-1", "u1", t0.Add(123456*time.Microsecond), notify.Push, notify.Email)
	mustCreate(t, db, n, ds)

	rec, err := db.Notification(ctx, "ntf_1")
	if err != nil {
		t.Fatalf("Notification: %v", err)
	}
	if rec.RequestID != "req-1" || rec.UserID != "u1" || string(rec.Data) != `{"order":"#42"}` || !rec.CreatedAt.Equal(n.CreatedAt) ||
		!rec.ExpiresAt.Equal(n.ExpiresAt) || fmt.Sprint(rec.Channels) != "[push email]" || rec.Category != notify.Orders {
		t.Errorf("Notification = %+v", rec.Notification)
	}
	if len(rec.Deliveries) != 2 || rec.Deliveries[0].Channel != notify.Email || rec.Deliveries[1].Channel != notify.Push {
		t.Errorf("deliveries = %+v, want email then push (channel order)", rec.Deliveries)
	}
	// A repeated request_id saves nothing and returns the first.
	dup, dupDs := newNotification("ntf_2", "req-1", "u1", t0, notify.SMS)
	existing, created, err := db.CreateNotification(ctx, dup, dupDs)
	if err != nil || created || existing.ID != "ntf_1" || existing.RequestHash != "h-ntf_1" {
		t.Errorf("CreateNotification(same request_id) = %+v, %v, %v; want ntf_1, not created", existing, created, err)
	}
	if _, err := db.Notification(ctx, "ntf_2"); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("the duplicate was saved: %v", err)
	}
	// No request_id: never a duplicate.
	for _, id := range []string{"ntf_3", "ntf_4"} {
		n, ds := newNotification(id, "", "u1", t0, notify.SMS)
		mustCreate(t, db, n, ds)
	}
	// The same notification again (same id: a retry of a create whose
	// commit happened but whose answer was lost) is reported created and
	// saves nothing more, with a request_id and without.
	again, againDs := newNotification("ntf_3", "", "u1", t0, notify.SMS)
	mustCreate(t, db, again, againDs)
	mustCreate(t, db, n, ds)
	if recs, err := db.UserNotifications(ctx, "u1", t0.Add(-time.Hour), notify.Cursor{}, 10); err != nil || len(recs) != 3 {
		t.Errorf("UserNotifications after creating ntf_1 and ntf_3 again = %d records, %v; want 3 (ntf_1, ntf_3, ntf_4)", len(recs), err)
	} else {
		for _, r := range recs {
			if want := map[string]int{"ntf_1": 2, "ntf_3": 1, "ntf_4": 1}[r.ID]; len(r.Deliveries) != want {
				t.Errorf("%s has %d deliveries after its create was repeated, want %d", r.ID, len(r.Deliveries), want)
			}
		}
	}
	if got, err := db.NotificationByRequestID(ctx, "req-1"); err != nil || got.ID != "ntf_1" {
		t.Errorf("NotificationByRequestID = %v, %v", got.ID, err)
	}
	if _, err := db.NotificationByRequestID(ctx, "nope"); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("NotificationByRequestID(absent) = %v, want NotFound", err)
	}
	if _, err := db.Delivery(ctx, notify.DeliveryKey{NotificationID: "ntf_1", Channel: notify.SMS}); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("Delivery(absent) = %v, want NotFound", err)
	}
	checkPipelined(t, db)
}

func (s suite) notificationPages(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	// Two share a time: id breaks the tie. One is too old, one another user's.
	for _, c := range []struct {
		id, user string
		at       time.Time
	}{{"a", "u1", t0}, {"b", "u1", t0.Add(time.Second)}, {"c", "u1", t0.Add(time.Second)}, {"d", "u1", t0.Add(2 * time.Second)},
		{"old", "u1", t0.Add(-48 * time.Hour)}, {"x", "u2", t0.Add(time.Second)}} {
		n, ds := newNotification(c.id, "", c.user, c.at, notify.Email)
		mustCreate(t, db, n, ds)
	}
	var got []string
	after := notify.Cursor{}
	for range 5 {
		recs, err := db.UserNotifications(ctx, "u1", t0.Add(-time.Hour), after, 2)
		if err != nil {
			t.Fatalf("UserNotifications: %v", err)
		}
		for _, r := range recs {
			got = append(got, r.ID)
			if len(r.Deliveries) != 1 {
				t.Errorf("%s has %d deliveries, want 1", r.ID, len(r.Deliveries))
			}
		}
		if len(recs) < 2 {
			break
		}
		after = notify.Cursor{At: recs[len(recs)-1].CreatedAt, ID: recs[len(recs)-1].ID}
	}
	if fmt.Sprint(got) != "[d c b a]" {
		t.Errorf("pages = %v, want [d c b a] (newest first, ties by id, nothing before since)", got)
	}
}

// notificationFinishOutbox: an outbox entry is stored with the sent
// outcome that carries it, and not by a stale copy of the job.
func (s suite) notificationFinishOutbox(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	n, ds := newNotification("ntf_o", "", "u1", t0, notify.Email, notify.SMS)
	mustCreate(t, db, n, ds)
	entry := func(ch notify.Channel, body string) *notify.OutboxEntry {
		return &notify.OutboxEntry{NotificationID: "ntf_o", Channel: ch, Attempt: 1, UserID: "u1", To: "u1", Body: body, CreatedAt: t0}
	}
	key := notify.DeliveryKey{NotificationID: "ntf_o", Channel: notify.Email}
	sent := notify.Attempt{Key: key, Status: notify.StatusSent, Attempts: 1, At: t0, Outbox: entry(notify.Email, "first")}
	if ok, err := db.FinishAttempt(ctx, sent, nil); err != nil || !ok {
		t.Fatalf("FinishAttempt(sent) = %v, %v", ok, err)
	}
	stale := sent
	stale.Outbox = entry(notify.Email, "second copy")
	if ok, err := db.FinishAttempt(ctx, stale, nil); err != nil || ok {
		t.Fatalf("FinishAttempt(stale copy) = %v, %v; want false", ok, err)
	}
	es, err := db.OutboxEntries(ctx, notify.OutboxFilter{NotificationID: "ntf_o"}, notify.Cursor{}, 10)
	if err != nil || len(es) != 1 || es[0].Body != "first" || es[0].Channel != notify.Email {
		t.Fatalf("OutboxEntries = %+v, %v; want the first copy's entry only", es, err)
	}
	d, err := db.Delivery(ctx, key)
	if err != nil || d.Status != notify.StatusSent {
		t.Errorf("delivery = %+v, %v; want sent", d, err)
	}
	checkPipelined(t, db)
}

func (s suite) notificationFinish(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	n, ds := newNotification("ntf_f", "", "u1", t0, notify.Email)
	mustCreate(t, db, n, ds)
	key := notify.DeliveryKey{NotificationID: "ntf_f", Channel: notify.Email}
	retry := notify.Attempt{Key: key, Status: notify.StatusQueued, Prev: 0, Attempts: 1, Error: "timeout", NextAttemptAt: t0.Add(time.Second), At: t0}
	if ok, err := db.FinishAttempt(ctx, retry, nil); err != nil || !ok {
		t.Fatalf("FinishAttempt(retry) = %v, %v", ok, err)
	}
	if ok, err := db.FinishAttempt(ctx, retry, nil); err != nil || ok {
		t.Errorf("FinishAttempt with a stale attempt count = %v, %v; want false", ok, err)
	}
	dl := &notify.DeadLetter{ID: "dl_1", NotificationID: "ntf_f", Channel: notify.Email, UserID: "u1", Error: "gone", Attempts: 2, CreatedAt: t0.Add(time.Minute)}
	dead := notify.Attempt{Key: key, Status: notify.StatusDead, Prev: 1, Attempts: 2, Error: "gone", At: t0.Add(time.Minute)}
	if ok, err := db.FinishAttempt(ctx, dead, dl); err != nil || !ok {
		t.Fatalf("FinishAttempt(dead) = %v, %v", ok, err)
	}
	// A copy of the job finishing late changes nothing, and adds no dead letter.
	if ok, err := db.FinishAttempt(ctx, notify.Attempt{Key: key, Status: notify.StatusSent, Prev: 1, Attempts: 2, At: t0}, nil); err != nil || ok {
		t.Errorf("FinishAttempt on a dead delivery = %v, %v; want false", ok, err)
	}
	d, err := db.Delivery(ctx, key)
	if err != nil || d.Status != notify.StatusDead || d.Attempts != 2 || d.Error != "gone" || !d.NextAttemptAt.IsZero() {
		t.Errorf("delivery = %+v, %v", d, err)
	}
	dls, err := db.DeadLetters(ctx, notify.Cursor{}, 10)
	if err != nil || len(dls) != 1 || dls[0].ID != "dl_1" || dls[0].Attempts != 2 || !dls[0].CreatedAt.Equal(dl.CreatedAt) {
		t.Fatalf("DeadLetters = %+v, %v", dls, err)
	}
	d, err = db.ReplayDeadLetter(ctx, "dl_1", t0.Add(time.Hour))
	if err != nil || d.Status != notify.StatusQueued || d.Attempts != 2 || !d.NextAttemptAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("ReplayDeadLetter = %+v, %v; want queued, due now, attempts kept", d, err)
	}
	if _, err := db.ReplayDeadLetter(ctx, "dl_1", t0); !apperr.Is(err, apperr.Conflict) {
		t.Errorf("second replay = %v, want Conflict", err)
	}
	if _, err := db.ReplayDeadLetter(ctx, "dl_none", t0); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("replay of an unknown dead letter = %v, want NotFound", err)
	}
	if dls, _ := db.DeadLetters(ctx, notify.Cursor{}, 10); len(dls) != 1 || !dls[0].ReplayedAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("dead letter after replay = %+v, want replayed_at set", dls)
	}
	checkPipelined(t, db)
}

func (s suite) notificationDue(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	n, ds := newNotification("ntf_d", "", "u1", t0, notify.Email, notify.SMS, notify.Push)
	ds[0].NextAttemptAt = t0.Add(time.Minute) // delayed (quiet hours)
	ds[2].Status, ds[2].Error = notify.StatusSuppressed, notify.ReasonNoContact
	mustCreate(t, db, n, ds)
	if jobs, err := db.DueDeliveries(ctx, t0, 10); err != nil || len(jobs) != 0 {
		t.Errorf("DueDeliveries before the delay = %v, %v; want none", jobs, err)
	}
	jobs, err := db.DueDeliveries(ctx, t0.Add(time.Minute), 10)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("DueDeliveries = %v, %v; want the email", jobs, err)
	}
	j := jobs[0]
	if j.NotificationID != "ntf_d" || j.Channel != notify.Email || j.Type != "order.shipped" || string(j.Data) != `{"order":"#42"}` ||
		j.ExpiresAt != t0.Add(time.Hour).UnixMicro() || j.CreatedAt != t0.UnixMicro() || j.Category != notify.Orders || j.UserID != "u1" {
		t.Errorf("due job = %+v", j)
	}
	stale, err := db.StaleDeliveries(ctx, notify.SMS, notify.Orders, t0.Add(time.Second), 10)
	if err != nil || len(stale) != 1 || stale[0].Channel != notify.SMS {
		t.Fatalf("StaleDeliveries(sms) = %v, %v; want the sms delivery", stale, err)
	}
	for _, c := range []struct {
		ch     notify.Channel
		before time.Time
	}{{notify.Email, t0.Add(time.Hour)}, {notify.Push, t0.Add(time.Hour)}, {notify.SMS, t0}} {
		if got, _ := db.StaleDeliveries(ctx, c.ch, notify.Orders, c.before, 10); len(got) != 0 {
			t.Errorf("StaleDeliveries(%s, before %v) = %v; want none (delayed, suppressed or too recent)", c.ch, c.before, got)
		}
	}
	keys := []notify.DeliveryKey{{NotificationID: "ntf_d", Channel: notify.Email}, {NotificationID: "ntf_d", Channel: notify.SMS}}
	if err := db.MarkQueued(ctx, keys, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if jobs, _ := db.DueDeliveries(ctx, t0.Add(time.Hour), 10); len(jobs) != 0 {
		t.Errorf("DueDeliveries after MarkQueued = %v, want none", jobs)
	}
	if got, _ := db.StaleDeliveries(ctx, notify.SMS, notify.Orders, t0.Add(time.Minute), 10); len(got) != 0 {
		t.Errorf("StaleDeliveries after MarkQueued touched it = %v, want none", got)
	}
	if got, _ := db.StaleDeliveries(ctx, notify.Email, notify.Orders, t0.Add(3*time.Minute), 10); len(got) != 1 {
		t.Errorf("StaleDeliveries(email) after its delay was cleared = %v, want it", got)
	}
}

func (s suite) notificationSettings(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	if _, found, err := db.Settings(ctx, "u1"); err != nil || found {
		t.Errorf("Settings(absent) found = %v, %v", found, err)
	}
	st := notify.Settings{Channels: map[notify.Channel]bool{notify.Email: true, notify.SMS: false},
		Categories: map[notify.Category]bool{notify.Marketing: false},
		Contacts:   notify.Contacts{Email: "ann@example.com", PushTokens: []string{"t1", "t2"}, WebhookURL: "https://example.com/h"},
		Locale:     "de", Timezone: "Europe/Berlin", QuietHours: notify.QuietHours{Start: "22:00", End: "07:00"}, UpdatedAt: t0}
	for range 2 { // the second is an update
		if err := db.PutSettings(ctx, "u1", st); err != nil {
			t.Fatalf("PutSettings: %v", err)
		}
	}
	got, found, err := db.Settings(ctx, "u1")
	if err != nil || !found || fmt.Sprint(got) != fmt.Sprint(st) {
		t.Errorf("Settings = %+v, %v, %v; want %+v", got, found, err, st)
	}
	st2 := st
	st2.Locale = "fr"
	if err := db.PutSettings(ctx, "u2", st2); err != nil {
		t.Fatalf("PutSettings: %v", err)
	}
	many, err := db.SettingsOf(ctx, []string{"u1", "nobody", "u2"})
	if err != nil || len(many) != 2 || fmt.Sprint(many["u1"]) != fmt.Sprint(st) || many["u2"].Locale != "fr" {
		t.Errorf("SettingsOf = %+v, %v; want u1 and u2 only", many, err)
	}
	if none, err := db.SettingsOf(ctx, nil); err != nil || len(none) != 0 {
		t.Errorf("SettingsOf(nobody) = %+v, %v", none, err)
	}
	tpl := notify.Template{Type: "invoice.ready", Category: notify.Orders, UpdatedAt: t0,
		Channels: map[string]map[string]notify.Content{"default": {"en": {Subject: "Invoice {n}", Body: "Here: {link}"}}}}
	if err := db.PutTemplate(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	tpl.Category = notify.Marketing
	if err := db.PutTemplate(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	gotT, found, err := db.Template(ctx, "invoice.ready")
	if err != nil || !found || fmt.Sprint(gotT) != fmt.Sprint(tpl) {
		t.Errorf("Template = %+v, %v, %v; want %+v", gotT, found, err, tpl)
	}
	if cats, err := db.TemplateCategories(ctx); err != nil || len(cats) != 1 || cats["invoice.ready"] != notify.Marketing {
		t.Errorf("TemplateCategories = %v, %v", cats, err)
	}
	if _, found, err := db.Template(ctx, "otp"); err != nil || found {
		t.Errorf("Template(never stored) found = %v, %v", found, err)
	}
}

func (s suite) notificationOutbox(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	users := map[string]string{"n1": "u1", "n2": "u2", "n3": "u1"}
	for _, id := range []string{"n1", "n2", "n3"} {
		n, ds := newNotification(id, "", users[id], t0, notify.Email)
		mustCreate(t, db, n, ds)
	}
	// Entries are stored with a sent outcome, as the worker does; a
	// failed attempt carries none.
	add := func(e notify.OutboxEntry, prev int, status notify.Status) bool {
		t.Helper()
		a := notify.Attempt{Key: notify.DeliveryKey{NotificationID: e.NotificationID, Channel: e.Channel}, Status: status,
			Prev: prev, Attempts: prev + 1, At: e.CreatedAt}
		if status == notify.StatusQueued {
			a.NextAttemptAt = e.CreatedAt.Add(time.Minute)
		} else {
			a.Outbox = &e
		}
		ok, err := db.FinishAttempt(ctx, a, nil)
		if err != nil {
			t.Fatalf("FinishAttempt: %v", err)
		}
		return ok
	}
	e := notify.OutboxEntry{NotificationID: "n1", Channel: notify.Email, Attempt: 1, UserID: "u1", To: "ann@example.com", Subject: "s", Body: "b",
		HTML: "<p>b</p>", CreatedAt: t0}
	add(e, 0, notify.StatusQueued) // the first attempt failed, to be retried
	e2 := e
	e2.Attempt, e2.CreatedAt = 2, t0.Add(time.Second)
	add(e2, 1, notify.StatusSent)
	if add(e2, 1, notify.StatusSent) { // redelivered: nothing new
		t.Error("a redelivered copy of the sent attempt was stored again")
	}
	add(notify.OutboxEntry{NotificationID: "n2", Channel: notify.Email, Attempt: 1, UserID: "u2", To: "u2", Body: "b", CreatedAt: t0.Add(2 * time.Second)},
		0, notify.StatusSent)
	add(notify.OutboxEntry{NotificationID: "n3", Channel: notify.Email, Attempt: 1, UserID: "u1", To: "u1", Body: "c", CreatedAt: t0.Add(500 * time.Millisecond)},
		0, notify.StatusSent)
	all, err := db.OutboxEntries(ctx, notify.OutboxFilter{}, notify.Cursor{}, 10)
	if err != nil || len(all) != 3 || all[0].NotificationID != "n2" || all[1].NotificationID != "n1" || all[2].NotificationID != "n3" {
		t.Fatalf("OutboxEntries = %+v, %v; want n2, n1 and n3, newest first", all, err)
	}
	if got := all[1]; got.Attempt != 2 || got.To != "ann@example.com" || got.Subject != "s" || got.Body != "b" || got.HTML != "<p>b</p>" ||
		got.UserID != "u1" || !got.CreatedAt.Equal(t0.Add(time.Second)) || all[0].HTML != "" {
		t.Errorf("entry = %+v", got)
	}
	mine, _ := db.OutboxEntries(ctx, notify.OutboxFilter{UserID: "u1"}, notify.Cursor{}, 10)
	if len(mine) != 2 {
		t.Errorf("OutboxEntries(u1) = %d entries, want 2", len(mine))
	}
	page, _ := db.OutboxEntries(ctx, notify.OutboxFilter{}, notify.Cursor{At: all[0].CreatedAt, ID: "n2:email:1"}, 10)
	if len(page) != 2 || page[0].Attempt != 2 || page[1].NotificationID != "n3" {
		t.Errorf("OutboxEntries after the first = %+v, want the other two", page)
	}
	// The delivery without an outbox entry is not listed.
	n, ds := newNotification("n4", "", "u1", t0, notify.Email)
	mustCreate(t, db, n, ds)
	if got, _ := db.OutboxEntries(ctx, notify.OutboxFilter{NotificationID: "n4"}, notify.Cursor{}, 10); len(got) != 0 {
		t.Errorf("OutboxEntries(n4, never sent) = %+v, want none", got)
	}
}

func (s suite) notificationDelete(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	for i := range 5 {
		n, ds := newNotification(fmt.Sprintf("old%d", i), "", "u1", t0.Add(time.Duration(i)*time.Second), notify.Email)
		mustCreate(t, db, n, ds)
	}
	sent := notify.Attempt{Key: notify.DeliveryKey{NotificationID: "old0", Channel: notify.Email}, Status: notify.StatusSent,
		Attempts: 1, At: t0, Outbox: &notify.OutboxEntry{NotificationID: "old0", Channel: notify.Email, Attempt: 1, UserID: "u1", CreatedAt: t0}}
	if ok, err := db.FinishAttempt(ctx, sent, nil); err != nil || !ok {
		t.Fatalf("FinishAttempt = %v, %v", ok, err)
	}
	keep, ds := newNotification("new", "", "u1", t0.Add(time.Hour), notify.Email)
	mustCreate(t, db, keep, ds)
	total := 0
	for {
		n, err := db.DeleteNotificationsBefore(ctx, t0.Add(time.Minute), 2)
		if err != nil {
			t.Fatal(err)
		}
		total += n
		if n < 2 {
			break
		}
	}
	if total != 5 {
		t.Errorf("deleted %d, want 5", total)
	}
	if _, err := db.Delivery(ctx, notify.DeliveryKey{NotificationID: "old0", Channel: notify.Email}); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("delivery of a deleted notification: %v, want NotFound (cascade)", err)
	}
	if es, _ := db.OutboxEntries(ctx, notify.OutboxFilter{}, notify.Cursor{}, 10); len(es) != 0 {
		t.Errorf("outbox after delete = %v, want empty (cascade)", es)
	}
	if _, err := db.Notification(ctx, "new"); err != nil {
		t.Errorf("recent notification: %v", err)
	}
}

// groupCommit checks that concurrent writers share transactions and each
// gets its own answer.
func (s suite) groupCommit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	const n = 200
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			no, ds := newNotification(fmt.Sprintf("g%03d", i), fmt.Sprintf("r%03d", i%150), "u1", t0, notify.Email)
			_, created, err := db.CreateNotification(ctx, no, ds)
			if err != nil {
				t.Errorf("CreateNotification: %v", err)
			}
			_ = created
		})
	}
	wg.Wait()
	recs, err := db.UserNotifications(ctx, "u1", t0.Add(-time.Hour), notify.Cursor{}, 1000)
	if err != nil || len(recs) != 150 {
		t.Errorf("saved %d notifications, %v; want 150 (50 repeated request ids)", len(recs), err)
	}
	batches, ops, largest := db.BatchStats().Snapshot()
	if ops < n || batches >= ops || largest < 2 {
		t.Errorf("group commit: %d writes in %d transactions (largest %d); want writes to share transactions", ops, batches, largest)
	}
	checkSomePipelined(t, db) // 50 request ids are written twice at once
}

// urgentFirst checks that urgent writes (a critical notification's, and
// attempts marked Urgent) are not stuck behind a backlog of other writes
// and that closing with writes of both kinds waiting works.
func (s suite) urgentFirst(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	var wg sync.WaitGroup
	for i := range 300 {
		wg.Go(func() {
			no, ds := newNotification(fmt.Sprintf("u%03d", i), "", "u1", t0, notify.Email)
			if i%10 == 0 {
				no.Category, ds[0].Category = notify.Critical, notify.Critical
			}
			if _, _, err := db.CreateNotification(ctx, no, ds); err != nil {
				t.Errorf("CreateNotification: %v", err)
				return
			}
			a := notify.Attempt{Key: ds[0].Key(), Status: notify.StatusSent, Attempts: 1, At: t0, Urgent: no.Category.Urgent()}
			if ok, err := db.FinishAttempt(ctx, a, nil); err != nil || !ok {
				t.Errorf("FinishAttempt(%s) = %v, %v; want true", no.ID, ok, err)
			}
		})
	}
	wg.Wait()
	if recs, err := db.UserNotifications(ctx, "u1", t0.Add(-time.Hour), notify.Cursor{}, 1000); err != nil || len(recs) != 300 {
		t.Errorf("saved %d, %v; want 300", len(recs), err)
	}
}
