package notify_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
)

// failing is a provider that refuses every call with err.
type failing struct {
	name  string
	err   error
	mu    sync.Mutex
	calls int
}

func (p *failing) Name() string       { return p.name }
func (p *failing) NeedsContact() bool { return false }
func (p *failing) Send(context.Context, notify.Message) (notify.Receipt, error) {
	p.mu.Lock()
	p.calls++
	p.mu.Unlock()
	return notify.Receipt{}, p.err
}

func (p *failing) count() int { p.mu.Lock(); defer p.mu.Unlock(); return p.calls }

// TestCriticalFailsOverWhenRetriesRunOut: an OTP whose SMS provider keeps
// failing temporarily retries on it for the first half of its life, then
// goes to the backup provider; when the backup fails too, to email in the
// last quarter; always before expires_at, every hop on the delivery.
func TestCriticalFailsOverWhenRetriesRunOut(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		backupErr    error
		wantProvider string
		wantChannel  notify.Channel
		after        time.Duration // the least time gone when it is sent
	}{
		{"backup takes it", nil, "sms-backup", notify.SMS, 4 * time.Minute},
		{"backup fails too: another channel", notify.Temporary(errors.New("backup 503"), 0), "scripted", notify.Email, 6 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			primary := &failing{name: "sms-primary", err: notify.Temporary(errors.New("twilio 503"), 0)}
			backup := &scripted{name: "sms-backup"}
			if tt.backupErr != nil {
				backup = nil
			}
			b := setup(t, func(o *notify.Options) {
				o.Providers[notify.SMS] = primary
				var bp notify.Provider = &failing{name: "sms-backup", err: tt.backupErr}
				if backup != nil {
					bp = backup
				}
				o.Backups = map[notify.Channel][]notify.Provider{notify.SMS: {bp}}
			})
			smsUser(t, b)
			start := b.clock.Now()
			expires := start.Add(8 * time.Minute)
			a := b.send(t, notify.Request{UserID: "u1", Type: "otp", Channels: []notify.Channel{notify.SMS}, ExpiresAt: expires})
			var d notify.Delivery
			for b.clock.Now().Before(expires) {
				b.rounds(t, 1, 20*time.Second)
				if d = b.statuses(t, a.NotificationID)[notify.SMS]; d.Status != notify.StatusQueued {
					break
				}
			}
			if d.Status != notify.StatusSent || d.Provider != tt.wantProvider {
				t.Fatalf("delivery = %s by %s (%s), want sent by %s", d.Status, d.Provider, d.Error, tt.wantProvider)
			}
			if !d.UpdatedAt.Before(expires) || d.UpdatedAt.Sub(start) < tt.after {
				t.Errorf("sent %v after acceptance, want from %v on and before it expired (8m)", d.UpdatedAt.Sub(start), tt.after)
			}
			if primary.count() < 10 {
				t.Errorf("primary called %d times, want it retried quickly first", primary.count())
			}
			last := d.Hops[len(d.Hops)-1]
			if last.Result != notify.ClassOK || last.Provider != tt.wantProvider || last.Channel != tt.wantChannel {
				t.Errorf("last hop = %+v, want ok by %s on %s", last, tt.wantProvider, tt.wantChannel)
			}
			seen := map[string]bool{}
			for _, h := range d.Hops {
				seen[h.Provider+":"+h.Result] = true
			}
			if !seen["sms-primary:temporary"] || (tt.backupErr != nil && !seen["sms-backup:temporary"]) {
				t.Errorf("hops = %+v, want the primary's (and the backup's) failures recorded", d.Hops)
			}
		})
	}
}

// TestProviderFaultFailsOverAtOnce: a provider refusing our credentials
// (a fault of the provider, not of the message) sends a critical message
// to the backup in the same attempt; an orders message retries it.
func TestProviderFaultFailsOverAtOnce(t *testing.T) {
	t.Parallel()
	primary := &failing{name: "sms-primary", err: notify.ProviderFault(errors.New("twilio 401 code 20003: authenticate"), 0)}
	backup := &scripted{name: "sms-backup"}
	b := setup(t, func(o *notify.Options) {
		o.Providers[notify.SMS] = primary
		o.Backups = map[notify.Channel][]notify.Provider{notify.SMS: {backup}}
	})
	smsUser(t, b)
	otp := b.send(t, sms("otp"))
	order := b.send(t, sms("order.shipped"))
	b.drain(t)
	if d := b.statuses(t, otp.NotificationID)[notify.SMS]; d.Status != notify.StatusSent || d.Provider != "sms-backup" || d.Attempts != 1 || len(d.Hops) != 2 {
		t.Errorf("OTP = %s by %s after %d attempts, hops %+v; want sent by the backup in the first attempt", d.Status, d.Provider, d.Attempts, d.Hops)
	}
	if d := b.statuses(t, order.NotificationID)[notify.SMS]; d.Status != notify.StatusQueued || d.Attempts != 1 || d.NextAttemptAt.IsZero() {
		t.Errorf("orders message = %s after %d attempts, want queued for a retry (no failover for orders)", d.Status, d.Attempts)
	}
}
