package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/events"
)

func (s suite) eventSubs(t *testing.T) {
	t.Run("RoundTrip", s.eventSubRoundTrip)
	t.Run("FailureRun", s.eventSubFailureRun)
	t.Run("EventLog", s.eventLog)
	t.Run("UndeliveredEvents", s.undeliveredEvents)
}

func (s suite) eventSubRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	want := []events.Subscription{
		{ID: "evs_b", URL: "https://b.example/hook", Events: []string{events.DeliverySent}, Secret: "whsec_b",
			DisableAfter: 120 * time.Hour, CreatedAt: at},
		{ID: "evs_a", URL: "https://a.example/hook", Events: []string{events.DeliveryDead, events.LinkClicked}, Secret: "whsec_a",
			DisableAfterFailures: 3, CreatedAt: at.Add(time.Second)},
	}
	for _, sub := range want {
		if err := db.CreateEventSubscription(ctx, sub); err != nil {
			t.Fatalf("CreateEventSubscription(%s): %v", sub.ID, err)
		}
	}
	if err := db.CreateEventSubscription(ctx, want[0]); !apperr.Is(err, apperr.Conflict) {
		t.Errorf("CreateEventSubscription(same id) = %v, want Conflict", err)
	}
	got, err := db.EventSubscriptions(ctx)
	if err != nil || len(got) != 2 {
		t.Fatalf("EventSubscriptions = %+v, %v; want 2", got, err)
	}
	for i := range want {
		if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
			t.Errorf("EventSubscriptions[%d] = %+v, want %+v (oldest first)", i, got[i], want[i])
		}
	}
	one, err := db.EventSubscription(ctx, "evs_a")
	if err != nil || fmt.Sprint(one) != fmt.Sprint(want[1]) {
		t.Errorf("EventSubscription(evs_a) = %+v, %v", one, err)
	}
	if err := db.DeleteEventSubscription(ctx, "evs_a"); err != nil {
		t.Fatalf("DeleteEventSubscription: %v", err)
	}
	for name, err := range map[string]error{
		"get":    func() error { _, err := db.EventSubscription(ctx, "evs_a"); return err }(),
		"delete": db.DeleteEventSubscription(ctx, "evs_a"),
		"record": func() error { _, err := db.RecordEventAttempt(ctx, "evs_a", true, "", at); return err }(),
		"enable": func() error { _, err := db.EnableEventSubscription(ctx, "evs_a"); return err }(),
	} {
		if !apperr.Is(err, apperr.NotFound) {
			t.Errorf("%s of a deleted subscription = %v, want NotFound", name, err)
		}
	}
}

func (s suite) eventSubFailureRun(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := db.CreateEventSubscription(ctx, events.Subscription{ID: "evs_1", URL: "https://x.example", Events: []string{events.DeliverySent},
		Secret: "whsec_x", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	// Concurrent failures each count; the run keeps its first time.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if _, err := db.RecordEventAttempt(ctx, "evs_1", false, "boom", at.Add(time.Duration(i)*time.Minute)); err != nil {
				t.Errorf("RecordEventAttempt: %v", err)
			}
		})
	}
	wg.Wait()
	got, err := db.RecordEventAttempt(ctx, "evs_1", false, "last", at.Add(time.Hour))
	if err != nil || got.Failures != 9 || got.LastError != "last" || !got.LastFailureAt.Equal(at.Add(time.Hour)) ||
		got.FirstFailureAt.IsZero() || !got.FirstFailureAt.Before(at.Add(8*time.Minute)) {
		t.Fatalf("after 9 failures: %+v, %v; want 9 failures, the run's first time kept", got, err)
	}
	if err := db.DisableEventSubscription(ctx, "evs_1", "first", at.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := db.DisableEventSubscription(ctx, "evs_1", "second", at.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, _ = db.EventSubscription(ctx, "evs_1")
	if got.DisabledReason != "first" || !got.DisabledAt.Equal(at.Add(2*time.Hour)) {
		t.Errorf("disabled twice: %q at %v, want the first (%v)", got.DisabledReason, got.DisabledAt, at.Add(2*time.Hour))
	}
	got, err = db.EnableEventSubscription(ctx, "evs_1")
	if err != nil || !got.DisabledAt.IsZero() || got.DisabledReason != "" || got.Failures != 0 || !got.FirstFailureAt.IsZero() {
		t.Errorf("EnableEventSubscription = %+v, %v; want enabled with no failure run", got, err)
	}
	if _, err := db.RecordEventAttempt(ctx, "evs_1", false, "again", at.Add(4*time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, err = db.RecordEventAttempt(ctx, "evs_1", true, "", at.Add(5*time.Hour))
	if err != nil || got.Failures != 0 || !got.FirstFailureAt.IsZero() || !got.LastSuccessAt.Equal(at.Add(5*time.Hour)) || got.LastError != "again" {
		t.Errorf("after a success: %+v, %v; want the run cleared, last success set, last error kept", got, err)
	}
}

func (s suite) eventLog(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, id := range []string{"evt_3", "evt_1", "evt_2", "evt_0"} {
		e := events.Event{ID: id, Type: events.DeliverySent, Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), At: at.Add(time.Duration(i/2) * time.Second)}
		if err := db.AppendEvent(ctx, e); err != nil {
			t.Fatalf("AppendEvent: %v", err)
		}
	}
	if err := db.AppendEvent(ctx, events.Event{ID: "evt_3", Type: "x", Data: json.RawMessage(`{}`), At: at}); !apperr.Is(err, apperr.Conflict) {
		t.Errorf("AppendEvent(same id) = %v, want Conflict", err)
	}
	ids := func(es []events.Event) string {
		var out string
		for _, e := range es {
			out += e.ID + " "
		}
		return out
	}
	all, err := db.EventsSince(ctx, at, "", 10)
	if err != nil || ids(all) != "evt_1 evt_3 evt_0 evt_2 " || string(all[0].Data) != `{"n":1}` || !all[2].At.Equal(at.Add(time.Second)) {
		t.Fatalf("EventsSince(all) = %q, %v; want by time then id", ids(all), err)
	}
	page, err := db.EventsSince(ctx, at, "evt_1", 2)
	if err != nil || ids(page) != "evt_3 evt_0 " {
		t.Errorf("EventsSince(after evt_1, 2) = %q, %v", ids(page), err)
	}
	later, err := db.EventsSince(ctx, at.Add(time.Second), "", 10)
	if err != nil || ids(later) != "evt_0 evt_2 " {
		t.Errorf("EventsSince(+1s) = %q, %v", ids(later), err)
	}
	n, err := db.DeleteEventsBefore(ctx, at.Add(time.Second), 1)
	if err != nil || n != 1 {
		t.Errorf("DeleteEventsBefore(limit 1) = %d, %v", n, err)
	}
	n, err = db.DeleteEventsBefore(ctx, at.Add(time.Second), 10)
	if err != nil || n != 1 {
		t.Errorf("DeleteEventsBefore again = %d, %v; want the other old one", n, err)
	}
	if left, _ := db.EventsSince(ctx, at.Add(-time.Hour), "", 10); ids(left) != "evt_0 evt_2 " {
		t.Errorf("after the purge: %q", ids(left))
	}
}
