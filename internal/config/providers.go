package config

import (
	"net/url"
	"reflect"
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
	// Each XBackup is a second provider of the same kind for failover, used
	// only beside its primary: its settings are the primary's, renamed by
	// the backup tag, and those the primary's type tags inherit take the
	// primary's value when the backup leaves them empty (see Inherit).
	SMTP         SMTP   `yaml:"smtp"`
	SMTPBackup   SMTP   `yaml:"smtp_backup" backup:"smtp-backup"`
	Twilio       Twilio `yaml:"twilio"`
	TwilioBackup Twilio `yaml:"twilio_backup" backup:"twilio-backup"`
	FCM          FCM    `yaml:"fcm"`
	FCMBackup    FCM    `yaml:"fcm_backup" backup:"fcm-backup"`
	APNs         APNs   `yaml:"apns"`
	APNsBackup   APNs   `yaml:"apns_backup" backup:"apns-backup"`
	// ShortenSMSLinks replaces links in SMS bodies by tracked short links.
	ShortenSMSLinks bool `yaml:"sms_shorten_links" flag:"notify-sms-shorten-links" usage:"replace links in SMS bodies by tracked short links (clicks show on the notification)"`
}

// SMTP is the email channel's relay; Addr set turns it on. Its backup
// takes the primary's TLS, auth mechanism, sender and names when it names
// none; its address, credentials and rate are its own.
type SMTP struct {
	Addr           string  `yaml:"addr" flag:"smtp-addr" usage:"SMTP relay host:port; empty keeps email in the outbox" backupusage:"backup SMTP relay host:port for failover"`
	TLS            string  `yaml:"tls" flag:"smtp-tls" inherit:"true" usage:"starttls (required), tls (implicit, port 465) or none (a relay on this host only)"`
	Username       string  `yaml:"username" flag:"smtp-username" usage:"SMTP AUTH user name; empty sends without AUTH"`
	Password       string  `yaml:"password" flag:"smtp-password" usage:"SMTP AUTH password"`
	Auth           string  `yaml:"auth" flag:"smtp-auth" inherit:"true" usage:"plain or login; empty picks PLAIN when offered"`
	From           string  `yaml:"from" flag:"smtp-from" inherit:"true" usage:"sender address (envelope and From header)"`
	FromName       string  `yaml:"from_name" flag:"smtp-from-name" inherit:"true" usage:"sender display name"`
	LocalName      string  `yaml:"local_name" flag:"smtp-local-name" inherit:"true" usage:"host name sent in EHLO"`
	UnsubscribeURL string  `yaml:"unsubscribe_url" flag:"smtp-unsubscribe-url" inherit:"true" usage:"marketing List-Unsubscribe URL; {user_id}, {notification_id}, {type} are filled in; https enables one-click"`
	Rate           float64 `yaml:"rate" flag:"smtp-rate" usage:"messages per second the relay allows; 0 does not pace"`
}

// Twilio is the SMS channel's Twilio-compatible Messages API;
// AccountSID set turns it on. Its backup is another account and takes
// nothing from the primary.
type Twilio struct {
	BaseURL             string  `yaml:"base_url" flag:"twilio-base-url" usage:"Messages API root (https://api.twilio.com)"`
	AccountSID          string  `yaml:"account_sid" flag:"twilio-account-sid" usage:"Twilio account SID; empty keeps SMS in the outbox" backupusage:"backup account SID for SMS failover"`
	AuthToken           string  `yaml:"auth_token" flag:"twilio-auth-token" usage:"Twilio auth token (also verifies status callbacks)"`
	From                string  `yaml:"from" flag:"twilio-from" usage:"sender number (E.164)"`
	MessagingServiceSID string  `yaml:"messaging_service_sid" flag:"twilio-messaging-service-sid" usage:"messaging service SID, used instead of the from number"`
	Rate                float64 `yaml:"rate" flag:"twilio-rate" usage:"messages per second the account allows; 0 does not pace"`
}

// FCM is Firebase Cloud Messaging; CredentialsFile set turns it on. Its
// backup (a second project or service account) takes the primary's API
// root when it names none.
type FCM struct {
	CredentialsFile string  `yaml:"credentials_file" flag:"fcm-credentials-file" usage:"Google service account key file (JSON) for FCM"`
	ProjectID       string  `yaml:"project_id" flag:"fcm-project-id" usage:"Firebase project id; empty uses the key file's"`
	BaseURL         string  `yaml:"base_url" flag:"fcm-base-url" inherit:"true" usage:"FCM API root (https://fcm.googleapis.com)"`
	TokenURL        string  `yaml:"token_url" flag:"fcm-token-url" usage:"OAuth token endpoint; empty uses the key file's token_uri"`
	Rate            float64 `yaml:"rate" flag:"fcm-rate" usage:"messages per second; 0 does not pace"`
}

// APNs is Apple Push Notification service; KeyFile set turns it on. Its
// backup (a second key or team) takes the primary's topic and API root
// when it names none.
type APNs struct {
	KeyFile string  `yaml:"key_file" flag:"apns-key-file" usage:"APNs auth key file (.p8)"`
	KeyID   string  `yaml:"key_id" flag:"apns-key-id" usage:"APNs key id"`
	TeamID  string  `yaml:"team_id" flag:"apns-team-id" usage:"Apple developer team id"`
	Topic   string  `yaml:"topic" flag:"apns-topic" inherit:"true" usage:"the app's bundle id"`
	BaseURL string  `yaml:"base_url" flag:"apns-base-url" inherit:"true" usage:"APNs root (https://api.push.apple.com; https://api.sandbox.push.apple.com for development builds)"`
	Rate    float64 `yaml:"rate" flag:"apns-rate" usage:"messages per second; 0 does not pace"`
}

// provider is the settings of one provider, the types a backup can be of.
type provider interface{ SMTP | Twilio | FCM | APNs }

// Inherit is the provider backup stands for beside primary: backup's
// settings, each field its type tags inherit that backup leaves empty
// taken from primary.
func Inherit[T provider](backup, primary T) T {
	b, p := reflect.ValueOf(&backup).Elem(), reflect.ValueOf(primary)
	for i := range b.NumField() {
		if inherits(b.Type().Field(i)) && b.Field(i).IsZero() {
			b.Field(i).Set(p.Field(i))
		}
	}
	return backup
}

// inherits tells whether a backup takes sf from its primary when empty.
func inherits(sf reflect.StructField) bool { return sf.Tag.Get("inherit") == "true" }

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
	if p.TwilioBackup.AccountSID != "" && (p.TwilioBackup.AuthToken == "" || (p.TwilioBackup.From == "" && p.TwilioBackup.MessagingServiceSID == "")) {
		bad("twilio-backup-auth-token", "the backup Twilio account needs an auth token and a from number or messaging service SID")
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
