package notify

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

func TestBackoffFullJitter(t *testing.T) {
	t.Parallel()
	r := RetryRule{Base: 100 * time.Millisecond, Cap: 500 * time.Millisecond}
	one := func() float64 { return 1 }
	half := func() float64 { return 0.5 }
	var got []time.Duration
	for n := 1; n <= 5; n++ {
		got = append(got, r.Backoff(n, one))
	}
	want := []time.Duration{100, 200, 400, 500, 500}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Errorf("Backoff(%d, rand=1) = %v, want %v (the ceiling min(cap, base*2^n))", i+1, got[i], want[i]*time.Millisecond)
		}
	}
	if d := r.Backoff(4, half); d != 250*time.Millisecond {
		t.Errorf("Backoff(4, rand=0.5) = %v, want 250ms (capped to 500ms first, then halved)", d)
	}
	if d := r.Backoff(200, one); d != 500*time.Millisecond {
		t.Errorf("Backoff(200) = %v, want the cap (no overflow)", d)
	}
	if d := r.Backoff(3, func() float64 { return 0 }); d != 0 {
		t.Errorf("Backoff(rand=0) = %v, want 0: full jitter starts at zero", d)
	}
}

func TestRetryDecisions(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	rules := DefaultRetryRules()
	one := func() float64 { return 1 }
	tests := []struct {
		name       string
		cat        Category
		expires    time.Time
		attempts   int
		permanent  bool
		retryAfter time.Duration
		want       Status
		wantNext   time.Duration
	}{
		{"critical retries quickly", Critical, now.Add(time.Minute), 1, false, 0, StatusQueued, 250 * time.Millisecond},
		{"critical retries on and on before expiry", Critical, now.Add(time.Hour), 30, false, 0, StatusQueued, 5 * time.Second},
		{"critical stops at expiry", Critical, now.Add(time.Second), 5, false, 0, StatusExpired, 0},
		{"critical permanent is a dead letter", Critical, now.Add(time.Hour), 1, true, 0, StatusDead, 0},
		{"orders back off", Orders, time.Time{}, 2, false, 0, StatusQueued, 2 * time.Second},
		{"orders honour Retry-After", Orders, time.Time{}, 1, false, 30 * time.Second, StatusQueued, 30 * time.Second},
		{"orders dead-letter after 5 attempts", Orders, time.Time{}, 5, false, 0, StatusDead, 0},
		{"orders permanent is a dead letter", Orders, time.Time{}, 1, true, 0, StatusDead, 0},
		{"marketing retries once", Marketing, time.Time{}, 1, false, 0, StatusQueued, 5 * time.Second},
		{"marketing is dropped after the retry", Marketing, time.Time{}, 2, false, 0, StatusFailed, 0},
		{"marketing permanent is dropped", Marketing, time.Time{}, 1, true, 0, StatusFailed, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := rules[tt.cat].decide(now, now.Add(-time.Minute), tt.expires, tt.attempts, tt.permanent, tt.retryAfter, one)
			if o.Status != tt.want {
				t.Fatalf("decide = %+v, want status %s", o, tt.want)
			}
			if o.DeadLetter != (tt.want == StatusDead) {
				t.Errorf("DeadLetter = %v for status %s", o.DeadLetter, o.Status)
			}
			if tt.want == StatusQueued && o.NextAttemptAt.Sub(now) != tt.wantNext {
				t.Errorf("next attempt in %v, want %v", o.NextAttemptAt.Sub(now), tt.wantNext)
			}
		})
	}
}

func TestSettingsRules(t *testing.T) {
	t.Parallel()
	off := false
	tests := []struct {
		name  string
		s     Settings
		field string
	}{
		{"defaults", Settings{}, ""},
		{"critical off", Settings{Categories: map[Category]bool{Critical: off}}, "categories.critical"},
		{"every channel off", Settings{Channels: map[Channel]bool{Email: false, SMS: false, Push: false, Webhook: false, InApp: false}}, "channels"},
		{"marketing off is fine", Settings{Categories: map[Category]bool{Marketing: false}}, ""},
		{"unknown channel", Settings{Channels: map[Channel]bool{"fax": true}}, "channels.fax"},
		{"bad timezone", Settings{Timezone: "Mars/Olympus"}, "timezone"},
		{"bad quiet hours", Settings{QuietHours: QuietHours{Start: "25:00", End: "07:00"}}, "quiet_hours.start"},
		{"bad phone", Settings{Contacts: Contacts{Phone: "0800 123"}}, "contacts.phone"},
		{"bad webhook url", Settings{Contacts: Contacts{WebhookURL: "ftp://x"}}, "contacts.webhook_url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := tt.s.Clone()
			err := s.Normalize()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Normalize = %v, want nil", err)
				}
				return
			}
			ae, ok := err.(*apperr.Error)
			if !ok || ae.Code != apperr.Unprocessable || len(ae.Fields) == 0 || ae.Fields[0].Field != tt.field {
				t.Fatalf("Normalize = %#v, want Unprocessable on %s", err, tt.field)
			}
		})
	}
	d := DefaultSettings()
	if !d.Channels[Email] || d.Channels[Webhook] || !d.Categories[Marketing] {
		t.Errorf("DefaultSettings = %+v, want every channel but webhook and every category on", d)
	}
	withURL := Settings{Contacts: Contacts{WebhookURL: "https://example.com/hook"}}
	if err := withURL.Normalize(); err != nil || !withURL.Channels[Webhook] {
		t.Errorf("settings with a webhook_url: webhook on = %v, %v; want on by default", withURL.Channels[Webhook], err)
	}
}

func TestQuietUntil(t *testing.T) {
	t.Parallel()
	berlin, _ := time.LoadLocation("Europe/Berlin")
	s := Settings{Timezone: "Europe/Berlin", QuietHours: QuietHours{Start: "22:00", End: "07:00"}}
	day := Settings{QuietHours: QuietHours{Start: "12:00", End: "14:00"}}
	tests := []struct {
		name string
		s    Settings
		now  time.Time
		want time.Time
	}{
		{"before midnight", s, time.Date(2026, 3, 10, 23, 30, 0, 0, berlin), time.Date(2026, 3, 11, 7, 0, 0, 0, berlin)},
		{"after midnight", s, time.Date(2026, 3, 11, 3, 0, 0, 0, berlin), time.Date(2026, 3, 11, 7, 0, 0, 0, berlin)},
		{"daytime is not quiet", s, time.Date(2026, 3, 11, 12, 0, 0, 0, berlin), time.Time{}},
		{"the end is not quiet", s, time.Date(2026, 3, 11, 7, 0, 0, 0, berlin), time.Time{}},
		{"utc window", day, time.Date(2026, 3, 11, 13, 0, 0, 0, time.UTC), time.Date(2026, 3, 11, 14, 0, 0, 0, time.UTC)},
		{"no quiet hours", Settings{}, time.Date(2026, 3, 11, 3, 0, 0, 0, time.UTC), time.Time{}},
	}
	for _, tt := range tests {
		if got := tt.s.QuietUntil(tt.now.UTC()); !got.Equal(tt.want) {
			t.Errorf("%s: QuietUntil(%v) = %v, want %v", tt.name, tt.now, got, tt.want)
		}
	}
}
