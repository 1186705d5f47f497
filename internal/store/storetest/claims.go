package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/store"
)

// notificationClaims pins the delivery claim: queued -> sending under one
// owner, the only one who may finish it until the claim lapses, after
// which another may take it over or the recovery sweep queue it again.
func (s suite) notificationClaims(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	n, ds := newNotification("ntf_c", "", "u1", t0, notify.Email, notify.SMS)
	ds[1].NextAttemptAt = t0.Add(time.Minute) // a retry not yet due
	mustCreate(t, db, n, ds)
	email := notify.DeliveryKey{NotificationID: "ntf_c", Channel: notify.Email}
	sms := notify.DeliveryKey{NotificationID: "ntf_c", Channel: notify.SMS}
	claim := func(key notify.DeliveryKey, owner string, prev int, at time.Time) bool {
		t.Helper()
		ok, err := db.ClaimDelivery(ctx, notify.Claim{Key: key, Prev: prev, Owner: owner, At: at, Until: at.Add(30 * time.Second)})
		if err != nil {
			t.Fatalf("ClaimDelivery(%s, %s): %v", key, owner, err)
		}
		return ok
	}
	if claim(sms, "a", 0, t0) {
		t.Error("claimed a delivery whose retry is not due")
	}
	if claim(email, "a", 1, t0) {
		t.Error("claimed with a stale attempt count")
	}
	if !claim(email, "a", 0, t0) {
		t.Fatal("first claim lost")
	}
	if claim(email, "b", 0, t0.Add(29*time.Second)) {
		t.Error("took over a claim that has not lapsed")
	}
	d, err := db.Delivery(ctx, email)
	if err != nil || d.Status != notify.StatusSending || !d.ClaimUntil.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("claimed delivery = %+v, %v; want sending until t0+30s", d, err)
	}
	// Renewals: the owner moves the lapse on; anyone else changes nothing.
	extend := func(owner string, until time.Time) bool {
		t.Helper()
		ok, err := db.ExtendClaim(ctx, notify.Claim{Key: email, Owner: owner, Until: until})
		if err != nil {
			t.Fatalf("ExtendClaim(%s): %v", owner, err)
		}
		return ok
	}
	if extend("b", t0.Add(time.Hour)) {
		t.Error("renewed another worker's claim")
	}
	if !extend("a", t0.Add(40*time.Second)) {
		t.Fatal("the owner could not renew its claim")
	}
	if claim(email, "b", 0, t0.Add(30*time.Second)) {
		t.Error("took over a renewed claim before its new lapse")
	}
	if d, _ := db.Delivery(ctx, email); !d.ClaimUntil.Equal(t0.Add(40 * time.Second)) {
		t.Fatalf("renewed claim lapses at %v, want t0+40s", d.ClaimUntil)
	}
	if !extend("a", t0.Add(30*time.Second)) {
		t.Fatal("the owner could not move its claim's lapse back")
	}
	if jobs, _ := db.StaleDeliveries(ctx, notify.Email, notify.Orders, t0.Add(30*time.Second), 10); len(jobs) != 0 {
		t.Errorf("StaleDeliveries = %v; a held claim is not stale", jobs)
	}
	sent := notify.Attempt{Key: email, Status: notify.StatusSent, Prev: 0, Attempts: 1, At: t0.Add(time.Second)}
	if ok, err := db.FinishAttempt(ctx, sent, nil); err != nil || ok {
		t.Errorf("FinishAttempt without the claim = %v, %v; want false", ok, err)
	}
	sent.Claim = "b"
	if ok, err := db.FinishAttempt(ctx, sent, nil); err != nil || ok {
		t.Errorf("FinishAttempt under another's claim = %v, %v; want false", ok, err)
	}

	// The claim lapses: b takes it over, and a's late outcome is dropped.
	if !claim(email, "b", 0, t0.Add(30*time.Second)) {
		t.Fatal("could not take over a lapsed claim")
	}
	sent.Claim = "a"
	if ok, err := db.FinishAttempt(ctx, sent, nil); err != nil || ok {
		t.Errorf("FinishAttempt of the claim taken over = %v, %v; want false", ok, err)
	}
	sent.Claim = "b"
	if ok, err := db.FinishAttempt(ctx, sent, nil); err != nil || !ok {
		t.Fatalf("FinishAttempt under its claim = %v, %v; want true", ok, err)
	}
	if d, _ := db.Delivery(ctx, email); d.Status != notify.StatusSent || !d.ClaimUntil.IsZero() {
		t.Errorf("finished delivery = %+v; want sent, no claim", d)
	}
	if ok, err := db.ExtendClaim(ctx, notify.Claim{Key: email, Owner: "b", Until: t0.Add(time.Hour)}); err != nil || ok {
		t.Errorf("ExtendClaim of a sent delivery = %v, %v; want false", ok, err)
	}
	if claim(email, "c", 1, t0.Add(time.Hour)) {
		t.Error("claimed a sent delivery")
	}
	checkPipelined(t, db)
	claimLapsed(t, db, sms, claim)
}

// claimLapsed: a worker that crashed holding its claim of sms (a retry
// due at t0+1m): the sweep finds the delivery once the claim has lapsed,
// and MarkQueued queues it again, unless a worker rescheduled it first.
func claimLapsed(t *testing.T, db *store.DB, sms notify.DeliveryKey, claim func(key notify.DeliveryKey, owner string, prev int, at time.Time) bool) {
	t.Helper()
	ctx := t.Context()
	if !claim(sms, "d", 0, t0.Add(time.Minute)) {
		t.Fatal("could not claim the due retry")
	}
	lapse := t0.Add(time.Minute + 30*time.Second)
	if jobs, _ := db.StaleDeliveries(ctx, notify.SMS, notify.Orders, lapse, 10); len(jobs) != 0 {
		t.Errorf("StaleDeliveries at the lapse = %v; want none yet", jobs)
	}
	jobs, err := db.StaleDeliveries(ctx, notify.SMS, notify.Orders, lapse.Add(time.Millisecond), 10)
	if err != nil || len(jobs) != 1 || jobs[0].Key() != sms {
		t.Fatalf("StaleDeliveries after the lapse = %v, %v; want the sms delivery", jobs, err)
	}
	if err := db.MarkQueued(ctx, []notify.DeliveryKey{sms}, lapse.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if d, _ := db.Delivery(ctx, sms); d.Status != notify.StatusQueued || !d.NextAttemptAt.IsZero() || !d.ClaimUntil.IsZero() {
		t.Errorf("delivery after MarkQueued = %+v; want queued, no claim", d)
	}
	// A worker reschedules the delivery before the publisher's MarkQueued
	// lands (a deferral): the new time stands, or no one would queue it.
	later := lapse.Add(time.Minute)
	if ok, err := db.FinishAttempt(ctx, notify.Attempt{Key: sms, Status: notify.StatusQueued, Prev: 0, Attempts: 0,
		NextAttemptAt: later, At: lapse.Add(time.Second)}, nil); err != nil || !ok {
		t.Fatalf("FinishAttempt(deferral) = %v, %v", ok, err)
	}
	if err := db.MarkQueued(ctx, []notify.DeliveryKey{sms}, lapse.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if d, _ := db.Delivery(ctx, sms); !d.NextAttemptAt.Equal(later) {
		t.Errorf("next attempt after a late MarkQueued = %v, want the rescheduled %v", d.NextAttemptAt, later)
	}
}

// notificationClaimRace has many workers claim each of a few deliveries at
// once: exactly one claim of each wins.
func (s suite) notificationClaimRace(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	const deliveries, claimers = 4, 16
	for i := range deliveries {
		n, ds := newNotification(fmt.Sprintf("ntf_r%d", i), "", "u1", t0, notify.Email)
		mustCreate(t, db, n, ds)
	}
	wins := make([]int, deliveries)
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range deliveries {
		key := notify.DeliveryKey{NotificationID: fmt.Sprintf("ntf_r%d", i), Channel: notify.Email}
		for c := range claimers {
			wg.Go(func() {
				<-start
				ok, err := db.ClaimDelivery(ctx, notify.Claim{Key: key, Owner: fmt.Sprintf("w%d", c), At: t0, Until: t0.Add(time.Minute)})
				if err != nil {
					t.Errorf("ClaimDelivery: %v", err)
				}
				if ok {
					mu.Lock()
					wins[i]++
					mu.Unlock()
				}
			})
		}
	}
	close(start)
	wg.Wait()
	for i, w := range wins {
		if w != 1 {
			t.Errorf("delivery %d: %d claims won, want exactly 1", i, w)
		}
	}
}
