package notify_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/storetest"
)

// newsTemplate is a marketing type digested in windows of w.
func newsTemplate(w string, maxItems int) notify.Template {
	return notify.Template{Type: "news", Category: notify.Marketing,
		Channels: map[string]map[string]notify.Content{"default": {"en": {Subject: "{count} news", Body: "{count} news for {name|you}:\n{items}"}}},
		Digest:   &notify.DigestRule{Window: w, MaxItems: maxItems, Item: "- {title}"}}
}

func (b *bundle) putTemplate(t *testing.T, tpl notify.Template) {
	t.Helper()
	if _, err := b.svc.PutTemplate(t.Context(), tpl); err != nil {
		t.Fatalf("PutTemplate(%s): %v", tpl.Type, err)
	}
}

func news(user, title string, chs ...notify.Channel) notify.Request {
	return notify.Request{UserID: user, Type: "news", Data: []byte(fmt.Sprintf(`{"title":%q,"name":"Ada"}`, title)), Channels: chs}
}

// sentBodies returns the bodies the provider sent on ch.
func (p *scripted) sentOn(ch notify.Channel) []notify.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []notify.Message
	for _, m := range p.sent {
		if m.Channel == ch {
			out = append(out, m)
		}
	}
	return out
}

// digestMessages returns user's notifications that are digest messages.
func digestMessages(t *testing.T, svc *notify.Service, user string) []notify.Record {
	t.Helper()
	recs, _, err := svc.UserNotifications(t.Context(), user, "", 200)
	if err != nil {
		t.Fatal(err)
	}
	var out []notify.Record
	for _, r := range recs {
		if strings.HasPrefix(r.RequestID, "digest:") {
			out = append(out, r)
		}
	}
	return out
}

func TestDigestSendsOneMessagePerWindowAndChannel(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := setup(t, nil)
	b.putTemplate(t, newsTemplate("10m", 0))
	var ids []string
	for _, title := range []string{"a", "b", "c"} {
		ids = append(ids, b.send(t, news("u1", title, notify.Email, notify.SMS)).NotificationID)
		b.clock.Advance(time.Minute)
	}
	b.drain(t)
	if calls, _ := b.prov.count(); calls != 0 {
		t.Fatalf("%d provider calls inside the window, want none", calls)
	}
	for ch, d := range b.statuses(t, ids[1]) {
		if d.Status != notify.StatusSuppressed || d.Error != notify.ReasonDigested {
			t.Errorf("event's %s delivery = %s %q, want suppressed digested", ch, d.Status, d.Error)
		}
	}
	if n, err := b.svc.SendDueDigests(ctx, 10); err != nil || n != 0 {
		t.Fatalf("SendDueDigests inside the window = %d, %v; want 0", n, err)
	}
	b.clock.Advance(7 * time.Minute) // 10 minutes after the first event
	if n, err := b.svc.SendDueDigests(ctx, 10); err != nil || n != 2 {
		t.Fatalf("SendDueDigests at the window's end = %d, %v; want one per channel", n, err)
	}
	b.drain(t)
	for _, ch := range []notify.Channel{notify.Email, notify.SMS} {
		ms := b.prov.sentOn(ch)
		if len(ms) != 1 || ms[0].Body != "3 news for Ada:\n- a\n- b\n- c" {
			t.Errorf("%s: sent %+v; want one message of the 3 events", ch, ms)
		}
	}
	if ms := b.prov.sentOn(notify.Email); len(ms) == 1 && ms[0].Subject != "3 news" {
		t.Errorf("subject %q, want %q", ms[0].Subject, "3 news")
	}
	if n, _ := b.svc.SendDueDigests(ctx, 10); n != 0 {
		t.Errorf("SendDueDigests after sending = %d, want 0", n)
	}
	// The timeline: the message lists its events, an event names its digest.
	msgs := digestMessages(t, b.svc, "u1")
	if len(msgs) != 2 {
		t.Fatalf("%d digest messages, want 2", len(msgs))
	}
	rec, err := b.svc.Notification(ctx, msgs[0].ID)
	if err != nil || len(rec.Digests) != 1 || rec.Digests[0].Count != 3 || len(rec.Digests[0].Items) != 3 ||
		rec.Digests[0].Items[0].NotificationID != ids[0] || rec.Digests[0].NotificationID != msgs[0].ID {
		t.Errorf("message's digests = %+v, %v", rec.Digests, err)
	}
	if rec, _ := b.svc.Notification(ctx, ids[2]); len(rec.Digests) != 2 || rec.Digests[0].NotificationID == "" {
		t.Errorf("event's digests = %+v; want its two digests, sent", rec.Digests)
	}
}

func TestDigestFullSendsAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.putTemplate(t, newsTemplate("1h", 2))
	for i := range 5 {
		b.send(t, news("u1", fmt.Sprint(i), notify.Email))
	}
	// Two full digests are due at once; the fifth event waits for its window.
	if n, err := b.svc.SendDueDigests(t.Context(), 10); err != nil || n != 2 {
		t.Fatalf("SendDueDigests = %d, %v; want the 2 full digests", n, err)
	}
	b.drain(t)
	ms := b.prov.sentOn(notify.Email)
	if len(ms) != 2 || ms[0].Body+"|"+ms[1].Body != "2 news for Ada:\n- 0\n- 1|2 news for Ada:\n- 2\n- 3" &&
		ms[1].Body+"|"+ms[0].Body != "2 news for Ada:\n- 0\n- 1|2 news for Ada:\n- 2\n- 3" {
		t.Fatalf("sent %+v", ms)
	}
	b.clock.Advance(time.Hour)
	if n, _ := b.svc.SendDueDigests(t.Context(), 10); n != 1 {
		t.Fatalf("SendDueDigests after the window = %d, want the last one", n)
	}
	b.drain(t)
	if ms := b.prov.sentOn(notify.Email); len(ms) != 3 || ms[2].Body != "1 news for Ada:\n- 4" {
		t.Errorf("sent %+v; want the fifth event alone", ms)
	}
}

func TestDigestRules(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tests := []struct {
		name  string
		mod   func(*notify.Template)
		field string
	}{
		{"critical never digests", func(t *notify.Template) { t.Category = notify.Critical }, "digest"},
		{"window not a duration", func(t *notify.Template) { t.Digest.Window = "soon" }, "digest.window"},
		{"window over a day", func(t *notify.Template) { t.Digest.Window = "25h" }, "digest.window"},
		{"max_items over 1000", func(t *notify.Template) { t.Digest.MaxItems = 1001 }, "digest.max_items"},
		{"escalation without channels", func(t *notify.Template) {
			t.Escalation = &notify.EscalationRule{After: "10m"}
		}, "escalation.to"},
		{"escalation to an unknown channel", func(t *notify.Template) {
			t.Escalation = &notify.EscalationRule{After: "10m", To: []notify.Channel{"fax"}}
		}, "escalation.to[0]"},
		{"escalation unless something else", func(t *notify.Template) {
			t.Escalation = &notify.EscalationRule{After: "10m", Unless: []string{"replied"}, To: []notify.Channel{notify.SMS}}
		}, "escalation.unless[0]"},
		{"escalation after a week", func(t *notify.Template) {
			t.Escalation = &notify.EscalationRule{After: "169h", To: []notify.Channel{notify.SMS}}
		}, "escalation.after"},
	}
	for _, tt := range tests {
		tpl := newsTemplate("10m", 0)
		tt.mod(&tpl)
		_, err := b.svc.PutTemplate(t.Context(), tpl)
		ae, ok := errors.AsType[*apperr.Error](err)
		if !ok || ae.Code != apperr.Unprocessable || len(ae.Fields) != 1 || ae.Fields[0].Field != tt.field {
			t.Errorf("%s: PutTemplate = %v, want 422 naming %s", tt.name, err, tt.field)
		}
	}
}

// TestDigestConcurrentSendsOneMessage sends many events of one user at
// once, through two services (nodes) on one store, and fires the window
// on both at once: one message, with the exact count.
func TestDigestConcurrentSendsOneMessage(t *testing.T) {
	t.Parallel()
	onBothEngines(t, func(t *testing.T, st notify.Store) {
		a := setup(t, func(o *notify.Options) { o.Store = st })
		bNode := setup(t, func(o *notify.Options) { o.Store = st; o.Now = a.clock.Now })
		a.putTemplate(t, newsTemplate("10m", 1000))
		const events = 100
		var wg sync.WaitGroup
		for i := range events {
			node := a.svc
			if i%2 == 1 {
				node = bNode.svc
			}
			wg.Go(func() {
				if _, err := node.Send(t.Context(), news("u1", fmt.Sprint(i), notify.Email)); err != nil {
					t.Errorf("Send: %v", err)
				}
			})
		}
		wg.Wait()
		a.clock.Advance(10 * time.Minute)
		for _, node := range []*notify.Service{a.svc, bNode.svc} {
			wg.Go(func() {
				if _, err := node.SendDueDigests(t.Context(), 10); err != nil {
					t.Errorf("SendDueDigests: %v", err)
				}
			})
		}
		wg.Wait()
		drainNodes(t, a, bNode)
		sent := append(a.prov.sentOn(notify.Email), bNode.prov.sentOn(notify.Email)...)
		if len(sent) != 1 || !strings.HasPrefix(sent[0].Body, fmt.Sprintf("%d news", events)) ||
			strings.Count(sent[0].Body, "\n- ") != events {
			t.Fatalf("sent %d messages (%+v); want one of %d events", len(sent), sent, events)
		}
		if msgs := digestMessages(t, a.svc, "u1"); len(msgs) != 1 {
			t.Errorf("%d digest messages stored, want 1", len(msgs))
		}
	})
}

// onBothEngines runs test in two parallel subtests, sqlite and postgres,
// each on a fresh store of its engine (for the nodes of the test to share).
func onBothEngines(t *testing.T, test func(t *testing.T, st notify.Store)) {
	t.Helper()
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			var st notify.Store
			if engine == "postgres" {
				st = openPostgres(t)
			} else {
				st = storetest.SQLite(t)
			}
			test(t, st)
		})
	}
}

func openPostgres(t *testing.T) *store.DB {
	t.Helper()
	url := enginetest.PostgresSchema(t, enginetest.PostgresURL(t))
	db, err := store.Open(t.Context(), store.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return db
}

// dyingStore is a node's store that dies (fails every write) right after
// the digest's message is saved, before the digest is marked sent.
type dyingStore struct {
	*store.DB
	mu   sync.Mutex
	dead bool
}

func (s *dyingStore) CreateNotification(ctx context.Context, n notify.Notification, ds []notify.Delivery) (notify.Notification, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return notify.Notification{}, false, apperr.New(apperr.Unavailable, "node is dead")
	}
	existing, created, err := s.DB.CreateNotification(ctx, n, ds)
	s.dead = strings.HasPrefix(n.RequestID, "digest:")
	return existing, created, err
}

func (s *dyingStore) MarkDigestSent(ctx context.Context, id, notificationID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return apperr.New(apperr.Unavailable, "node is dead")
	}
	return s.DB.MarkDigestSent(ctx, id, notificationID)
}

// TestDigestSurvivesRestart stops a node inside the window (its store
// closed, nothing drained) and starts another on the same SQLite file,
// which sends the digest; then a node dies between saving a digest's
// message and marking the digest sent, and the next one sends nothing
// twice.
func TestDigestSurvivesRestart(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "data")
	node := func(mod func(*notify.Options)) *bundle {
		db, err := store.Open(ctx, store.Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if _, err := db.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		b := setup(t, func(o *notify.Options) {
			o.Store = db
			if mod != nil {
				mod(o)
			}
		})
		b.db = db
		return b
	}
	first := node(nil)
	first.putTemplate(t, newsTemplate("10m", 0))
	for i := range 4 {
		first.send(t, news("u1", fmt.Sprint(i), notify.Email))
	}
	first.db.Close() // stopped inside the window

	var dying *dyingStore
	second := node(func(o *notify.Options) {
		dying = &dyingStore{DB: o.Store.(*store.DB)}
		o.Store = dying
	})
	second.clock.Advance(10 * time.Minute)
	if _, err := second.svc.SendDueDigests(ctx, 10); err == nil {
		t.Fatal("SendDueDigests on a dying node succeeded")
	}
	second.q.take() // its jobs die with it
	dying.DB.Close()

	third := node(nil)
	third.clock.Advance(10 * time.Minute)
	if n, err := third.svc.SendDueDigests(ctx, 10); err != nil || n != 1 {
		t.Fatalf("SendDueDigests after the restart = %d, %v; want the digest", n, err)
	}
	third.drain(t)
	if ms := third.prov.sentOn(notify.Email); len(ms) != 1 || !strings.HasPrefix(ms[0].Body, "4 news") {
		t.Fatalf("sent %+v; want one message of the 4 events", ms)
	}
	if n, _ := third.svc.SendDueDigests(ctx, 10); n != 0 {
		t.Errorf("the digest is still due after it was sent")
	}
	if msgs := digestMessages(t, third.svc, "u1"); len(msgs) != 1 {
		t.Errorf("%d digest messages stored, want 1", len(msgs))
	}
}

// drainNodes processes every job the nodes publish, each on its node, as
// JetStream would hand them out: a job whose message id was published
// before (by any node) is stored once, and a copy refused as in flight is
// delivered again later, marked redelivered.
func drainNodes(t *testing.T, nodes ...*bundle) {
	t.Helper()
	seen := map[string]bool{}
	for range 100 {
		more := false
		for _, b := range nodes {
			for _, j := range b.q.take() {
				more = true
				if seen[j.MsgID()] {
					continue
				}
				seen[j.MsgID()] = true
				err := b.svc.Process(t.Context(), j)
				if errors.Is(err, notify.ErrInFlight) {
					j.Redelivered = true
					err = b.svc.Process(t.Context(), j)
				}
				if err != nil {
					t.Fatalf("Process(%s): %v", j.MsgID(), err)
				}
			}
		}
		if !more {
			return
		}
	}
	t.Fatal("jobs keep coming")
}

// stuckStore fails closing one digest, as a store write that keeps
// failing would.
type stuckStore struct {
	*store.DB
	stuck string
}

func (s *stuckStore) CloseDigest(ctx context.Context, id string) (notify.Digest, error) {
	if id == s.stuck {
		return notify.Digest{}, apperr.New(apperr.Unavailable, "stuck")
	}
	return s.DB.CloseDigest(ctx, id)
}

// TestDigestStuckDoesNotHoldBackOthers: a digest that cannot be sent is
// reported, and the digests due after it still go out.
func TestDigestStuckDoesNotHoldBackOthers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := &stuckStore{}
	b := setup(t, func(o *notify.Options) { st.DB = o.Store.(*store.DB); o.Store = st })
	b.putTemplate(t, newsTemplate("10m", 0))
	b.send(t, news("u1", "first", notify.Email))
	b.clock.Advance(time.Second)
	b.send(t, news("u2", "second", notify.Email))
	b.clock.Advance(10 * time.Minute)
	due, err := st.DueDigests(ctx, b.clock.Now(), 10)
	if err != nil || len(due) != 2 {
		t.Fatalf("DueDigests = %+v, %v", due, err)
	}
	st.stuck = due[0].ID // u1's, due first
	if n, err := b.svc.SendDueDigests(ctx, 10); n != 1 || !apperr.Is(err, apperr.Unavailable) {
		t.Fatalf("SendDueDigests = %d, %v; want u2's sent and u1's error", n, err)
	}
	st.stuck = ""
	if n, err := b.svc.SendDueDigests(ctx, 10); n != 1 || err != nil {
		t.Fatalf("SendDueDigests once unstuck = %d, %v; want u1's", n, err)
	}
	b.drain(t)
	if ms := b.prov.sentOn(notify.Email); len(ms) != 2 {
		t.Errorf("sent %d digests, want 2", len(ms))
	}
}
