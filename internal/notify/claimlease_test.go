package notify_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify"
)

// TestClaimRenewedWhileTheCallRunsAndTakenOverWhenItStops: a worker
// renews its short claim for as long as its provider call runs, so a copy
// of the job waits however long the call takes; the claim of a worker that
// stops renewing (it died) lapses within the lease, the next copy takes
// the delivery over, and the takeover is observed (it is the one case
// where a delivery may reach its provider twice).
func TestClaimRenewedWhileTheCallRunsAndTakenOverWhenItStops(t *testing.T) {
	t.Parallel()
	const lease = 300 * time.Millisecond
	p := &gated{gate: make(chan struct{})}
	var (
		mu  sync.Mutex
		obs []notify.Observation
	)
	observe := func(o notify.Observation) { mu.Lock(); obs = append(obs, o); mu.Unlock() }
	b := setup(t, func(o *notify.Options) {
		o.Providers[notify.Email] = p
		o.ClaimLease = lease
		o.Observe = observe
	})
	a := b.send(t, notify.Request{UserID: "u1", Type: "order.shipped", Channels: []notify.Channel{notify.Email}})
	jobs := b.q.take()
	key := notify.DeliveryKey{NotificationID: a.NotificationID, Channel: notify.Email}
	done := make(chan error, 1)
	go func() { done <- b.svc.Process(context.Background(), jobs[0]) }()
	d := waitStatus(t, b, key, notify.StatusSending)
	if want := b.clock.Now().Add(lease); d.ClaimUntil.After(want) {
		t.Errorf("claim until %v, want at most the lease (%v)", d.ClaimUntil, want)
	}
	// The call goes on past several leases: each renewal moves the lapse on.
	for range 3 {
		b.clock.Advance(lease)
		want := b.clock.Now().Add(lease)
		enginetest.EventuallyNil(t, 5*time.Second, "the claim renewed", func() error {
			d, err := b.db.Delivery(t.Context(), key)
			return enginetest.State(err == nil && d.ClaimUntil.Equal(want), "claim until %v (%v), want %v", d.ClaimUntil, err, want)
		})
	}
	copyJob := jobs[0]
	copyJob.Redelivered = true
	if err := b.svc.Process(t.Context(), copyJob); !errors.Is(err, notify.ErrInFlight) {
		t.Errorf("Process(copy) during the renewed call = %v, want ErrInFlight", err)
	}
	close(p.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// A worker that claimed and died: nothing renews its claim.
	a = b.send(t, notify.Request{UserID: "u2", Type: "order.shipped", Channels: []notify.Channel{notify.Email}})
	jobs = b.q.take()
	key = notify.DeliveryKey{NotificationID: a.NotificationID, Channel: notify.Email}
	now := b.clock.Now()
	if ok, err := b.db.ClaimDelivery(t.Context(), notify.Claim{Key: key, Owner: "dead-node", At: now, Until: now.Add(lease)}); err != nil || !ok {
		t.Fatalf("ClaimDelivery = %v, %v", ok, err)
	}
	copyJob = jobs[0]
	copyJob.Redelivered = true
	b.clock.Advance(lease)
	if err := b.svc.Process(t.Context(), copyJob); err != nil {
		t.Fatalf("Process(copy) after the lease = %v, want the delivery taken over and sent", err)
	}
	if d, _ := b.db.Delivery(t.Context(), key); d.Status != notify.StatusSent {
		t.Errorf("delivery = %s, want sent by the worker that took it over", d.Status)
	}
	mu.Lock()
	defer mu.Unlock()
	var taken int
	for _, o := range obs {
		if o.TakenOver {
			taken++
		}
	}
	if taken != 1 {
		t.Errorf("%d takeovers observed, want 1 (observations %+v)", taken, obs)
	}
}
