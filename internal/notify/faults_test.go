package notify_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/notify/guard"
	"github.com/sluicehq/sluice/internal/notify/twilio"
)

// smsAPI is a Twilio-compatible Messages API whose health a test sets:
// up, answering a status, or hanging until the caller gives up.
type smsAPI struct {
	*httptest.Server
	mu     sync.Mutex
	status int // 0: up (201); otherwise the status to answer
	code   int // Twilio error code with status
	hang   bool
	calls  int
	sent   []string // bodies accepted
}

func startSMSAPI(t testing.TB) *smsAPI {
	t.Helper()
	a := &smsAPI{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		a.mu.Lock()
		a.calls++
		status, code, hang := a.status, a.code, a.hang
		if status == 0 && !hang {
			a.sent = append(a.sent, r.PostForm.Get("Body"))
		}
		n := a.calls
		a.mu.Unlock()
		if hang {
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if status != 0 {
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(map[string]any{"code": code, "message": "scripted", "status": status})
			return
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"sid": fmt.Sprintf("SM%d", n), "status": "queued"})
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *smsAPI) set(status, code int) {
	a.mu.Lock()
	a.status, a.code = status, code
	a.mu.Unlock()
}

func (a *smsAPI) counts() (calls, sent int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls, len(a.sent)
}

// guarded is a Twilio client for a, behind a breaker (2 failures, open a
// minute) on the test's clock.
func guarded(t testing.TB, a *smsAPI, name string, now func() time.Time) *guard.Provider {
	t.Helper()
	tw, err := twilio.New(twilio.Options{Name: name, BaseURL: a.URL, AccountSID: "AC1", AuthToken: "tok", From: "+15550000000",
		Client: a.Client(), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return &guard.Provider{Provider: tw, Breaker: guard.NewBreaker(guard.BreakerOptions{Failures: 2, OpenFor: time.Minute, Now: now})}
}

// smsUser stores settings with a phone and an email for u1.
func smsUser(t *testing.T, b *bundle) {
	t.Helper()
	st := notify.DefaultSettings()
	st.Contacts = notify.Contacts{Phone: "+4915112345678", Email: "ann@example.test"}
	if _, err := b.svc.PutSettings(t.Context(), "u1", st); err != nil {
		t.Fatal(err)
	}
}

// rounds drains, lets the clock run on and queues what is due, n times.
func (b *bundle) rounds(t *testing.T, n int, step time.Duration) {
	t.Helper()
	for range n {
		b.drain(t)
		b.clock.Advance(step)
		if _, err := b.svc.QueueDue(t.Context(), 100); err != nil {
			t.Fatal(err)
		}
	}
	b.drain(t)
}

func sms(typ string) notify.Request {
	return notify.Request{UserID: "u1", Type: typ, Channels: []notify.Channel{notify.SMS}}
}

func TestFaultProviderErrorsForAWhileThenSends(t *testing.T) {
	t.Parallel()
	api := startSMSAPI(t)
	b := setup(t, func(o *notify.Options) {
		tw, err := twilio.New(twilio.Options{BaseURL: api.URL, AccountSID: "AC1", AuthToken: "tok", From: "+15550000000", Client: api.Client()})
		if err != nil {
			t.Fatal(err)
		}
		o.Providers[notify.SMS] = tw
	})
	smsUser(t, b)
	api.set(http.StatusInternalServerError, 20500)
	a := b.send(t, sms("order.shipped"))
	b.rounds(t, 2, 10*time.Minute) // two more failed attempts
	api.set(0, 0)
	b.rounds(t, 1, 10*time.Minute)
	d := b.statuses(t, a.NotificationID)[notify.SMS]
	if d.Status != notify.StatusSent || d.Attempts != 4 || d.ProviderMessageID != "SM4" {
		t.Fatalf("delivery = %s after %d attempts (%q), want sent after 4 with the SID", d.Status, d.Attempts, d.ProviderMessageID)
	}
}

func TestFaultPermanentErrorIsNotRetried(t *testing.T) {
	t.Parallel()
	api := startSMSAPI(t)
	b := setup(t, func(o *notify.Options) { o.Providers[notify.SMS] = guarded(t, api, "twilio", o.Now) })
	smsUser(t, b)
	api.set(http.StatusBadRequest, 21211)
	a := b.send(t, sms("payment_failed"))
	b.rounds(t, 3, 10*time.Minute)
	d := b.statuses(t, a.NotificationID)[notify.SMS]
	if calls, _ := api.counts(); d.Status != notify.StatusDead || d.Attempts != 1 || calls != 1 {
		t.Fatalf("delivery = %s after %d attempts, %d calls; want dead after 1 call", d.Status, d.Attempts, calls)
	}
	if dls, _, _ := b.svc.DeadLetters(t.Context(), "", 10); len(dls) != 1 {
		t.Errorf("dead letters = %d, want 1", len(dls))
	}
}

func TestFaultProviderDownBreakerBackupAndRecovery(t *testing.T) {
	t.Parallel()
	primary, backup := startSMSAPI(t), startSMSAPI(t)
	b := setup(t, func(o *notify.Options) {
		o.Providers[notify.SMS] = guarded(t, primary, "twilio", o.Now)
		o.Backups = map[notify.Channel][]notify.Provider{notify.SMS: {guarded(t, backup, "twilio-backup", o.Now)}}
	})
	smsUser(t, b)
	primary.set(http.StatusServiceUnavailable, 20503)

	// Two marketing messages fail once each: the breaker opens.
	var campaign []string
	for range 2 {
		campaign = append(campaign, b.send(t, sms("flash_sale")).NotificationID)
	}
	b.drain(t)
	// An OTP now goes to the backup at once, both calls recorded as hops.
	otp := b.send(t, sms("otp"))
	b.drain(t)
	d := b.statuses(t, otp.NotificationID)[notify.SMS]
	if d.Status != notify.StatusSent || d.Provider != "twilio-backup" || len(d.Hops) != 2 ||
		d.Hops[0].Result != notify.ClassUnavailable || d.Hops[1].Provider != "twilio-backup" || d.Hops[1].Result != notify.ClassOK {
		t.Fatalf("OTP during the outage = %+v, want sent by the backup with two hops", d)
	}
	// Marketing waits out the outage without spending its last attempt.
	b.rounds(t, 3, 15*time.Second)
	for _, id := range campaign {
		if d := b.statuses(t, id)[notify.SMS]; d.Status != notify.StatusQueued || d.Attempts != 1 {
			t.Fatalf("marketing during the outage = %s after %d attempts, want queued after 1", d.Status, d.Attempts)
		}
	}
	calls, _ := primary.counts()
	// Recovery: the breaker's probe succeeds, everything goes out.
	primary.set(0, 0)
	b.rounds(t, 4, 30*time.Second)
	for _, id := range campaign {
		if d := b.statuses(t, id)[notify.SMS]; d.Status != notify.StatusSent || d.Provider != "twilio" {
			t.Errorf("marketing after recovery = %s via %s, want sent via twilio", d.Status, d.Provider)
		}
	}
	if after, sent := primary.counts(); after-calls != 2 || sent != 2 {
		t.Errorf("primary: %d calls after recovery, %d sent; want 2 and 2 (nothing lost, nothing doubled)", after-calls, sent)
	}
	if _, sent := backup.counts(); sent != 1 {
		t.Errorf("backup sent %d, want only the OTP", sent)
	}
}

func TestFaultSlowProviderIsCutOffAndWorkersMoveOn(t *testing.T) {
	t.Parallel()
	api := startSMSAPI(t)
	api.hang = true
	b := setup(t, func(o *notify.Options) {
		g := guarded(t, api, "twilio", o.Now)
		// Eight failures open it: every one of the eight concurrent calls
		// below is let through (fewer than eight have failed when it asks).
		g.Breaker = guard.NewBreaker(guard.BreakerOptions{Failures: 8, OpenFor: time.Minute, Now: o.Now})
		o.Providers[notify.SMS] = g
		o.SendTimeout = 50 * time.Millisecond
	})
	smsUser(t, b)
	for range 8 {
		b.send(t, sms("order.shipped"))
	}
	jobs := b.q.take()
	start := time.Now()
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Go(func() {
			if err := b.svc.Process(context.Background(), j); err != nil {
				t.Errorf("Process: %v", err)
			}
		})
	}
	wg.Wait()
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("8 jobs against a hanging provider took %v; want each cut off at its 50ms timeout", took)
	}
	// Every attempt was cut off and counted (how many requests reached the
	// server before their 50ms ran out depends on the machine's load).
	for _, j := range jobs {
		if d := b.statuses(t, j.NotificationID)[notify.SMS]; d.Status != notify.StatusQueued || d.Attempts != 1 || d.Error == "" {
			t.Errorf("after a cut-off call: %s, %d attempts, %q; want queued for a retry after 1", d.Status, d.Attempts, d.Error)
		}
	}
	// The timeouts opened the breaker: the next message is not sent to the
	// hanging provider but waits, without spending an attempt.
	before, _ := api.counts()
	a := b.send(t, sms("order.shipped"))
	b.drain(t)
	if calls, _ := api.counts(); calls != before {
		t.Errorf("provider called %d more times, want no call while the breaker is open", calls-before)
	}
	if d := b.statuses(t, a.NotificationID)[notify.SMS]; d.Status != notify.StatusQueued || d.Attempts != 0 || d.NextAttemptAt.IsZero() {
		t.Errorf("delivery = %+v, want queued for later, no attempt spent", d)
	}
}

func TestFaultUnregisteredTokenIsRemoved(t *testing.T) {
	t.Parallel()
	p := &byToken{answers: map[string][]error{"dead-token": {notify.Permanent(fmt.Errorf("%w: fcm 404 UNREGISTERED", notify.ErrUnregistered))}}}
	b := setup(t, func(o *notify.Options) { o.Providers[notify.Push] = p })
	st := notify.DefaultSettings()
	st.Contacts.PushTokens = []string{"dead-token", "live-token"}
	if _, err := b.svc.PutSettings(t.Context(), "u2", st); err != nil {
		t.Fatal(err)
	}
	b.send(t, notify.Request{UserID: "u2", Type: "order.shipped", Channels: []notify.Channel{notify.Push}})
	b.drain(t)
	got, err := b.svc.Settings(t.Context(), "u2")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Contacts.PushTokens) != 1 || got.Contacts.PushTokens[0] != "live-token" {
		t.Errorf("push tokens = %v, want [live-token]", got.Contacts.PushTokens)
	}
}

func TestFaultEveryProviderDownFailsOverToAnotherChannel(t *testing.T) {
	t.Parallel()
	primary, backup := startSMSAPI(t), startSMSAPI(t)
	var guards []*guard.Provider
	b := setup(t, func(o *notify.Options) {
		guards = []*guard.Provider{guarded(t, primary, "twilio", o.Now), guarded(t, backup, "twilio-backup", o.Now)}
		o.Providers[notify.SMS] = guards[0]
		o.Backups = map[notify.Channel][]notify.Provider{notify.SMS: {guards[1]}}
	})
	smsUser(t, b)
	for _, g := range guards { // both SMS providers are down: their breakers open
		for range 2 {
			g.Breaker.Allow()
			g.Breaker.Done(true)
		}
	}
	otp := b.send(t, sms("otp"))
	order := b.send(t, sms("order.shipped"))
	b.drain(t)
	d := b.statuses(t, otp.NotificationID)[notify.SMS]
	if d.Status != notify.StatusSent || d.Provider != "scripted" || len(d.Hops) != 3 || d.Hops[2].Channel != notify.Email {
		t.Fatalf("OTP = %+v, want sent by email after both SMS providers, three hops", d)
	}
	if _, sent := b.prov.count(); sent != 1 || b.prov.sent[0].Channel != notify.Email || b.prov.sent[0].To != "ann@example.test" {
		t.Errorf("email provider sent %+v, want the OTP to ann@example.test", b.prov.sent)
	}
	if d := b.statuses(t, order.NotificationID)[notify.SMS]; d.Status != notify.StatusQueued || d.Attempts != 0 {
		t.Errorf("orders message = %s after %d attempts, want waiting (no failover for orders)", d.Status, d.Attempts)
	}
	if calls, _ := primary.counts(); calls != 0 {
		t.Errorf("a provider with an open breaker was called %d times", calls)
	}
}
