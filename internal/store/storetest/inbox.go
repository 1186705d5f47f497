package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/inbox"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/store"
)

func (s suite) inbox(t *testing.T) {
	t.Run("AddAndList", s.inboxAddList)
	t.Run("States", s.inboxStates)
	t.Run("ConcurrentAdds", s.inboxConcurrent)
	t.Run("FinishAttemptWithInbox", s.inboxFinishAttempt)
	t.Run("FinishAttemptWithInboxConcurrent", s.inboxFinishConcurrent)
	t.Run("TokenGenerations", s.inboxTokenGenerations)
}

func inboxMsg(user, id string, at time.Time) inbox.Message {
	return inbox.Message{ID: id, UserID: user, Type: "order.shipped", Category: "orders", Subject: "Order shipped",
		Body: "Order " + id + " is on its way", Data: json.RawMessage(`{"order":"` + id + `"}`), CreatedAt: at}
}

// inboxAddList pins numbering (1, 2, 3 per user), idempotent adds, pages
// newest first, the replay after a seq and the unread count.
func (s suite) inboxAddList(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	for i, id := range []string{"n1", "n2", "n3"} {
		m, added, err := db.AddInboxMessage(ctx, inboxMsg("u1", id, t0.Add(time.Duration(i)*time.Second)))
		if err != nil || !added || m.Seq != int64(i+1) {
			t.Fatalf("AddInboxMessage(%s) = seq %d, added %v, %v; want seq %d, added", id, m.Seq, added, err, i+1)
		}
	}
	if m, _, err := db.AddInboxMessage(ctx, inboxMsg("u2", "n1", t0)); err != nil || m.Seq != 1 {
		t.Fatalf("another user's first message: seq %d, %v; want 1", m.Seq, err)
	}
	again, added, err := db.AddInboxMessage(ctx, inboxMsg("u1", "n2", t0.Add(time.Hour)))
	if err != nil || added || again.Seq != 2 || !again.CreatedAt.Equal(t0.Add(time.Second)) || string(again.Data) != `{"order":"n2"}` {
		t.Fatalf("adding n2 again = %+v, added %v, %v; want the stored seq 2, not added", again, added, err)
	}
	page, err := db.InboxMessages(ctx, "u1", 0, 2, false)
	if err != nil || len(page) != 2 || page[0].ID != "n3" || page[1].ID != "n2" || page[0].Body != "Order n3 is on its way" {
		t.Fatalf("first page = %+v, %v; want n3, n2", page, err)
	}
	page, err = db.InboxMessages(ctx, "u1", page[1].Seq, 2, false)
	if err != nil || len(page) != 1 || page[0].ID != "n1" || !page[0].ReadAt.IsZero() {
		t.Fatalf("second page = %+v, %v; want n1 unread", page, err)
	}
	after, err := db.InboxMessagesAfter(ctx, "u1", 1, 10)
	if err != nil || len(after) != 2 || after[0].Seq != 2 || after[1].Seq != 3 {
		t.Fatalf("InboxMessagesAfter(1) = %+v, %v; want seqs 2, 3", after, err)
	}
	if n, err := db.InboxUnread(ctx, "u1"); err != nil || n != 3 {
		t.Errorf("InboxUnread = %d, %v; want 3", n, err)
	}
	if n, err := db.InboxUnread(ctx, "nobody"); err != nil || n != 0 {
		t.Errorf("InboxUnread(nobody) = %d, %v; want 0", n, err)
	}
	if n, err := db.DeleteInboxBefore(ctx, t0.Add(1500*time.Millisecond), 10); err != nil || n != 3 {
		t.Errorf("DeleteInboxBefore = %d, %v; want u1's n1, n2 and u2's n1", n, err)
	}
	if left, _ := db.InboxMessages(ctx, "u1", 0, 10, false); len(left) != 1 || left[0].ID != "n3" {
		t.Errorf("after the purge: %+v, want n3", left)
	}
	if m, _, err := db.AddInboxMessage(ctx, inboxMsg("u1", "n4", t0)); err != nil || m.Seq != 4 {
		t.Errorf("after the purge the next seq = %d, %v; want 4 (seqs are never reused)", m.Seq, err)
	}
}

// inboxStates pins read, unread, archive and read-all.
func (s suite) inboxStates(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	for _, id := range []string{"a", "b", "c"} {
		if _, _, err := db.AddInboxMessage(ctx, inboxMsg("u", id, t0)); err != nil {
			t.Fatal(err)
		}
	}
	at := t0.Add(time.Minute)
	m, err := db.SetInboxState(ctx, "u", "a", inbox.Read, at)
	if err != nil || !m.ReadAt.Equal(at) {
		t.Fatalf("read a = %+v, %v", m, err)
	}
	if m, _ := db.SetInboxState(ctx, "u", "a", inbox.Read, at.Add(time.Hour)); !m.ReadAt.Equal(at) {
		t.Errorf("reading again moved read_at to %v, want the first read %v", m.ReadAt, at)
	}
	if n, _ := db.InboxUnread(ctx, "u"); n != 2 {
		t.Errorf("unread after reading a = %d, want 2", n)
	}
	// NotificationRead (the escalation condition "read") is true for the
	// read message only, and only under its own user.
	for _, c := range []struct {
		user, id string
		want     bool
	}{{"u", "a", true}, {"u", "b", false}, {"other", "a", false}, {"u", "absent", false}} {
		if got, err := db.NotificationRead(ctx, c.user, c.id); err != nil || got != c.want {
			t.Errorf("NotificationRead(%s, %s) = %v, %v; want %v", c.user, c.id, got, err, c.want)
		}
	}
	if m, err := db.SetInboxState(ctx, "u", "a", inbox.Unread, at); err != nil || !m.ReadAt.IsZero() {
		t.Errorf("unread a = %+v, %v", m, err)
	}
	m, err = db.SetInboxState(ctx, "u", "b", inbox.Archive, at)
	if err != nil || !m.ArchivedAt.Equal(at) || !m.ReadAt.Equal(at) {
		t.Fatalf("archive b = %+v, %v; want archived and read", m, err)
	}
	if list, _ := db.InboxMessages(ctx, "u", 0, 10, false); len(list) != 2 || list[0].ID != "c" || list[1].ID != "a" {
		t.Errorf("inbox after archiving b = %+v, want c, a", list)
	}
	if list, _ := db.InboxMessages(ctx, "u", 0, 10, true); len(list) != 1 || list[0].ID != "b" {
		t.Errorf("archive = %+v, want b", list)
	}
	if _, err := db.SetInboxState(ctx, "u", "zz", inbox.Read, at); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("read of an unknown message = %v, want NotFound", err)
	}
	if _, err := db.SetInboxState(ctx, "other", "a", inbox.Read, at); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("read of another user's message = %v, want NotFound", err)
	}
	if n, err := db.MarkInboxRead(ctx, "u", at); err != nil || n != 2 {
		t.Errorf("MarkInboxRead = %d, %v; want a and c", n, err)
	}
	if n, _ := db.InboxUnread(ctx, "u"); n != 0 {
		t.Errorf("unread after read-all = %d, want 0", n)
	}
}

// inboxConcurrent: concurrent adds for one user get distinct seqs 1..n,
// and a message added twice at once is stored once.
func (s suite) inboxConcurrent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	const n = 16
	var wg sync.WaitGroup
	seqs := make([]int64, 2*n)
	for i := range 2 * n {
		wg.Go(func() {
			m, _, err := db.AddInboxMessage(ctx, inboxMsg("busy", fmt.Sprint("m", i%n), t0))
			if err != nil {
				t.Errorf("AddInboxMessage: %v", err)
			}
			seqs[i] = m.Seq
		})
	}
	wg.Wait()
	seen := map[int64]bool{}
	for i := range n {
		if seqs[i] != seqs[i+n] {
			t.Errorf("m%d added twice got seqs %d and %d, want one", i, seqs[i], seqs[i+n])
		}
		seen[seqs[i]] = true
	}
	list, err := db.InboxMessages(ctx, "busy", 0, 100, false)
	if err != nil || len(list) != n || len(seen) != n {
		t.Fatalf("stored %d messages with %d distinct seqs, %v; want %d", len(list), len(seen), err, n)
	}
}

func inboxEntry(user, id, subject string) *notify.InboxEntry {
	return &notify.InboxEntry{NotificationID: id, UserID: user, Type: "order.shipped", Category: notify.Orders,
		Subject: subject, Body: "Order " + id + " is on its way", Data: json.RawMessage(`{"order":"` + id + `"}`), CreatedAt: t0}
}

// inboxSent returns the sent outcome of the first attempt at id's inapp
// delivery, carrying e.
func inboxSent(id string, e *notify.InboxEntry) notify.Attempt {
	return notify.Attempt{Key: notify.DeliveryKey{NotificationID: id, Channel: notify.InApp}, Status: notify.StatusSent,
		Attempts: 1, At: t0.Add(time.Second), Provider: "inbox", Inbox: e}
}

// inboxFinishAttempt: the inbox row of an inapp delivery is stored with
// its sent outcome, numbered after the user's messages, with the
// delivery's provider message id "user:seq"; a stale or redelivered copy
// of the job adds no second row and takes no seq; a message the inbox
// holds already (stored by an earlier attempt) keeps its seq.
func (s suite) inboxFinishAttempt(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	if _, _, err := db.AddInboxMessage(ctx, inboxMsg("u1", "earlier", t0)); err != nil {
		t.Fatal(err)
	}
	n, ds := newNotification("ntf_i", "", "u1", t0, notify.InApp, notify.Email)
	mustCreate(t, db, n, ds)
	// AddInboxMessage has no pipelined form; FinishAttempt's, with its
	// inbox row, must be: count the group commits from here.
	st := db.BatchStats()
	batches0, _, _ := st.Snapshot()
	pipelined0 := st.PipelinedBatches()
	e := inboxEntry("u1", "ntf_i", "first")
	a := inboxSent("ntf_i", e)
	if ok, err := db.FinishAttempt(ctx, a, nil); err != nil || !ok || e.Seq != 2 {
		t.Fatalf("FinishAttempt(sent, inbox) = %v, %v, seq %d; want true, seq 2", ok, err, e.Seq)
	}
	d, err := db.Delivery(ctx, a.Key)
	if err != nil || d.Status != notify.StatusSent || d.ProviderMessageID != "u1:2" || d.Provider != "inbox" {
		t.Fatalf("delivery = %+v, %v; want sent by inbox, provider message id u1:2", d, err)
	}

	again := inboxEntry("u1", "ntf_i", "second copy")
	stale := a
	stale.Inbox = again
	if ok, err := db.FinishAttempt(ctx, stale, nil); err != nil || ok || again.Seq != 0 {
		t.Fatalf("FinishAttempt(stale copy) = %v, %v, seq %d; want false, seq 0", ok, err, again.Seq)
	}
	if batches, _, _ := st.Snapshot(); db.Dialect() == store.DialectPostgres && st.PipelinedBatches()-pipelined0 != batches-batches0 {
		t.Errorf("%d of %d group commits pipelined, want all", st.PipelinedBatches()-pipelined0, batches-batches0)
	}
	list, err := db.InboxMessages(ctx, "u1", 0, 10, false)
	if err != nil || len(list) != 2 {
		t.Fatalf("inbox = %+v, %v; want 2 messages", list, err)
	}
	got := list[0]
	want := inbox.Message{ID: "ntf_i", UserID: "u1", Seq: 2, Type: "order.shipped", Category: "orders", Subject: "first",
		Body: "Order ntf_i is on its way", Data: json.RawMessage(`{"order":"ntf_i"}`), CreatedAt: t0}
	if fmt.Sprint(got) != fmt.Sprint(want) || !got.CreatedAt.Equal(t0) {
		t.Errorf("stored %+v\nwant %+v", got, want)
	}
	// The stale copy took no seq: the next message is 3.
	if m, _, err := db.AddInboxMessage(ctx, inboxMsg("u1", "later", t0)); err != nil || m.Seq != 3 {
		t.Errorf("next AddInboxMessage = seq %d, %v; want 3", m.Seq, err)
	}
	// The outcome of another delivery that carries no inbox row (email)
	// does not touch the inbox.
	if ok, err := db.FinishAttempt(ctx, notify.Attempt{Key: notify.DeliveryKey{NotificationID: "ntf_i", Channel: notify.Email},
		Status: notify.StatusSent, Attempts: 1, At: t0}, nil); err != nil || !ok {
		t.Fatalf("FinishAttempt(email) = %v, %v", ok, err)
	}

	// An earlier attempt stored the message (AddInboxMessage) but not
	// its outcome: the retry keeps the row and its seq.
	n2, ds2 := newNotification("ntf_r", "", "u1", t0, notify.InApp)
	mustCreate(t, db, n2, ds2)
	if m, _, err := db.AddInboxMessage(ctx, inboxMsg("u1", "ntf_r", t0)); err != nil || m.Seq != 4 {
		t.Fatalf("AddInboxMessage(ntf_r) = seq %d, %v; want 4", m.Seq, err)
	}
	failed := notify.Attempt{Key: notify.DeliveryKey{NotificationID: "ntf_r", Channel: notify.InApp}, Status: notify.StatusQueued,
		Attempts: 1, Error: "timeout", NextAttemptAt: t0.Add(time.Second), At: t0}
	if ok, err := db.FinishAttempt(ctx, failed, nil); err != nil || !ok {
		t.Fatalf("FinishAttempt(retry later) = %v, %v", ok, err)
	}
	retry := inboxSent("ntf_r", inboxEntry("u1", "ntf_r", "retried"))
	retry.Prev, retry.Attempts = 1, 2
	if ok, err := db.FinishAttempt(ctx, retry, nil); err != nil || !ok || retry.Inbox.Seq != 4 {
		t.Fatalf("FinishAttempt(retry) = %v, %v, seq %d; want true, seq 4", ok, err, retry.Inbox.Seq)
	}
	if d, err := db.Delivery(ctx, retry.Key); err != nil || d.ProviderMessageID != "u1:4" || d.Attempts != 2 {
		t.Errorf("retried delivery = %+v, %v; want 2 attempts, provider message id u1:4", d, err)
	}
	if list, err := db.InboxMessages(ctx, "u1", 0, 10, false); err != nil || len(list) != 4 || list[0].Seq != 4 || list[0].Subject != "Order shipped" {
		t.Errorf("inbox = %+v, %v; want 4 messages, ntf_r kept as first stored", list, err)
	}
}

// inboxFinishConcurrent: outcomes with inbox rows for one user, committed
// together, get distinct seqs 1..n; copies of one job racing each other
// store one row, and only one copy's outcome applies.
func (s suite) inboxFinishConcurrent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	const n, copies = 12, 3
	for i := range n {
		nt, ds := newNotification(fmt.Sprint("c", i), "", "busy", t0, notify.InApp)
		mustCreate(t, db, nt, ds)
	}
	var wg sync.WaitGroup
	seqs := make([]int64, n*copies)
	oks := make([]bool, n*copies)
	for i := range n * copies {
		wg.Go(func() {
			id := fmt.Sprint("c", i%n)
			a := inboxSent(id, inboxEntry("busy", id, "s"))
			ok, err := db.FinishAttempt(ctx, a, nil)
			if err != nil {
				t.Errorf("FinishAttempt(%s): %v", id, err)
			}
			seqs[i], oks[i] = a.Inbox.Seq, ok
		})
	}
	wg.Wait()
	seen := map[int64]bool{}
	for i := range n {
		won := 0
		for c := range copies {
			if k := i + c*n; oks[k] {
				won++
				seen[seqs[k]] = true
			}
		}
		if won != 1 {
			t.Errorf("c%d: %d copies' outcomes applied, want 1", i, won)
		}
	}
	list, err := db.InboxMessages(ctx, "busy", 0, 100, false)
	if err != nil || len(list) != n || len(seen) != n || list[0].Seq != n {
		t.Fatalf("stored %d messages, %d distinct seqs, newest %+v, %v; want %d, numbered 1..%d", len(list), len(seen), list, err, n, n)
	}
	checkSomePipelined(t, db)
}
