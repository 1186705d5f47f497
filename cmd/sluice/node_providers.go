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
	guards    []*notify.Guard
	closers   []func() error
	// hooks report provider calls to the provider metrics.
	hooks notify.ProviderMetrics
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
// with its own breaker, reporting to reg.
func buildProviders(pc config.ProvidersConfig, pace ratelimit.Store, reg prometheus.Registerer, log *slog.Logger) (*providerSet, error) {
	ps := &providerSet{primary: map[notify.Channel]notify.Provider{}, backups: map[notify.Channel][]notify.Provider{},
		callbacks: map[string]notify.CallbackParser{}}
	m := metrics.NewProviders(reg)
	ps.hooks = m.Hooks()
	client := &http.Client{Timeout: pc.Timeout}
	guard := func(p notify.Provider, rate float64) (*notify.Guard, error) {
		g := &notify.Guard{Provider: p, Metrics: m.Hooks()}
		name := p.Name()
		g.Breaker = notify.NewBreaker(notify.BreakerOptions{Failures: pc.BreakerFailures, OpenFor: pc.BreakerOpenFor,
			Probes: pc.BreakerProbes, OnChange: func(s notify.BreakerState) {
				m.SetBreaker(name, s)
				log.Warn("provider circuit breaker", "provider", name, "state", s.String())
			}})
		m.SetBreaker(name, notify.BreakerClosed)
		if rate > 0 {
			share := pc.CriticalShare
			if share == 0 {
				share = -1 // none
			}
			var err error
			if g.Pacer, err = notify.NewPacer(notify.PacingOptions{Store: pace, Provider: name, Rate: rate,
				CriticalShare: share, MaxWait: pc.MaxPacingWait}); err != nil {
				return nil, err
			}
		}
		ps.guards = append(ps.guards, g)
		return g, nil
	}
	callbackURL := func(name string) string {
		if pc.CallbackBaseURL == "" {
			return ""
		}
		return strings.TrimRight(pc.CallbackBaseURL, "/") + "/v1/providers/" + name + "/callbacks"
	}

	// The email and SMS providers, one row each, every primary before its
	// backup; a backup is built only beside its primary. A backup relay
	// shares the primary's TLS, auth mechanism and names.
	s, sb, t, tb := pc.SMTP, pc.SMTPBackup, pc.Twilio, pc.TwilioBackup
	messaging := []struct {
		ch     notify.Channel
		backup bool
		on     bool // configured
		rate   float64
		build  func() (notify.Provider, error)
	}{
		{notify.Email, false, s.Addr != "", s.Rate, func() (notify.Provider, error) {
			return smtp.New(smtp.Options{Addr: s.Addr, TLS: s.TLS, Username: s.Username, Password: s.Password, Auth: s.Auth,
				From: s.From, FromName: s.FromName, LocalName: s.LocalName, UnsubscribeURL: s.UnsubscribeURL})
		}},
		{notify.Email, true, s.Addr != "" && sb.Addr != "", sb.Rate, func() (notify.Provider, error) {
			return smtp.New(smtp.Options{Name: "smtp-backup", Addr: sb.Addr, TLS: s.TLS, Username: sb.Username, Password: sb.Password,
				Auth: s.Auth, From: cmp.Or(sb.From, s.From), FromName: s.FromName, LocalName: s.LocalName, UnsubscribeURL: s.UnsubscribeURL})
		}},
		{notify.SMS, false, t.AccountSID != "", t.Rate, func() (notify.Provider, error) {
			return twilio.New(twilio.Options{BaseURL: t.BaseURL, AccountSID: t.AccountSID, AuthToken: t.AuthToken, From: t.From,
				MessagingServiceSID: t.MessagingServiceSID, CallbackURL: callbackURL("twilio"), Client: client})
		}},
		{notify.SMS, true, t.AccountSID != "" && tb.AccountSID != "", tb.Rate, func() (notify.Provider, error) {
			return twilio.New(twilio.Options{Name: "twilio-backup", BaseURL: tb.BaseURL, AccountSID: tb.AccountSID,
				AuthToken: tb.AuthToken, From: tb.From, CallbackURL: callbackURL("twilio-backup"), Client: client})
		}},
	}
	for _, e := range messaging {
		if !e.on {
			continue
		}
		p, err := e.build()
		if err != nil {
			return nil, err
		}
		// SMTP clients hold connections; Twilio clients take receipts.
		if c, ok := p.(io.Closer); ok {
			ps.closers = append(ps.closers, c.Close)
		}
		if cp, ok := p.(notify.CallbackParser); ok {
			ps.callbacks[p.Name()] = cp
		}
		g, err := guard(p, e.rate)
		if err != nil {
			return nil, err
		}
		if e.backup {
			ps.backups[e.ch] = append(ps.backups[e.ch], g)
		} else {
			ps.primary[e.ch] = g
		}
	}
	// Push: FCM and APNs behind one router, and a backup router of the
	// backup services, a missing backup standing in for by the primary.
	fcmClient := func(name string, f config.FCMConfig) (notify.Provider, error) {
		b, err := os.ReadFile(f.CredentialsFile)
		if err != nil {
			return nil, fmt.Errorf("%s credentials: %w", name, err)
		}
		var sa fcm.ServiceAccount
		if err := json.Unmarshal(b, &sa); err != nil {
			return nil, fmt.Errorf("%s credentials %s: %w", name, f.CredentialsFile, err)
		}
		c, err := fcm.New(fcm.Options{Name: name, Account: sa, ProjectID: f.ProjectID, BaseURL: f.BaseURL, TokenURL: f.TokenURL, Client: client})
		if err != nil {
			return nil, err
		}
		return guard(c, f.Rate)
	}
	apnsClient := func(name string, a config.APNsConfig) (notify.Provider, error) {
		key, err := os.ReadFile(a.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s key: %w", name, err)
		}
		// APNs needs HTTP/2, which net/http negotiates over TLS.
		c, err := apns.New(apns.Options{Name: name, BaseURL: a.BaseURL, KeyID: a.KeyID, TeamID: a.TeamID, PrivateKey: string(key),
			Topic: a.Topic, Client: &http.Client{Timeout: pc.Timeout}})
		if err != nil {
			return nil, err
		}
		return guard(c, a.Rate)
	}
	router, backup := &push.Router{}, &push.Router{Alias: "push-backup"}
	if f := pc.FCM; f.CredentialsFile != "" {
		p, err := fcmClient("fcm", f)
		if err != nil {
			return nil, err
		}
		router.FCM, backup.FCM = p, p
		if fb := pc.FCMBackup; fb.CredentialsFile != "" {
			if backup.FCM, err = fcmClient("fcm-backup", config.FCMConfig{CredentialsFile: fb.CredentialsFile, ProjectID: fb.ProjectID,
				BaseURL: cmp.Or(fb.BaseURL, f.BaseURL), TokenURL: fb.TokenURL, Rate: fb.Rate}); err != nil {
				return nil, err
			}
		}
	}
	if a := pc.APNs; a.KeyFile != "" {
		p, err := apnsClient("apns", a)
		if err != nil {
			return nil, err
		}
		router.APNs, backup.APNs = p, p
		if ab := pc.APNsBackup; ab.KeyFile != "" {
			if backup.APNs, err = apnsClient("apns-backup", config.APNsConfig{KeyFile: ab.KeyFile, KeyID: ab.KeyID, TeamID: ab.TeamID,
				Topic: cmp.Or(ab.Topic, a.Topic), BaseURL: cmp.Or(ab.BaseURL, a.BaseURL), Rate: ab.Rate}); err != nil {
				return nil, err
			}
		}
	}
	if router.FCM != nil || router.APNs != nil {
		ps.primary[notify.Push] = router
	}
	if backup.FCM != router.FCM || backup.APNs != router.APNs {
		ps.backups[notify.Push] = []notify.Provider{backup}
	}
	return ps, nil
}
