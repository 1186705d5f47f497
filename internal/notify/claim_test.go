package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify"
)

// gated is a provider whose calls block until the test opens the gate.
type gated struct {
	calls atomic.Int32
	gate  chan struct{}
}

func (p *gated) Name() string       { return "gated" }
func (p *gated) NeedsContact() bool { return false }
func (p *gated) Send(ctx context.Context, _ notify.Message) (notify.Receipt, error) {
	p.calls.Add(1)
	select {
	case <-p.gate:
		return notify.Receipt{ProviderMessageID: "m1"}, nil
	case <-ctx.Done():
		return notify.Receipt{}, ctx.Err()
	}
}

// waitStatus polls the delivery until it has status want, or fails the
// test at the deadline.
func waitStatus(t *testing.T, b *bundle, key notify.DeliveryKey, want notify.Status) notify.Delivery {
	t.Helper()
	var d notify.Delivery
	enginetest.EventuallyNil(t, 10*time.Second, fmt.Sprintf("delivery %s %s", key, want), func() error {
		var err error
		if d, err = b.db.Delivery(t.Context(), key); err != nil {
			return err
		}
		return enginetest.State(d.Status == want, "status %s", d.Status)
	})
	return d
}

// TestRedeliveredCopyWaitsForTheClaim: while one worker's provider call is
// in flight the delivery shows sending, and a redelivered copy of its job
// (on another node) waits instead of calling the provider again.
func TestRedeliveredCopyWaitsForTheClaim(t *testing.T) {
	t.Parallel()
	p := &gated{gate: make(chan struct{})}
	b := setup(t, func(o *notify.Options) { o.Providers[notify.Email] = p })
	a := b.send(t, notify.Request{UserID: "u1", Type: "order.shipped", Data: json.RawMessage(`{"order":"#42"}`),
		Channels: []notify.Channel{notify.Email}})
	jobs := b.q.take()
	key := notify.DeliveryKey{NotificationID: a.NotificationID, Channel: notify.Email}
	done := make(chan error, 1)
	go func() { done <- b.svc.Process(context.Background(), jobs[0]) }()
	d := waitStatus(t, b, key, notify.StatusSending)
	if !d.ClaimUntil.After(b.clock.Now()) {
		t.Errorf("claim until %v, want after now", d.ClaimUntil)
	}
	other := notify.NewService(notify.Options{Store: b.db, Queue: &recQueue{}, Now: b.clock.Now,
		Providers: map[notify.Channel]notify.Provider{notify.Email: p}})
	copyJob := jobs[0]
	copyJob.Redelivered = true
	if err := other.Process(t.Context(), copyJob); !errors.Is(err, notify.ErrInFlight) {
		t.Errorf("Process(copy) while in flight = %v, want ErrInFlight", err)
	}
	close(p.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := other.Process(t.Context(), copyJob); err != nil {
		t.Errorf("Process(copy) after the send = %v, want nil (dropped)", err)
	}
	if n := p.calls.Load(); n != 1 {
		t.Errorf("provider called %d times, want 1", n)
	}
	if d, _ := b.db.Delivery(t.Context(), key); d.Status != notify.StatusSent || d.Attempts != 1 {
		t.Errorf("delivery = %s after %d attempts, want sent after 1", d.Status, d.Attempts)
	}
}

// TestLapsedClaimIsTakenOver: a worker that claimed a delivery and died
// holds it only until the claim lapses; then a copy of the job sends it,
// and so does the recovery sweep's republished job.
func TestLapsedClaimIsTakenOver(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *notify.Options) { o.SendTimeout = 10 * time.Second })
	a := b.send(t, notify.Request{UserID: "u1", Type: "order.shipped", Channels: []notify.Channel{notify.Email}})
	jobs := b.q.take()
	key := notify.DeliveryKey{NotificationID: a.NotificationID, Channel: notify.Email}
	now := b.clock.Now()
	if ok, err := b.db.ClaimDelivery(t.Context(), notify.Claim{Key: key, Owner: "dead-node", At: now, Until: now.Add(20 * time.Second)}); err != nil || !ok {
		t.Fatalf("ClaimDelivery = %v, %v", ok, err)
	}
	copyJob := jobs[0]
	copyJob.Redelivered = true
	if err := b.svc.Process(t.Context(), copyJob); !errors.Is(err, notify.ErrInFlight) {
		t.Fatalf("Process before the claim lapsed = %v, want ErrInFlight", err)
	}
	b.clock.Advance(20 * time.Second)
	if err := b.svc.Process(t.Context(), copyJob); err != nil {
		t.Fatal(err)
	}
	if calls, _ := b.prov.count(); calls != 1 {
		t.Errorf("provider called %d times, want 1", calls)
	}
	if d, _ := b.db.Delivery(t.Context(), key); d.Status != notify.StatusSent {
		t.Errorf("delivery = %s, want sent by the worker that took the claim over", d.Status)
	}

	// The same crash with the job lost too: the recovery sweep finds it.
	a = b.send(t, notify.Request{UserID: "u1", Type: "order.shipped", Channels: []notify.Channel{notify.Email}})
	b.q.take()
	key = notify.DeliveryKey{NotificationID: a.NotificationID, Channel: notify.Email}
	now = b.clock.Now()
	if ok, err := b.db.ClaimDelivery(t.Context(), notify.Claim{Key: key, Owner: "dead-node", At: now, Until: now.Add(20 * time.Second)}); err != nil || !ok {
		t.Fatalf("ClaimDelivery = %v, %v", ok, err)
	}
	b.clock.Advance(20*time.Second + b.svc.RecoveryAfter() + time.Second)
	if n, err := b.svc.Recover(t.Context(), 10); err != nil || n != 1 {
		t.Fatalf("Recover = %d, %v; want the lapsed delivery republished", n, err)
	}
	b.drain(t)
	if d, _ := b.db.Delivery(t.Context(), key); d.Status != notify.StatusSent {
		t.Errorf("delivery = %s, want sent after the sweep", d.Status)
	}
}
