package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/inbox"
)

func (s suite) inbox(t *testing.T) {
	t.Run("AddAndList", s.inboxAddList)
	t.Run("States", s.inboxStates)
	t.Run("ConcurrentAdds", s.inboxConcurrent)
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
