package notify_test

import (
	"crypto/rand"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/notify/guard"
	"github.com/sluicehq/sluice/internal/phone"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// refusals counts the guard's refusals by reason.
type refusals struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *refusals) add(reason string) { r.mu.Lock(); r.n[reason]++; r.mu.Unlock() }
func (r *refusals) get(reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[reason]
}

func withPhone(t *testing.T, b *bundle, user, number string) {
	t.Helper()
	if _, err := b.svc.PutSettings(t.Context(), user, notify.Settings{Contacts: notify.Contacts{Phone: number}}); err != nil {
		t.Fatalf("PutSettings(%s, %s): %v", user, number, err)
	}
}

// checkRefused asserts that err is the guard's 422 for reason and that
// nothing of user's was stored or queued.
func checkRefused(t *testing.T, b *bundle, err error, user, reason string) {
	t.Helper()
	ae, ok := err.(*apperr.Error)
	if !ok || ae.Code != apperr.Unprocessable || len(ae.Fields) != 1 || ae.Fields[0].Field != "sms" ||
		!strings.HasPrefix(ae.Fields[0].Detail, reason+": ") || !strings.Contains(ae.Message, reason) {
		t.Fatalf("Send = %v; want a 422 naming %s on field sms", err, reason)
	}
	if recs, _, err := b.svc.UserNotifications(t.Context(), user, "", 10); err != nil || len(recs) != 0 {
		t.Errorf("%s has %d notifications stored (%v); want none after a refusal", user, len(recs), err)
	}
	if jobs := b.q.take(); len(jobs) != 0 {
		t.Errorf("%d jobs queued after a refusal, want none", len(jobs))
	}
}

// TestSMSGuardCountriesAndTypes: numbers of several countries, allowed
// and refused by country, validity and type; a refused SMS refuses the
// whole multi-channel request and stores nothing; an SMS that would not
// be sent (not requested, channel off) is not checked.
func TestSMSGuardCountriesAndTypes(t *testing.T) {
	t.Parallel()
	counts := &refusals{n: map[string]int{}}
	b := setup(t, func(o *notify.Options) {
		o.SMSGuard = guard.NewSMS(guard.SMSOptions{
			AllowedCountries: []string{"US", "GB", "DE", "FR", "IN", "BR"},
			RefuseTypes:      []phone.Type{phone.PremiumRate, phone.SharedCost},
			Refused:          counts.add,
		})
	})
	tests := []struct {
		name, number, reason string // reason "" is allowed
	}{
		{name: "US", number: "+14155550100"},
		{name: "GB mobile", number: "+447400123456"},
		{name: "DE mobile", number: "+4915112345678"},
		{name: "FR mobile", number: "+33612345678"},
		{name: "IN mobile", number: "+919876543210"},
		{name: "BR mobile", number: "+5511987654321"},
		{name: "NG not allowed", number: "+2348031234567", reason: guard.SMSCountryNotAllowed},
		{name: "GB premium rate", number: "+449098790000", reason: guard.SMSNumberType},
		{name: "US premium rate", number: "+19002001234", reason: guard.SMSNumberType},
		{name: "FR premium rate", number: "+33899123456", reason: guard.SMSNumberType},
		{name: "fits no plan", number: "+15550000000", reason: guard.SMSNumberInvalid},
	}
	for i, tt := range tests {
		user := "user" + string(rune('a'+i))
		withPhone(t, b, user, tt.number)
		before := counts.get(tt.reason)
		a, err := b.svc.Send(t.Context(), notify.Request{UserID: user, Type: "otp", Data: []byte(`{"code":"123456"}`),
			Channels: []notify.Channel{notify.Email, notify.SMS}})
		if tt.reason == "" {
			if err != nil {
				t.Errorf("%s: Send(%s) = %v, want accepted", tt.name, tt.number, err)
			} else if jobs := b.q.take(); len(jobs) != 2 {
				t.Errorf("%s: %d jobs queued, want email and sms", tt.name, len(jobs))
			}
			_ = a
			continue
		}
		checkRefused(t, b, err, user, tt.reason)
		if got := counts.get(tt.reason); got != before+1 {
			t.Errorf("%s: refusals{%s} = %d, want %d", tt.name, tt.reason, got, before+1)
		}
	}

	// The refusal does not echo the whole number.
	withPhone(t, b, "ng", "+2348031234567")
	_, err := b.svc.Send(t.Context(), notify.Request{UserID: "ng", Type: "otp", Data: []byte(`{"code":"1"}`)})
	if err == nil || strings.Contains(err.(*apperr.Error).Fields[0].Detail, "8031234567") {
		t.Errorf("refusal %v shows the full number", err)
	}
	b.q.take()
	// Email only, or SMS turned off: the number is not checked.
	if _, err := b.svc.Send(t.Context(), notify.Request{UserID: "ng", Type: "otp", Data: []byte(`{"code":"1"}`),
		Channels: []notify.Channel{notify.Email}}); err != nil {
		t.Errorf("email-only Send = %v, want accepted", err)
	}
	if _, err := b.svc.PutSettings(t.Context(), "ng-off", notify.Settings{Channels: map[notify.Channel]bool{notify.SMS: false},
		Contacts: notify.Contacts{Phone: "+2348031234567"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Send(t.Context(), notify.Request{UserID: "ng-off", Type: "order.shipped"}); err != nil {
		t.Errorf("Send with SMS off = %v, want accepted (SMS suppressed, not checked)", err)
	}
}

// TestSMSGuardVelocity: a destination prefix and a user each take so
// many SMS notifications per period; over it the request is refused; a
// retry of a request accepted earlier gets its first answer, not a
// refusal.
func TestSMSGuardVelocity(t *testing.T) {
	t.Parallel()
	counts := &refusals{n: map[string]int{}}
	mem := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{})
	lim := func(name string, n int64) ratelimit.Limiter {
		l, err := ratelimit.NewPolicyLimiter(mem, ratelimit.Policy{Name: name, Algorithm: ratelimit.TokenBucket, Limit: n, Period: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	sg := guard.NewSMS(guard.SMSOptions{PrefixDigits: 6, PerPrefix: lim("prefix", 4),
		PerUser: lim("user", 2), Refused: counts.add})
	var opts notify.Options
	b := setup(t, func(o *notify.Options) { o.SMSGuard = sg; opts = *o })
	otp := func(user, reqID string) error {
		_, err := b.svc.Send(t.Context(), notify.Request{RequestID: reqID, UserID: user, Type: "otp", Data: []byte(`{"code":"1"}`)})
		b.q.take()
		return err
	}
	// Five users on one prefix (+44 7400): the fifth is refused.
	for i, n := range []string{"+447400123401", "+447400123402", "+447400999903", "+447400555504", "+447400000005"} {
		user := "p" + string(rune('0'+i))
		withPhone(t, b, user, n)
		err := otp(user, "")
		if i < 4 && err != nil {
			t.Fatalf("SMS %d to the prefix = %v, want accepted", i+1, err)
		}
		if i == 4 {
			checkRefused(t, b, err, user, guard.SMSPrefixVelocity)
		}
	}
	// Another prefix is not affected.
	withPhone(t, b, "u", "+4915112345678")
	if err := otp("u", "login-1"); err != nil {
		t.Fatalf("first SMS to u = %v", err)
	}
	if err := otp("u", "login-2"); err != nil {
		t.Fatalf("second SMS to u = %v", err)
	}
	// The third is over the user's limit, but a retry of login-2 is a
	// duplicate of an accepted request: answered as such, even by a node
	// whose request_id fast path has not seen it (it reaches the guard).
	opts.Dedupe = nil
	other := notify.NewService(opts)
	a, err := other.Send(t.Context(), notify.Request{RequestID: "login-2", UserID: "u", Type: "otp", Data: []byte(`{"code":"1"}`)})
	if err != nil || !a.Duplicate {
		t.Errorf("retry of an accepted request on another node = %+v, %v; want its first answer", a, err)
	}
	if counts.get(guard.SMSUserVelocity) != 1 {
		t.Errorf("the retry did not reach the guard (refusals %v); the test proves nothing", counts.n)
	}
	b.q.take()
	_, err = b.svc.Send(t.Context(), notify.Request{UserID: "u", Type: "otp", Data: []byte(`{"code":"2"}`)})
	if ae, ok := err.(*apperr.Error); !ok || !strings.HasPrefix(ae.Fields[0].Detail, guard.SMSUserVelocity) {
		t.Errorf("third SMS to u = %v, want refused for user velocity", err)
	}
	if counts.get(guard.SMSPrefixVelocity) != 1 || counts.get(guard.SMSUserVelocity) != 2 {
		t.Errorf("refusals = %v", counts.n)
	}
}

// TestSMSGuardVelocityIsSharedOnRedis: two nodes (two services, each with
// its own Redis connection, on one store) share the per-prefix limit: 4
// per hour on both together, not 4 each.
func TestSMSGuardVelocityIsSharedOnRedis(t *testing.T) {
	t.Parallel()
	url := enginetest.RedisURL(t)
	prefix := "test:" + rand.Text()[:10] + ":"
	first := setup(t, nil)
	nodes := []*notify.Service{}
	for range 2 {
		rc := enginetest.RedisClient(t, url)
		st, err := redisstore.New(rc, redisstore.Options{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		l, err := ratelimit.NewPolicyLimiter(st, ratelimit.Policy{Name: "notify_sms_per_prefix", Algorithm: ratelimit.TokenBucket, Limit: 4, Period: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, notify.NewService(notify.Options{Store: first.db, Queue: first.q, Now: first.clock.Now,
			Providers: map[notify.Channel]notify.Provider{notify.Email: first.prov, notify.SMS: first.prov, notify.Push: first.prov, notify.Webhook: first.prov},
			SMSGuard:  guard.NewSMS(guard.SMSOptions{PrefixDigits: 7, PerPrefix: l})}))
	}
	accepted := 0
	for i := range 10 {
		user := "r" + string(rune('0'+i))
		if _, err := nodes[0].PutSettings(t.Context(), user, notify.Settings{Contacts: notify.Contacts{Phone: "+1415555010" + string(rune('0'+i))}}); err != nil {
			t.Fatal(err)
		}
		_, err := nodes[i%2].Send(t.Context(), notify.Request{UserID: user, Type: "otp", Data: []byte(`{"code":"1"}`)})
		switch {
		case err == nil:
			accepted++
		case apperr.CodeOf(err) != apperr.Unprocessable:
			t.Fatalf("Send on node %d: %v", i%2, err)
		}
	}
	if accepted != 4 {
		t.Errorf("two nodes accepted %d SMS to one prefix, want 4 (one shared limit)", accepted)
	}
}

// BenchmarkSMSGuardCheck: a check of a number seen before (parsed once,
// then cached), with country and type rules and a memory velocity limit.
func BenchmarkSMSGuardCheck(b *testing.B) {
	mem := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{})
	l, err := ratelimit.NewPolicyLimiter(mem, ratelimit.Policy{Name: "p", Algorithm: ratelimit.TokenBucket, Limit: 1_000_000_000, Period: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	g := guard.NewSMS(guard.SMSOptions{AllowedCountries: []string{"GB", "DE"},
		RefuseTypes: []phone.Type{phone.PremiumRate, phone.SharedCost}, PerPrefix: l})
	for b.Loop() {
		if err := g.Check(b.Context(), "u1", "+447400123456"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSMSGuardCoversFailover: a critical message whose email provider
// fails over to SMS at send time passes the guard too: to a number of a
// country not allowed, the SMS provider is never called.
func TestSMSGuardCoversFailover(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		allowed string
		calls   int
	}{{"allowed", "NG", 1}, {"refused", "DE", 0}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			counts := &refusals{n: map[string]int{}}
			email := &failing{name: "smtp", err: notify.ProviderFault(errors.New("smtp 535 authentication failed"), 0)}
			smsProv := &scripted{name: "twilio"}
			b := setup(t, func(o *notify.Options) {
				o.Providers[notify.Email], o.Providers[notify.SMS] = email, smsProv
				o.SMSGuard = guard.NewSMS(guard.SMSOptions{AllowedCountries: []string{tt.allowed}, Refused: counts.add})
			})
			st := notify.DefaultSettings()
			st.Contacts = notify.Contacts{Phone: "+2348031234567", Email: "ann@example.test"}
			if _, err := b.svc.PutSettings(t.Context(), "u1", st); err != nil {
				t.Fatal(err)
			}
			b.send(t, notify.Request{UserID: "u1", Type: "otp", Data: []byte(`{"code":"1"}`), Channels: []notify.Channel{notify.Email}})
			b.drain(t)
			if calls, _ := smsProv.count(); calls != tt.calls {
				t.Errorf("SMS provider called %d times on failover, want %d", calls, tt.calls)
			}
			if want := 1 - tt.calls; counts.get(guard.SMSCountryNotAllowed) != want {
				t.Errorf("refusals = %v, want %d country_not_allowed", counts.n, want)
			}
		})
	}
}
