package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/notify/apns"
	"github.com/sluicehq/sluice/internal/notify/fcm"
	"github.com/sluicehq/sluice/internal/notify/guard"
	"github.com/sluicehq/sluice/internal/notify/push"
	"github.com/sluicehq/sluice/internal/notify/smtp"
	"github.com/sluicehq/sluice/internal/notify/twilio"
	"github.com/sluicehq/sluice/ratelimit"
)

// providerSet is what buildProviders made: each channel's provider and
// backups (absent channels keep the outbox), the callback parsers, every
// guard (for /readyz) and what to close at shutdown.
type providerSet struct {
	primary   map[notify.Channel]notify.Provider
	backups   map[notify.Channel][]notify.Provider
	callbacks map[string]notify.CallbackParser
	guards    []*guard.Provider
	closers   []func() error
	// hooks report provider calls to the provider metrics.
	hooks guard.Metrics
}

// breakerStates is the /readyz detail: each provider's breaker state.
func (ps *providerSet) breakerStates() any {
	if len(ps.guards) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, g := range ps.guards {
		out[g.Name()] = g.BreakerState().String()
	}
	return map[string]any{"breakers": out}
}

func (ps *providerSet) close() {
	for _, c := range ps.closers {
		_ = c()
	}
}

// buildProviders builds the providers the configuration turns on, each
// behind a guard pacing it on pace (the node's shared rate limit store)
// with its own breaker, reporting to reg. A backup is built only beside
// its primary, taking from it the settings it inherits (config.Inherit).
func buildProviders(pc config.Providers, pace ratelimit.Store, reg prometheus.Registerer, log *slog.Logger) (*providerSet, error) {
	b := &providerBuilder{pc: pc, pace: pace, log: log, m: metrics.NewProviders(reg), client: &http.Client{Timeout: pc.Timeout},
		ps: &providerSet{primary: map[notify.Channel]notify.Provider{}, backups: map[notify.Channel][]notify.Provider{},
			callbacks: map[string]notify.CallbackParser{}}}
	b.ps.hooks = b.m.Hooks()
	for _, build := range []func() error{b.email, b.sms, b.push} {
		if err := build(); err != nil {
			return nil, err
		}
	}
	return b.ps, nil
}

// providerBuilder builds the guarded providers of one providerSet.
type providerBuilder struct {
	pc     config.Providers
	pace   ratelimit.Store
	log    *slog.Logger
	m      *metrics.Providers
	client *http.Client
	ps     *providerSet
}

// guard wraps p in a guard with its own breaker and, when rate is
// positive, a pacer.
func (b *providerBuilder) guard(p notify.Provider, rate float64) (*guard.Provider, error) {
	pc := b.pc
	g := &guard.Provider{Provider: p, Metrics: b.m.Hooks()}
	name := p.Name()
	g.Breaker = guard.NewBreaker(guard.BreakerOptions{Failures: pc.BreakerFailures, OpenFor: pc.BreakerOpenFor,
		Probes: pc.BreakerProbes, OnChange: func(s guard.BreakerState) {
			b.m.SetBreaker(name, s)
			b.log.Warn("provider circuit breaker", "provider", name, "state", s.String())
		}})
	b.m.SetBreaker(name, guard.BreakerClosed)
	if rate > 0 {
		share := pc.CriticalShare
		if share == 0 {
			share = -1 // none
		}
		var err error
		if g.Pacer, err = guard.NewPacer(guard.PacingOptions{Store: b.pace, Provider: name, Rate: rate,
			CriticalShare: share, MaxWait: pc.MaxPacingWait}); err != nil {
			return nil, err
		}
	}
	b.ps.guards = append(b.ps.guards, g)
	return g, nil
}

// callbackURL is where provider name posts delivery receipts, or "".
func (b *providerBuilder) callbackURL(name string) string {
	if b.pc.CallbackBaseURL == "" {
		return ""
	}
	return strings.TrimRight(b.pc.CallbackBaseURL, "/") + "/v1/providers/" + name + "/callbacks"
}

// add guards p and makes it ch's provider, or one of its backups.
func (b *providerBuilder) add(ch notify.Channel, backup bool, p notify.Provider, rate float64) error {
	// SMTP clients hold connections; Twilio clients take receipts.
	if c, ok := p.(io.Closer); ok {
		b.ps.closers = append(b.ps.closers, c.Close)
	}
	if cp, ok := p.(notify.CallbackParser); ok {
		b.ps.callbacks[p.Name()] = cp
	}
	g, err := b.guard(p, rate)
	if err != nil {
		return err
	}
	if backup {
		b.ps.backups[ch] = append(b.ps.backups[ch], g)
	} else {
		b.ps.primary[ch] = g
	}
	return nil
}

// email builds the SMTP relay and its backup.
func (b *providerBuilder) email() error {
	s := b.pc.SMTP
	if s.Addr == "" {
		return nil
	}
	relay := func(name string, s config.SMTP, backup bool) error {
		p, err := smtp.New(smtp.Options{Name: name, Addr: s.Addr, TLS: s.TLS, Username: s.Username, Password: s.Password, Auth: s.Auth,
			From: s.From, FromName: s.FromName, LocalName: s.LocalName, UnsubscribeURL: s.UnsubscribeURL})
		if err != nil {
			return err
		}
		return b.add(notify.Email, backup, p, s.Rate)
	}
	if err := relay("", s, false); err != nil {
		return err
	}
	if sb := b.pc.SMTPBackup; sb.Addr != "" {
		return relay("smtp-backup", config.Inherit(sb, s), true)
	}
	return nil
}

// sms builds the Twilio account and its backup.
func (b *providerBuilder) sms() error {
	t := b.pc.Twilio
	if t.AccountSID == "" {
		return nil
	}
	account := func(name string, t config.Twilio, backup bool) error {
		p, err := twilio.New(twilio.Options{Name: name, BaseURL: t.BaseURL, AccountSID: t.AccountSID, AuthToken: t.AuthToken, From: t.From,
			MessagingServiceSID: t.MessagingServiceSID, CallbackURL: b.callbackURL(cmp.Or(name, "twilio")), Client: b.client})
		if err != nil {
			return err
		}
		return b.add(notify.SMS, backup, p, t.Rate)
	}
	if err := account("", t, false); err != nil {
		return err
	}
	if tb := b.pc.TwilioBackup; tb.AccountSID != "" {
		return account("twilio-backup", config.Inherit(tb, t), true)
	}
	return nil
}

// push builds FCM and APNs behind one router, and a backup router of the
// backup services, a missing backup standing in for by the primary.
func (b *providerBuilder) push() error {
	pc := b.pc
	router, backup := &push.Router{}, &push.Router{Alias: "push-backup"}
	if f := pc.FCM; f.CredentialsFile != "" {
		p, err := b.fcm("fcm", f)
		if err != nil {
			return err
		}
		router.FCM, backup.FCM = p, p
		if fb := pc.FCMBackup; fb.CredentialsFile != "" {
			if backup.FCM, err = b.fcm("fcm-backup", config.Inherit(fb, f)); err != nil {
				return err
			}
		}
	}
	if a := pc.APNs; a.KeyFile != "" {
		p, err := b.apns("apns", a)
		if err != nil {
			return err
		}
		router.APNs, backup.APNs = p, p
		if ab := pc.APNsBackup; ab.KeyFile != "" {
			if backup.APNs, err = b.apns("apns-backup", config.Inherit(ab, a)); err != nil {
				return err
			}
		}
	}
	if router.FCM != nil || router.APNs != nil {
		b.ps.primary[notify.Push] = router
	}
	if backup.FCM != router.FCM || backup.APNs != router.APNs {
		b.ps.backups[notify.Push] = []notify.Provider{backup}
	}
	return nil
}

// fcm builds the guarded FCM client named name.
func (b *providerBuilder) fcm(name string, f config.FCM) (notify.Provider, error) {
	data, err := os.ReadFile(f.CredentialsFile)
	if err != nil {
		return nil, fmt.Errorf("%s credentials: %w", name, err)
	}
	var sa fcm.ServiceAccount
	if err := json.Unmarshal(data, &sa); err != nil {
		return nil, fmt.Errorf("%s credentials %s: %w", name, f.CredentialsFile, err)
	}
	c, err := fcm.New(fcm.Options{Name: name, Account: sa, ProjectID: f.ProjectID, BaseURL: f.BaseURL, TokenURL: f.TokenURL, Client: b.client})
	if err != nil {
		return nil, err
	}
	return b.guard(c, f.Rate)
}

// apns builds the guarded APNs client named name.
func (b *providerBuilder) apns(name string, a config.APNs) (notify.Provider, error) {
	key, err := os.ReadFile(a.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("%s key: %w", name, err)
	}
	// APNs needs HTTP/2, which net/http negotiates over TLS.
	c, err := apns.New(apns.Options{Name: name, BaseURL: a.BaseURL, KeyID: a.KeyID, TeamID: a.TeamID, PrivateKey: string(key),
		Topic: a.Topic, Client: &http.Client{Timeout: b.pc.Timeout}})
	if err != nil {
		return nil, err
	}
	return b.guard(c, a.Rate)
}
