package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Notify configures the notification pipeline (docs/notifications.md).
type Notify struct {
	Webhook   Webhook   `yaml:"webhook"`
	Providers Providers `yaml:"providers"`
	Events    Events    `yaml:"events"`
	Inbox     Inbox     `yaml:"inbox"`
	Workflows Workflows `yaml:"workflows"`
	Audiences Audiences `yaml:"audiences"`
	// Retry holds each category's retry timing.
	Retry struct {
		Critical struct {
			Base     time.Duration `yaml:"base" flag:"notify-retry-critical-base" usage:"critical: first retry ceiling (waits are random up to min(cap, base * 2^n))"`
			Cap      time.Duration `yaml:"cap" flag:"notify-retry-critical-cap" usage:"critical: largest retry ceiling"`
			Attempts int           `yaml:"attempts" flag:"notify-retry-critical-attempts" usage:"critical: attempts in all; 0 retries until the notification expires (or one hour without expires_at)"`
		} `yaml:"critical"`
		Orders struct {
			Base     time.Duration `yaml:"base" flag:"notify-retry-orders-base" usage:"orders: first retry ceiling (waits are random up to min(cap, base * 2^n))"`
			Cap      time.Duration `yaml:"cap" flag:"notify-retry-orders-cap" usage:"orders: largest retry ceiling"`
			Attempts int           `yaml:"attempts" flag:"notify-retry-orders-attempts" usage:"orders: attempts in all before the delivery becomes a dead letter"`
		} `yaml:"orders"`
		Marketing struct {
			Base     time.Duration `yaml:"base" flag:"notify-retry-marketing-base" usage:"marketing: first retry ceiling (waits are random up to min(cap, base * 2^n))"`
			Cap      time.Duration `yaml:"cap" flag:"notify-retry-marketing-cap" usage:"marketing: largest retry ceiling"`
			Attempts int           `yaml:"attempts" flag:"notify-retry-marketing-attempts" usage:"marketing: attempts in all (1 or 2) before the delivery is dropped"`
		} `yaml:"marketing"`
	} `yaml:"retry"`
	RecoveryAfter    time.Duration `yaml:"recovery_after" flag:"notify-recovery-after" usage:"how long a queued delivery may go unhandled before the recovery sweep queues it again"`
	Retention        time.Duration `yaml:"retention" flag:"notify-retention" usage:"how long notification history is kept (and how far user history reaches)"`
	Partitions       int           `yaml:"partitions" flag:"notify-partitions" usage:"subjects per channel x category stream, chosen by a hash of the user id"`
	AckWait          time.Duration `yaml:"ack_wait" flag:"notify-ack-wait" usage:"how long JetStream waits for a job of a node that stopped answering before another node takes it (a live node keeps the jobs it holds alive with in-progress acks); a copy delivered while the first is still sending waits for it (the delivery's claim)"`
	WorkersCritical  int           `yaml:"workers_critical" flag:"notify-workers-critical" usage:"critical jobs handled at once per channel"`
	WorkersOrders    int           `yaml:"workers_orders" flag:"notify-workers-orders" usage:"orders jobs handled at once per channel"`
	WorkersMarketing int           `yaml:"workers_marketing" flag:"notify-workers-marketing" usage:"marketing jobs handled at once per channel"`
	MarketingCap     int           `yaml:"marketing_cap" flag:"notify-marketing-cap" usage:"marketing notifications per user per marketing_cap_period; 0 turns the cap off"`
	MarketingPeriod  time.Duration `yaml:"marketing_cap_period" flag:"notify-marketing-cap-period" usage:"the period of the per-user marketing cap"`
	GroupCommit      bool          `yaml:"group_commit" flag:"group-commit" usage:"share one database transaction among concurrent writes (turn off only to measure)"`
	ConfirmPublish   bool          `yaml:"confirm_publish" flag:"notify-confirm-publish" usage:"answer 202 only once JetStream acknowledged the notification's jobs (publishing again for up to 10s), so acceptance order is queue order; off, jobs are published without acknowledgement (about 8% more accepted/s) and the recovery sweep alone finds any the server lost"`

	// SMSGuard is the SMS-pumping guard.
	SMSGuard SMSGuard `yaml:"sms_guard"`
	// Email configures link and open tracking in email.
	Email Email `yaml:"email"`
}

// Email configures tracked links and opens in email (docs/notifications.md,
// "Tracked links and opens in email").
type Email struct {
	TrackLinks  bool          `yaml:"track_links" flag:"notify-email-track-links" usage:"replace the links of every email's text and HTML parts by tracked links (a type's template may ask for it alone with track_links: true); clicks show on the delivery as clicked_at"`
	TrackOpens  bool          `yaml:"track_opens" flag:"notify-email-track-opens" usage:"add an open pixel to every email with an HTML part; opens show on the delivery as opened_at"`
	BotWindow   time.Duration `yaml:"bot_window" flag:"notify-email-bot-window" usage:"hits on an email's tracked links or pixel this soon after it was handed to its provider are mail scanners, recorded as bot hits; 0 turns the window off"`
	BotNetworks []string      `yaml:"bot_networks" flag:"notify-email-bot-networks" usage:"comma-separated CIDRs of mail scanners and image proxies, besides the built-in ones; hits from them are bot hits"`
}

// Webhook configures the webhook channel.
type Webhook struct {
	Secret  string        `yaml:"secret" flag:"webhook-secret" usage:"Standard Webhooks signing secret (whsec_...); empty generates one kept in the data dir"`
	Timeout time.Duration `yaml:"timeout" flag:"webhook-timeout" usage:"timeout of one webhook request"`
	Rate    float64       `yaml:"rate" flag:"webhook-rate" usage:"requests per second to one receiver host (every node together); 0 does not pace"`
}

// Events configures status events sent to event subscriptions.
type Events struct {
	Retention            time.Duration `yaml:"retention" flag:"events-retention" usage:"how long generated status events are kept, and so how far back POST /v1/event-subscriptions/{id}/recover reaches"`
	DisableAfter         time.Duration `yaml:"disable_after" flag:"events-disable-after" usage:"a new subscription's default: disable it once its attempts have failed without a success for this long; 0 never by time"`
	DisableAfterFailures int           `yaml:"disable_after_failures" flag:"events-disable-after-failures" usage:"a new subscription's default: disable it after this many consecutive failed attempts; 0 never by count"`
	Rate                 float64       `yaml:"rate" flag:"events-rate" usage:"requests per second to one subscription (every node together); 0 does not pace"`
	MaxSubscriptions     int           `yaml:"max_subscriptions" flag:"events-max-subscriptions" usage:"how many event subscriptions may exist"`
}

// Retry is one category's retry timing: waits are random in
// [0, min(cap, base * 2^n)], at most attempts attempts (0: until the
// notification expires).
type Retry struct {
	Base     time.Duration
	Cap      time.Duration
	Attempts int
}

// RetryRules returns the three categories' timing by category name.
func (n Notify) RetryRules() map[string]Retry {
	r := n.Retry
	return map[string]Retry{
		"critical":  {r.Critical.Base, r.Critical.Cap, r.Critical.Attempts},
		"orders":    {r.Orders.Base, r.Orders.Cap, r.Orders.Attempts},
		"marketing": {r.Marketing.Base, r.Marketing.Cap, r.Marketing.Attempts},
	}
}

// defaultNotify returns the notification defaults docs/notifications.md
// lists.
func defaultNotify() Notify {
	n := Notify{
		Webhook:          Webhook{Timeout: 10 * time.Second},
		Providers:        defaultProviders(),
		Events:           Events{Retention: 7 * 24 * time.Hour, DisableAfter: 5 * 24 * time.Hour, Rate: 10, MaxSubscriptions: 100},
		Inbox:            defaultInbox(),
		Workflows:        defaultWorkflows(),
		Audiences:        defaultAudiences(),
		RecoveryAfter:    time.Minute,
		Retention:        90 * 24 * time.Hour,
		Partitions:       8,
		AckWait:          30 * time.Second,
		WorkersCritical:  32,
		WorkersOrders:    64,
		WorkersMarketing: 64,
		MarketingCap:     10,
		MarketingPeriod:  24 * time.Hour,
		GroupCommit:      true,
		ConfirmPublish:   true,
		SMSGuard:         defaultSMSGuard(),
		Email:            Email{BotWindow: 10 * time.Second},
	}
	n.Retry.Critical.Base, n.Retry.Critical.Cap = 250*time.Millisecond, 5*time.Second
	n.Retry.Orders.Base, n.Retry.Orders.Cap, n.Retry.Orders.Attempts = time.Second, 5*time.Minute, 5
	n.Retry.Marketing.Base, n.Retry.Marketing.Cap, n.Retry.Marketing.Attempts = 5*time.Second, time.Minute, 2
	return n
}

// validate reports the notification settings' problems through bad.
func (n Notify) validate(bad func(flag, format string, args ...any)) {
	n.Inbox.validate(bad)
	n.Workflows.validate(bad)
	n.Audiences.validate(bad)
	if n.Webhook.Secret != "" && !strings.HasPrefix(n.Webhook.Secret, "whsec_") {
		bad("webhook-secret", "must start with whsec_ (Standard Webhooks)")
	}
	if n.Webhook.Timeout <= 0 {
		bad("webhook-timeout", "must be positive")
	}
	if n.Webhook.Rate < 0 {
		bad("webhook-rate", "must be 0 (unpaced) or more")
	}
	n.Providers.validate(bad)
	if n.Events.Retention <= 0 {
		bad("events-retention", "must be positive")
	}
	if n.Events.DisableAfter < 0 {
		bad("events-disable-after", "must be 0 (never by time) or more")
	}
	if n.Events.DisableAfterFailures < 0 {
		bad("events-disable-after-failures", "must be 0 (never by count) or more")
	}
	if n.Events.Rate < 0 {
		bad("events-rate", "must be 0 (unpaced) or more")
	}
	if n.Events.MaxSubscriptions < 1 {
		bad("events-max-subscriptions", "must be at least 1")
	}
	rules := n.RetryRules()
	for _, name := range []string{"critical", "orders", "marketing"} {
		c := rules[name]
		flag := "notify-retry-" + name
		if c.Base <= 0 {
			bad(flag+"-base", "must be positive")
		}
		if c.Cap < c.Base {
			bad(flag+"-cap", "must be at least the base (%s)", c.Base)
		}
		if c.Attempts < 0 {
			bad(flag+"-attempts", "must be 0 (until expiry) or more")
		}
	}
	if n.Retry.Marketing.Attempts == 0 || n.Retry.Marketing.Attempts > 2 {
		bad("notify-retry-marketing-attempts", "marketing retries at most once: 1 or 2 attempts")
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"notify-recovery-after", n.RecoveryAfter}, {"notify-retention", n.Retention}, {"notify-ack-wait", n.AckWait},
		{"notify-marketing-cap-period", n.MarketingPeriod}} {
		if d.v <= 0 {
			bad(d.flag, "must be positive")
		}
	}
	for _, c := range []struct {
		flag string
		v    int
	}{{"notify-partitions", n.Partitions}, {"notify-workers-critical", n.WorkersCritical},
		{"notify-workers-orders", n.WorkersOrders}, {"notify-workers-marketing", n.WorkersMarketing}} {
		if c.v < 1 || c.v > 1024 {
			bad(c.flag, "must be from 1 to 1024")
		}
	}
	if n.MarketingCap < 0 {
		bad("notify-marketing-cap", "must be 0 (off) or more")
	}
	n.SMSGuard.validate(bad)
	if n.Email.BotWindow < 0 || n.Email.BotWindow > time.Hour {
		bad("notify-email-bot-window", "must be from 0 to 1h")
	}
	if _, err := n.Email.Networks(); err != nil {
		bad("notify-email-bot-networks", "%v", err)
	}
}

// Networks parses BotNetworks.
func (e Email) Networks() ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(e.BotNetworks))
	for _, s := range e.BotNetworks {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("%q is not a CIDR or address", s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// SMSGuard configures the SMS-pumping guard: where SMS may go and
// how fast, checked before a notification is saved
// (docs/notifications.md, "SMS-pumping guard").
type SMSGuard struct {
	AllowedCountries []string      `yaml:"allowed_countries" flag:"notify-sms-allowed-countries" usage:"comma-separated ISO 3166 country codes (US,GB,DE) SMS may go to, by the number's country (libphonenumber); set, numbers valid in none of them are refused too; empty allows every country"`
	RefuseTypes      []string      `yaml:"refuse_types" flag:"notify-sms-refuse-types" usage:"comma-separated number types SMS is refused to (premium_rate, shared_cost, toll_free, voip, personal, pager, uan, voicemail, fixed_line, mobile, fixed_line_or_mobile, unknown); empty refuses none"`
	PrefixDigits     int           `yaml:"prefix_digits" flag:"notify-sms-prefix-digits" usage:"E.164 digits, country code included, that make the destination prefix counted by prefix_limit"`
	PrefixLimit      int           `yaml:"prefix_limit" flag:"notify-sms-prefix-limit" usage:"SMS notifications per destination prefix per prefix_period, on every node together; 0 turns the limit off"`
	PrefixPeriod     time.Duration `yaml:"prefix_period" flag:"notify-sms-prefix-period" usage:"the period of prefix_limit"`
	UserLimit        int           `yaml:"user_limit" flag:"notify-sms-user-limit" usage:"SMS notifications per user per user_period, on every node together; 0 turns the limit off"`
	UserPeriod       time.Duration `yaml:"user_period" flag:"notify-sms-user-period" usage:"the period of user_limit"`
}

// smsNumberTypes are the number types refuse_types accepts (internal/phone).
var smsNumberTypes = []string{"fixed_line", "mobile", "fixed_line_or_mobile", "toll_free", "premium_rate", "shared_cost",
	"voip", "personal", "pager", "uan", "voicemail", "unknown"}

func defaultSMSGuard() SMSGuard {
	return SMSGuard{RefuseTypes: []string{"premium_rate", "shared_cost"}, PrefixDigits: 6,
		PrefixPeriod: time.Hour, UserPeriod: time.Hour}
}

func (g SMSGuard) validate(bad func(flag, format string, args ...any)) {
	for _, c := range g.AllowedCountries {
		if len(c) != 2 || strings.ToUpper(c) != c {
			bad("notify-sms-allowed-countries", "%q is not an ISO 3166 alpha-2 country code such as US or GB", c)
		}
	}
	for _, t := range g.RefuseTypes {
		if !slices.Contains(smsNumberTypes, t) {
			bad("notify-sms-refuse-types", "%q is not a number type (want one of %s)", t, strings.Join(smsNumberTypes, ", "))
		}
	}
	if g.PrefixDigits < 1 || g.PrefixDigits > 15 {
		bad("notify-sms-prefix-digits", "must be from 1 to 15 (E.164 numbers have at most 15 digits)")
	}
	if g.PrefixLimit < 0 {
		bad("notify-sms-prefix-limit", "must be 0 (off) or more")
	}
	if g.UserLimit < 0 {
		bad("notify-sms-user-limit", "must be 0 (off) or more")
	}
	if g.PrefixPeriod <= 0 {
		bad("notify-sms-prefix-period", "must be positive")
	}
	if g.UserPeriod <= 0 {
		bad("notify-sms-user-period", "must be positive")
	}
}
