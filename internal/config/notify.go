package config

import (
	"strings"
	"time"
)

// NotifyConfig configures the notification pipeline (docs/notifications.md).
type NotifyConfig struct {
	Webhook   WebhookConfig   `yaml:"webhook"`
	Providers ProvidersConfig `yaml:"providers"`
	Inbox     InboxConfig     `yaml:"inbox"`
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
}

// WebhookConfig configures the webhook channel.
type WebhookConfig struct {
	Secret  string        `yaml:"secret" flag:"webhook-secret" usage:"Standard Webhooks signing secret (whsec_...); empty generates one kept in the data dir"`
	Timeout time.Duration `yaml:"timeout" flag:"webhook-timeout" usage:"timeout of one webhook request"`
	Rate    float64       `yaml:"rate" flag:"webhook-rate" usage:"requests per second to one receiver host (every node together); 0 does not pace"`
}

// RetryConfig is one category's retry timing: waits are random in
// [0, min(cap, base * 2^n)], at most attempts attempts (0: until the
// notification expires).
type RetryConfig struct {
	Base     time.Duration
	Cap      time.Duration
	Attempts int
}

// RetryRules returns the three categories' timing by category name.
func (n NotifyConfig) RetryRules() map[string]RetryConfig {
	r := n.Retry
	return map[string]RetryConfig{
		"critical":  {r.Critical.Base, r.Critical.Cap, r.Critical.Attempts},
		"orders":    {r.Orders.Base, r.Orders.Cap, r.Orders.Attempts},
		"marketing": {r.Marketing.Base, r.Marketing.Cap, r.Marketing.Attempts},
	}
}

// defaultNotify returns the notification defaults docs/notifications.md
// lists.
func defaultNotify() NotifyConfig {
	n := NotifyConfig{
		Webhook:          WebhookConfig{Timeout: 10 * time.Second},
		Providers:        defaultProviders(),
		Inbox:            defaultInbox(),
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
	}
	n.Retry.Critical.Base, n.Retry.Critical.Cap = 250*time.Millisecond, 5*time.Second
	n.Retry.Orders.Base, n.Retry.Orders.Cap, n.Retry.Orders.Attempts = time.Second, 5*time.Minute, 5
	n.Retry.Marketing.Base, n.Retry.Marketing.Cap, n.Retry.Marketing.Attempts = 5*time.Second, time.Minute, 2
	return n
}

// validate reports the notification settings' problems through bad.
func (n NotifyConfig) validate(bad func(flag, format string, args ...any)) {
	n.Inbox.validate(bad)
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
}
