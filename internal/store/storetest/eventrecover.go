package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/events"
	"github.com/sluicehq/sluice/internal/notify"
)

// undeliveredEvents pins what a recover resends: the events of the types
// asked for whose system notifications to the subscription were neither
// received nor on their first attempt, paged like EventsSince.
func (s suite) undeliveredEvents(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	for i := range 10 {
		typ := events.DeliverySent
		if i == 9 {
			typ = events.LinkClicked
		}
		e := events.Event{ID: fmt.Sprintf("evt_%d", i), Type: typ, Data: json.RawMessage(`{}`), At: at.Add(time.Duration(i/2) * time.Second)}
		if err := db.AppendEvent(ctx, e); err != nil {
			t.Fatalf("AppendEvent: %v", err)
		}
	}
	// notification saves one system notification to sub carrying event
	// (a recover's when run is not empty) whose delivery is in status st
	// after attempts.
	n := 0
	notification := func(event, sub, run string, st notify.Status, attempts int) {
		t.Helper()
		n++
		reqID := "evt:" + event + ":" + sub
		if run != "" {
			reqID += ":" + run
		}
		created := at.Add(time.Minute)
		nf := notify.Notification{ID: fmt.Sprintf("ntf_r%d", n), RequestID: reqID, RequestHash: "h", UserID: notify.SystemUserPrefix + sub,
			Type: events.DeliverySent, Category: notify.Orders, Data: json.RawMessage(`{}`), Channels: []notify.Channel{notify.Webhook}, CreatedAt: created}
		d := notify.Delivery{NotificationID: nf.ID, Channel: notify.Webhook, UserID: nf.UserID, Category: notify.Orders, Provider: "events",
			Status: st, Attempts: attempts, CreatedAt: created, UpdatedAt: created}
		mustCreate(t, db, nf, []notify.Delivery{d})
	}
	notification("evt_0", "evs_a", "", notify.StatusDead, 5)      // dead, then received from a recover: left out
	notification("evt_0", "evs_a", "rcv_1", notify.StatusSent, 1) //
	notification("evt_1", "evs_a", "", notify.StatusSent, 1)      // received
	notification("evt_2", "evs_a", "", notify.StatusDelivered, 1) // received
	notification("evt_3", "evs_a", "", notify.StatusFailed, 1)    // failed, and failed again from a recover
	notification("evt_3", "evs_a", "rcv_1", notify.StatusDead, 5) //
	notification("evt_4", "evs_a", "", notify.StatusDead, 5)      // dead (received by another subscription)
	notification("evt_4", "evs_b", "", notify.StatusSent, 1)      //
	// evt_5: never queued to evs_a (it was disabled).
	notification("evt_5", "evs_b", "", notify.StatusSent, 1)
	notification("evt_6", "evs_a", "", notify.StatusQueued, 0)   // on its first attempt: left out
	notification("evt_7", "evs_a", "", notify.StatusQueued, 2)   // retrying after failures
	notification("evt_8", "evs_a", "", notify.StatusCanceled, 0) // canceled
	notification("evt_8", "evs_a", "rcv_2", notify.StatusSending, 0)
	// evt_9 is a link.clicked, not asked for.

	ids := func(es []events.Event) string {
		var out []string
		for _, e := range es {
			out = append(out, e.ID)
		}
		return strings.Join(out, " ")
	}
	types := []string{events.DeliverySent, events.DeliveryDead}
	got, err := db.UndeliveredEvents(ctx, "evs_a", types, at, "", 20)
	if want := "evt_3 evt_4 evt_5 evt_7"; err != nil || ids(got) != want {
		t.Fatalf("UndeliveredEvents(evs_a) = %q, %v; want %q", ids(got), err, want)
	}
	if string(got[0].Data) != `{}` || !got[1].At.Equal(at.Add(2*time.Second)) {
		t.Errorf("UndeliveredEvents[0:2] = %+v", got[:2])
	}
	// Pages of one: the events left out do not end a page early.
	var paged []events.Event
	since, after := at, ""
	for range 10 {
		page, err := db.UndeliveredEvents(ctx, "evs_a", types, since, after, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		since, after = page[0].At, page[0].ID
	}
	if want := "evt_3 evt_4 evt_5 evt_7"; ids(paged) != want {
		t.Errorf("UndeliveredEvents by pages of 1 = %q, want %q", ids(paged), want)
	}
	if got, err := db.UndeliveredEvents(ctx, "evs_a", types, at.Add(2*time.Second), "evt_4", 2); err != nil || ids(got) != "evt_5 evt_7" {
		t.Errorf("UndeliveredEvents(after evt_4, 2) = %q, %v", ids(got), err)
	}
	if got, err := db.UndeliveredEvents(ctx, "evs_b", []string{events.DeliverySent, events.LinkClicked}, at, "", 20); err != nil ||
		ids(got) != "evt_0 evt_1 evt_2 evt_3 evt_6 evt_7 evt_8 evt_9" {
		t.Errorf("UndeliveredEvents(evs_b) = %q, %v; want all but its received evt_4 and evt_5", ids(got), err)
	}
	if got, err := db.UndeliveredEvents(ctx, "evs_a", nil, at, "", 20); err != nil || len(got) != 0 {
		t.Errorf("UndeliveredEvents(no types) = %q, %v", ids(got), err)
	}
}
