package config

import (
	"cmp"
	"net/url"
	"strings"
	"time"
)

// Providers configures the real notification providers and
// what guards them. A channel without a configured provider delivers to
// the built-in outbox.
type Providers struct {
	// CallbackBaseURL is this service's public URL, which providers post
	// delivery receipts to (POST {base}/v1/providers/{name}/callbacks).
	CallbackBaseURL string        `yaml:"callback_base_url" flag:"notify-callback-base-url" usage:"public base URL of this service for provider delivery receipts (https://sluice.example.com); empty asks for none"`
	Timeout         time.Duration `yaml:"timeout" flag:"notify-provider-timeout" usage:"timeout of one provider call (SMTP, Twilio, FCM, APNs)"`
	CriticalShare   float64       `yaml:"critical_share" flag:"notify-pacing-critical-share" usage:"part of each provider's rate kept for critical messages (0 to 0.9)"`
	MaxPacingWait   time.Duration `yaml:"max_pacing_wait" flag:"notify-pacing-max-wait" usage:"longest a worker waits for a provider's rate; longer waits go back to the queue"`
	BreakerFailures int           `yaml:"breaker_failures" flag:"notify-breaker-failures" usage:"failed provider calls in a row that open its circuit breaker"`
	BreakerOpenFor  time.Duration `yaml:"breaker_open_for" flag:"notify-breaker-open-for" usage:"how long an open breaker refuses calls before it probes the provider"`
	BreakerProbes   int           `yaml:"breaker_probes" flag:"notify-breaker-probes" usage:"successful probes in a row that close a breaker"`
	Failover        []string      `yaml:"failover_categories" flag:"notify-failover-categories" usage:"categories that go to a channel's backup provider, then another enabled channel, when a provider is down"`
	SMTP            SMTP          `yaml:"smtp"`
	SMTPBackup      SMTPBackup    `yaml:"smtp_backup"`
	Twilio          Twilio        `yaml:"twilio"`
	TwilioBackup    TwilioBackup  `yaml:"twilio_backup"`
	FCM             FCM           `yaml:"fcm"`
	FCMBackup       FCMBackup     `yaml:"fcm_backup"`
	APNs            APNs          `yaml:"apns"`
	APNsBackup      APNsBackup    `yaml:"apns_backup"`
	// ShortenSMSLinks replaces links in SMS bodies by tracked short links.
	ShortenSMSLinks bool `yaml:"sms_shorten_links" flag:"notify-sms-shorten-links" usage:"replace links in SMS bodies by tracked short links (clicks show on the notification)"`
}

// SMTP is the email channel's relay; Addr set turns it on.
type SMTP struct {
	Addr           string  `yaml:"addr" flag:"smtp-addr" usage:"SMTP relay host:port; empty keeps email in the outbox"`
	TLS            string  `yaml:"tls" flag:"smtp-tls" usage:"starttls (required), tls (implicit, port 465) or none (a relay on this host only)"`
	Username       string  `yaml:"username" flag:"smtp-username" usage:"SMTP AUTH user name; empty sends without AUTH"`
	Password       string  `yaml:"password" flag:"smtp-password" usage:"SMTP AUTH password"`
	Auth           string  `yaml:"auth" flag:"smtp-auth" usage:"plain or login; empty picks PLAIN when offered"`
	From           string  `yaml:"from" flag:"smtp-from" usage:"sender address (envelope and From header)"`
	FromName       string  `yaml:"from_name" flag:"smtp-from-name" usage:"sender display name"`
	LocalName      string  `yaml:"local_name" flag:"smtp-local-name" usage:"host name sent in EHLO"`
	UnsubscribeURL string  `yaml:"unsubscribe_url" flag:"smtp-unsubscribe-url" usage:"marketing List-Unsubscribe URL; {user_id}, {notification_id}, {type} are filled in; https enables one-click"`
	Rate           float64 `yaml:"rate" flag:"smtp-rate" usage:"messages per second the relay allows; 0 does not pace"`
}

// SMTPBackup is a second relay for failover; it shares the primary's TLS,
// auth mechanism and names.
type SMTPBackup struct {
	Addr     string  `yaml:"addr" flag:"smtp-backup-addr" usage:"backup SMTP relay host:port for failover"`
	Username string  `yaml:"username" flag:"smtp-backup-username" usage:"backup relay AUTH user name"`
	Password string  `yaml:"password" flag:"smtp-backup-password" usage:"backup relay AUTH password"`
	From     string  `yaml:"from" flag:"smtp-backup-from" usage:"backup relay sender address; empty uses --smtp-from"`
	Rate     float64 `yaml:"rate" flag:"smtp-backup-rate" usage:"messages per second the backup relay allows; 0 does not pace"`
}

// Twilio is the SMS channel's Twilio-compatible Messages API;
// AccountSID set turns it on.
type Twilio struct {
	BaseURL             string  `yaml:"base_url" flag:"twilio-base-url" usage:"Messages API root (https://api.twilio.com)"`
	AccountSID          string  `yaml:"account_sid" flag:"twilio-account-sid" usage:"Twilio account SID; empty keeps SMS in the outbox"`
	AuthToken           string  `yaml:"auth_token" flag:"twilio-auth-token" usage:"Twilio auth token (also verifies status callbacks)"`
	From                string  `yaml:"from" flag:"twilio-from" usage:"sender number (E.164)"`
	MessagingServiceSID string  `yaml:"messaging_service_sid" flag:"twilio-messaging-service-sid" usage:"messaging service SID, used instead of the from number"`
	Rate                float64 `yaml:"rate" flag:"twilio-rate" usage:"messages per second the account allows; 0 does not pace"`
}

// TwilioBackup is a second Twilio-compatible account for failover.
type TwilioBackup struct {
	BaseURL    string  `yaml:"base_url" flag:"twilio-backup-base-url" usage:"backup Messages API root"`
	AccountSID string  `yaml:"account_sid" flag:"twilio-backup-account-sid" usage:"backup account SID for SMS failover"`
	AuthToken  string  `yaml:"auth_token" flag:"twilio-backup-auth-token" usage:"backup account auth token"`
	From       string  `yaml:"from" flag:"twilio-backup-from" usage:"backup sender number (E.164)"`
	Rate       float64 `yaml:"rate" flag:"twilio-backup-rate" usage:"messages per second the backup account allows; 0 does not pace"`
}

// FCM is Firebase Cloud Messaging; CredentialsFile set turns it on.
type FCM struct {
	CredentialsFile string  `yaml:"credentials_file" flag:"fcm-credentials-file" usage:"Google service account key file (JSON) for FCM"`
	ProjectID       string  `yaml:"project_id" flag:"fcm-project-id" usage:"Firebase project id; empty uses the key file's"`
	BaseURL         string  `yaml:"base_url" flag:"fcm-base-url" usage:"FCM API root (https://fcm.googleapis.com)"`
	TokenURL        string  `yaml:"token_url" flag:"fcm-token-url" usage:"OAuth token endpoint; empty uses the key file's token_uri"`
	Rate            float64 `yaml:"rate" flag:"fcm-rate" usage:"messages per second; 0 does not pace"`
}

// FCMBackup is a second Firebase project (or service account) for push
// failover; it is used only beside a configured FCM.
type FCMBackup struct {
	CredentialsFile string  `yaml:"credentials_file" flag:"fcm-backup-credentials-file" usage:"backup service account key file (JSON) for FCM failover"`
	ProjectID       string  `yaml:"project_id" flag:"fcm-backup-project-id" usage:"backup Firebase project id; empty uses the key file's"`
	BaseURL         string  `yaml:"base_url" flag:"fcm-backup-base-url" usage:"backup FCM API root; empty uses --fcm-base-url"`
	TokenURL        string  `yaml:"token_url" flag:"fcm-backup-token-url" usage:"backup OAuth token endpoint; empty uses the key file's token_uri"`
	Rate            float64 `yaml:"rate" flag:"fcm-backup-rate" usage:"backup messages per second; 0 does not pace"`
}

// APNsBackup is a second APNs key (or team) for push failover; it is used
// only beside a configured APNs and shares its topic unless given one.
type APNsBackup struct {
	KeyFile string  `yaml:"key_file" flag:"apns-backup-key-file" usage:"backup APNs auth key file (.p8) for failover"`
	KeyID   string  `yaml:"key_id" flag:"apns-backup-key-id" usage:"backup APNs key id"`
	TeamID  string  `yaml:"team_id" flag:"apns-backup-team-id" usage:"backup Apple developer team id"`
	Topic   string  `yaml:"topic" flag:"apns-backup-topic" usage:"backup bundle id; empty uses --apns-topic"`
	BaseURL string  `yaml:"base_url" flag:"apns-backup-base-url" usage:"backup APNs root; empty uses --apns-base-url"`
	Rate    float64 `yaml:"rate" flag:"apns-backup-rate" usage:"backup messages per second; 0 does not pace"`
}

// APNs is Apple Push Notification service; KeyFile set turns it on.
type APNs struct {
	KeyFile string  `yaml:"key_file" flag:"apns-key-file" usage:"APNs auth key file (.p8)"`
	KeyID   string  `yaml:"key_id" flag:"apns-key-id" usage:"APNs key id"`
	TeamID  string  `yaml:"team_id" flag:"apns-team-id" usage:"Apple developer team id"`
	Topic   string  `yaml:"topic" flag:"apns-topic" usage:"the app's bundle id"`
	BaseURL string  `yaml:"base_url" flag:"apns-base-url" usage:"APNs root (https://api.push.apple.com; https://api.sandbox.push.apple.com for development builds)"`
	Rate    float64 `yaml:"rate" flag:"apns-rate" usage:"messages per second; 0 does not pace"`
}

// Inherit is the relay this backup stands for beside primary: its own
// address, credentials and rate, its sender or else the primary's, and the
// primary's TLS, auth mechanism and names.
func (b SMTPBackup) Inherit(primary SMTP) SMTP {
	s := primary
	s.Addr, s.Username, s.Password, s.Rate = b.Addr, b.Username, b.Password, b.Rate
	s.From = cmp.Or(b.From, primary.From)
	return s
}

// Inherit is the account this backup stands for beside primary: only its
// own fields (no messaging service); it inherits nothing.
func (b TwilioBackup) Inherit(primary Twilio) Twilio {
	return Twilio{BaseURL: b.BaseURL, AccountSID: b.AccountSID, AuthToken: b.AuthToken, From: b.From, Rate: b.Rate}
}

// Inherit is the project this backup stands for beside primary: its own
// fields, and the primary's API root when it names none.
func (b FCMBackup) Inherit(primary FCM) FCM {
	return FCM{CredentialsFile: b.CredentialsFile, ProjectID: b.ProjectID, BaseURL: cmp.Or(b.BaseURL, primary.BaseURL),
		TokenURL: b.TokenURL, Rate: b.Rate}
}

// Inherit is the key this backup stands for beside primary: its own
// fields, and the primary's topic and API root when it names none.
func (b APNsBackup) Inherit(primary APNs) APNs {
	return APNs{KeyFile: b.KeyFile, KeyID: b.KeyID, TeamID: b.TeamID, Topic: cmp.Or(b.Topic, primary.Topic),
		BaseURL: cmp.Or(b.BaseURL, primary.BaseURL), Rate: b.Rate}
}

func defaultProviders() Providers {
	return Providers{
		Timeout: 10 * time.Second, CriticalShare: 0.2, MaxPacingWait: 2 * time.Second,
		BreakerFailures: 5, BreakerOpenFor: 30 * time.Second, BreakerProbes: 1,
		Failover: []string{"critical"},
		SMTP:     SMTP{TLS: "starttls"},
	}
}

func (p Providers) validate(bad func(flag, format string, args ...any)) {
	if p.CallbackBaseURL != "" {
		if u, err := url.Parse(p.CallbackBaseURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			bad("notify-callback-base-url", "must be an http(s) URL")
		}
	}
	if p.Timeout <= 0 {
		bad("notify-provider-timeout", "must be positive")
	}
	if p.CriticalShare < 0 || p.CriticalShare > 0.9 {
		bad("notify-pacing-critical-share", "must be from 0 to 0.9")
	}
	if p.MaxPacingWait <= 0 || p.BreakerOpenFor <= 0 {
		bad("notify-breaker-open-for", "pacing wait and breaker open time must be positive")
	}
	if p.BreakerFailures < 1 || p.BreakerProbes < 1 {
		bad("notify-breaker-failures", "breaker failures and probes must be at least 1")
	}
	for _, c := range p.Failover {
		if c != "critical" && c != "orders" && c != "marketing" {
			bad("notify-failover-categories", "unknown category %q", c)
		}
	}
	for flag, r := range map[string]float64{"smtp-rate": p.SMTP.Rate, "smtp-backup-rate": p.SMTPBackup.Rate, "twilio-rate": p.Twilio.Rate,
		"twilio-backup-rate": p.TwilioBackup.Rate, "fcm-rate": p.FCM.Rate, "apns-rate": p.APNs.Rate,
		"fcm-backup-rate": p.FCMBackup.Rate, "apns-backup-rate": p.APNsBackup.Rate} {
		if r < 0 {
			bad(flag, "must be 0 (unpaced) or more")
		}
	}
	if p.SMTP.Addr != "" && !strings.Contains(p.SMTP.From, "@") {
		bad("smtp-from", "an email address is required with --smtp-addr")
	}
	if p.Twilio.AccountSID != "" && (p.Twilio.AuthToken == "" || (p.Twilio.From == "" && p.Twilio.MessagingServiceSID == "")) {
		bad("twilio-auth-token", "Twilio needs an auth token and a from number or messaging service SID")
	}
	if p.TwilioBackup.AccountSID != "" && (p.TwilioBackup.AuthToken == "" || p.TwilioBackup.From == "") {
		bad("twilio-backup-auth-token", "the backup Twilio account needs an auth token and a from number")
	}
	if p.APNs.KeyFile != "" && (p.APNs.KeyID == "" || p.APNs.TeamID == "" || p.APNs.Topic == "") {
		bad("apns-key-id", "APNs needs a key id, a team id and a topic")
	}
	if p.APNsBackup.KeyFile != "" && (p.APNsBackup.KeyID == "" || p.APNsBackup.TeamID == "") {
		bad("apns-backup-key-id", "the backup APNs key needs a key id and a team id")
	}
	if p.FCMBackup.CredentialsFile != "" && p.FCM.CredentialsFile == "" {
		bad("fcm-backup-credentials-file", "a backup FCM needs --fcm-credentials-file")
	}
	if p.APNsBackup.KeyFile != "" && p.APNs.KeyFile == "" {
		bad("apns-backup-key-file", "a backup APNs key needs --apns-key-file")
	}
}
