package storetest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
)

// notificationCancel pins CancelDeliveries: queued deliveries (due or
// delayed) are canceled, claimed and final ones are left, a canceled one
// can be neither claimed nor finished, and a second cancel changes nothing.
func (s suite) notificationCancel(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	n, ds := newNotification("ntf_x", "", "u1", t0, notify.Email, notify.SMS, notify.Push, notify.Webhook)
	ds[1].NextAttemptAt = t0.Add(time.Hour) // a retry, or quiet hours
	ds[3].Status, ds[3].Error = notify.StatusSuppressed, notify.ReasonChannelOff
	mustCreate(t, db, n, ds)
	key := func(ch notify.Channel) notify.DeliveryKey {
		return notify.DeliveryKey{NotificationID: "ntf_x", Channel: ch}
	}
	// push is claimed by a worker before the cancel.
	if ok, err := db.ClaimDelivery(ctx, notify.Claim{Key: key(notify.Push), Owner: "w", At: t0, Until: t0.Add(time.Minute)}); err != nil || !ok {
		t.Fatalf("ClaimDelivery = %v, %v", ok, err)
	}
	at := t0.Add(time.Second)
	got, err := db.CancelDeliveries(ctx, "ntf_x", at)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []notify.Channel{notify.Email, notify.SMS}; !slices.Equal(got, want) {
		t.Errorf("CancelDeliveries = %v, want %v", got, want)
	}
	rec, err := db.Notification(ctx, "ntf_x")
	if err != nil {
		t.Fatal(err)
	}
	want := map[notify.Channel]notify.Status{notify.Email: notify.StatusCanceled, notify.SMS: notify.StatusCanceled,
		notify.Push: notify.StatusSending, notify.Webhook: notify.StatusSuppressed}
	for _, d := range rec.Deliveries {
		if d.Status != want[d.Channel] {
			t.Errorf("%s = %s, want %s", d.Channel, d.Status, want[d.Channel])
		}
		if d.Status == notify.StatusCanceled && (!d.UpdatedAt.Equal(at) || !d.NextAttemptAt.IsZero()) {
			t.Errorf("canceled %s updated %v, next %v; want updated at the cancel, nothing next", d.Channel, d.UpdatedAt, d.NextAttemptAt)
		}
	}
	// A canceled delivery is neither claimed, nor finished, nor due.
	if ok, err := db.ClaimDelivery(ctx, notify.Claim{Key: key(notify.Email), Owner: "v", At: at, Until: at.Add(time.Minute)}); err != nil || ok {
		t.Errorf("ClaimDelivery(canceled) = %v, %v; want false", ok, err)
	}
	if ok, err := db.FinishAttempt(ctx, notify.Attempt{Key: key(notify.Email), Status: notify.StatusSent, Attempts: 1, At: at}, nil); err != nil || ok {
		t.Errorf("FinishAttempt(canceled) = %v, %v; want false", ok, err)
	}
	if jobs, _ := db.DueDeliveries(ctx, t0.Add(2*time.Hour), 10); len(jobs) != 0 {
		t.Errorf("DueDeliveries = %v; a canceled delivery is not due", jobs)
	}
	// The claimed delivery finishes as its worker decides.
	if ok, err := db.FinishAttempt(ctx, notify.Attempt{Key: key(notify.Push), Status: notify.StatusSent, Claim: "w", Attempts: 1, At: at}, nil); err != nil || !ok {
		t.Errorf("FinishAttempt(claimed) = %v, %v; want true", ok, err)
	}
	if again, err := db.CancelDeliveries(ctx, "ntf_x", at.Add(time.Second)); err != nil || len(again) != 0 {
		t.Errorf("second CancelDeliveries = %v, %v; want nothing", again, err)
	}
	if _, err := db.CancelDeliveries(ctx, "ntf_none", at); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("CancelDeliveries(unknown) = %v, want NotFound", err)
	}
}

// notificationCancelRace: cancels and claims of the same deliveries at
// once; each delivery ends canceled or claimed, never both, and the
// cancels' reports add up to the canceled ones.
func (s suite) notificationCancelRace(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	const notifications = 20
	for i := range notifications {
		n, ds := newNotification(ntfID(i), "", "u1", t0, notify.Email, notify.SMS)
		mustCreate(t, db, n, ds)
	}
	var (
		mu       sync.Mutex
		canceled = map[notify.DeliveryKey]int{}
		claimed  = map[notify.DeliveryKey]int{}
		wg       sync.WaitGroup
	)
	for i := range notifications {
		for range 3 {
			wg.Go(func() {
				chs, err := db.CancelDeliveries(ctx, ntfID(i), t0)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				for _, ch := range chs {
					canceled[notify.DeliveryKey{NotificationID: ntfID(i), Channel: ch}]++
				}
				mu.Unlock()
			})
		}
		for _, ch := range []notify.Channel{notify.Email, notify.SMS} {
			k := notify.DeliveryKey{NotificationID: ntfID(i), Channel: ch}
			wg.Go(func() {
				ok, err := db.ClaimDelivery(ctx, notify.Claim{Key: k, Owner: "w", At: t0, Until: t0.Add(time.Minute)})
				if err != nil {
					t.Error(err)
				}
				if ok {
					mu.Lock()
					claimed[k]++
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	for i := range notifications {
		rec, err := db.Notification(ctx, ntfID(i))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range rec.Deliveries {
			k := d.Key()
			switch {
			case canceled[k]+claimed[k] != 1:
				t.Errorf("%s: canceled %d times, claimed %d times; want one of them once", k, canceled[k], claimed[k])
			case canceled[k] == 1 && d.Status != notify.StatusCanceled, claimed[k] == 1 && d.Status != notify.StatusSending:
				t.Errorf("%s = %s; canceled %d, claimed %d", k, d.Status, canceled[k], claimed[k])
			}
		}
	}
}

func ntfID(i int) string { return "ntf_r" + string(rune('a'+i)) }
