package notify

import (
	"cmp"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// Settings are one user's preferences and contacts.
type Settings struct {
	Channels   map[Channel]bool
	Categories map[Category]bool
	Contacts   Contacts
	Locale     string
	Timezone   string     // IANA name; empty means UTC
	QuietHours QuietHours // zero: none
	UpdatedAt  time.Time
}

// Contacts are where a user is reached on each channel.
type Contacts struct {
	Email      string   `json:"email,omitempty"`
	Phone      string   `json:"phone,omitempty"`
	PushTokens []string `json:"push_tokens,omitempty"`
	WebhookURL string   `json:"webhook_url,omitempty"`
}

// QuietHours is a daily window, in the user's timezone, during which
// non-critical messages wait. Start and End are "HH:MM"; a window whose end
// is before its start spans midnight. The zero value means none.
type QuietHours struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// DefaultSettings are the settings of a user who stored none: every channel
// on (webhook only when it has a URL, which it cannot have yet) and every
// category on.
func DefaultSettings() Settings {
	s := Settings{Channels: map[Channel]bool{}, Categories: map[Category]bool{}, Locale: DefaultLocale}
	s.fill()
	return s
}

// fill gives absent channel and category switches their default: on, except
// webhook, which is on only when a URL is set.
func (s *Settings) fill() {
	if s.Channels == nil {
		s.Channels = map[Channel]bool{}
	}
	if s.Categories == nil {
		s.Categories = map[Category]bool{}
	}
	for _, ch := range Channels {
		if _, ok := s.Channels[ch]; !ok {
			s.Channels[ch] = ch != Webhook || s.Contacts.WebhookURL != ""
		}
	}
	for _, c := range Categories {
		if _, ok := s.Categories[c]; !ok {
			s.Categories[c] = true
		}
	}
	s.Locale = cmp.Or(s.Locale, DefaultLocale)
}

// Normalize fills defaults and checks the settings' rules: critical cannot
// be muted, at least one channel stays on, the timezone and quiet hours
// parse, contacts look like contacts. Every problem is named.
func (s *Settings) Normalize() error {
	var errs []apperr.FieldError
	bad := func(field, format string, args ...any) {
		errs = append(errs, apperr.FieldError{Field: field, Detail: fmt.Sprintf(format, args...)})
	}
	for ch := range s.Channels {
		if !ch.Valid() {
			bad("channels."+string(ch), "unknown channel (want email, sms, push, webhook or inapp)")
		}
	}
	for c := range s.Categories {
		if !c.Valid() {
			bad("categories."+string(c), "unknown category (want critical, orders or marketing)")
		}
	}
	s.fill()
	if !s.Categories[Critical] {
		bad("categories.critical", "critical notifications cannot be turned off")
	}
	if !slices.ContainsFunc(Channels, func(ch Channel) bool { return s.Channels[ch] }) {
		bad("channels", "at least one channel must stay on")
	}
	if s.Timezone != "" {
		if _, err := time.LoadLocation(s.Timezone); err != nil || s.Timezone == "Local" {
			bad("timezone", "%q is not an IANA time zone such as Europe/Berlin", s.Timezone)
		}
	}
	if !validLocale(s.Locale) {
		bad("locale", "must look like en or pt-BR")
	}
	if s.QuietHours != (QuietHours{}) {
		if _, err := parseClock(s.QuietHours.Start); err != nil {
			bad("quiet_hours.start", "%v", err)
		}
		if _, err := parseClock(s.QuietHours.End); err != nil {
			bad("quiet_hours.end", "%v", err)
		}
	}
	c := s.Contacts
	if c.Email != "" && (!strings.Contains(c.Email, "@") || len(c.Email) > 254) {
		bad("contacts.email", "is not an email address")
	}
	if c.Phone != "" && !validPhone(c.Phone) {
		bad("contacts.phone", "must be E.164, like +14155550100")
	}
	if len(c.PushTokens) > 20 {
		bad("contacts.push_tokens", "at most 20 tokens")
	}
	if c.WebhookURL != "" {
		u, err := url.Parse(c.WebhookURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("contacts.webhook_url", "must be an absolute http or https URL")
		}
	}
	return apperr.Fields(apperr.Unprocessable, "the settings break a rule", errs)
}

func validPhone(p string) bool {
	if len(p) < 8 || len(p) > 16 || p[0] != '+' {
		return false
	}
	for _, r := range p[1:] {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// parseClock reads "HH:MM" as minutes after midnight.
func parseClock(s string) (int, error) {
	t, err := time.Parse("15:04", s)
	if err != nil || len(s) != 5 {
		return 0, fmt.Errorf("%q is not a time like 22:00", s)
	}
	return t.Hour()*60 + t.Minute(), nil
}

// Clone returns a deep copy, safe to change.
func (s Settings) Clone() Settings {
	s.Channels = maps.Clone(s.Channels)
	s.Categories = maps.Clone(s.Categories)
	s.Contacts.PushTokens = slices.Clone(s.Contacts.PushTokens)
	return s
}

// QuietUntil returns when the quiet hours around now end, or the zero time
// when now is outside them (or the user has none).
func (s Settings) QuietUntil(now time.Time) time.Time {
	if s.QuietHours == (QuietHours{}) {
		return time.Time{}
	}
	start, err1 := parseClock(s.QuietHours.Start)
	end, err2 := parseClock(s.QuietHours.End)
	if err1 != nil || err2 != nil || start == end {
		return time.Time{}
	}
	loc := time.UTC
	if s.Timezone != "" {
		if l, err := time.LoadLocation(s.Timezone); err == nil {
			loc = l
		}
	}
	local := now.In(loc)
	minute := local.Hour()*60 + local.Minute()
	midnight := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, loc)
	at := func(dayOffset, m int) time.Time {
		return time.Date(midnight.Year(), midnight.Month(), midnight.Day()+dayOffset, m/60, m%60, 0, 0, loc)
	}
	switch {
	case start < end && minute >= start && minute < end:
		return at(0, end)
	case start > end && minute >= start:
		return at(1, end)
	case start > end && minute < end:
		return at(0, end)
	}
	return time.Time{}
}

// contactFor returns the user's address on ch ("" when none).
func (c Contacts) contactFor(ch Channel) string {
	switch ch {
	case Email:
		return c.Email
	case SMS:
		return c.Phone
	case Push:
		if len(c.PushTokens) > 0 {
			return c.PushTokens[0]
		}
	case Webhook:
		return c.WebhookURL
	}
	return ""
}
