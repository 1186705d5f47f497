package main

import (
	"context"
	"encoding/json"
	"fmt"
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
	add := func(ch notify.Channel, backup bool, p notify.Provider, rate float64) error {
		g, err := guard(p, rate)
		if err != nil {
			return err
		}
		if backup {
			ps.backups[ch] = append(ps.backups[ch], g)
		} else {
			ps.primary[ch] = g
		}
		return nil
	}
	callbackURL := func(name string) string {
		if pc.CallbackBaseURL == "" {
			return ""
		}
		return strings.TrimRight(pc.CallbackBaseURL, "/") + "/v1/providers/" + name + "/callbacks"
	}

	if s := pc.SMTP; s.Addr != "" {
		c, err := smtp.New(smtp.Options{Addr: s.Addr, TLS: s.TLS, Username: s.Username, Password: s.Password, Auth: s.Auth,
			From: s.From, FromName: s.FromName, LocalName: s.LocalName, UnsubscribeURL: s.UnsubscribeURL})
		if err != nil {
			return nil, err
		}
		ps.closers = append(ps.closers, c.Close)
		if err := add(notify.Email, false, c, s.Rate); err != nil {
			return nil, err
		}
		if b := pc.SMTPBackup; b.Addr != "" {
			bc, err := smtp.New(smtp.Options{Name: "smtp-backup", Addr: b.Addr, TLS: s.TLS, Username: b.Username, Password: b.Password,
				Auth: s.Auth, From: cmpOr(b.From, s.From), FromName: s.FromName, LocalName: s.LocalName, UnsubscribeURL: s.UnsubscribeURL})
			if err != nil {
				return nil, err
			}
			ps.closers = append(ps.closers, bc.Close)
			if err := add(notify.Email, true, bc, b.Rate); err != nil {
				return nil, err
			}
		}
	}
	if t := pc.Twilio; t.AccountSID != "" {
		c, err := twilio.New(twilio.Options{BaseURL: t.BaseURL, AccountSID: t.AccountSID, AuthToken: t.AuthToken, From: t.From,
			MessagingServiceSID: t.MessagingServiceSID, CallbackURL: callbackURL("twilio"), Client: client})
		if err != nil {
			return nil, err
		}
		ps.callbacks[c.Name()] = c
		if err := add(notify.SMS, false, c, t.Rate); err != nil {
			return nil, err
		}
		if b := pc.TwilioBackup; b.AccountSID != "" {
			bc, err := twilio.New(twilio.Options{Name: "twilio-backup", BaseURL: b.BaseURL, AccountSID: b.AccountSID,
				AuthToken: b.AuthToken, From: b.From, CallbackURL: callbackURL("twilio-backup"), Client: client})
			if err != nil {
				return nil, err
			}
			ps.callbacks[bc.Name()] = bc
			if err := add(notify.SMS, true, bc, b.Rate); err != nil {
				return nil, err
			}
		}
	}
	push := &pushRouter{}
	if f := pc.FCM; f.CredentialsFile != "" {
		b, err := os.ReadFile(f.CredentialsFile)
		if err != nil {
			return nil, fmt.Errorf("fcm credentials: %w", err)
		}
		var sa fcm.ServiceAccount
		if err := json.Unmarshal(b, &sa); err != nil {
			return nil, fmt.Errorf("fcm credentials %s: %w", f.CredentialsFile, err)
		}
		c, err := fcm.New(fcm.Options{Account: sa, ProjectID: f.ProjectID, BaseURL: f.BaseURL, TokenURL: f.TokenURL, Client: client})
		if err != nil {
			return nil, err
		}
		if push.fcm, err = guard(c, f.Rate); err != nil {
			return nil, err
		}
	}
	if a := pc.APNs; a.KeyFile != "" {
		key, err := os.ReadFile(a.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("apns key: %w", err)
		}
		// APNs needs HTTP/2, which net/http negotiates over TLS.
		c, err := apns.New(apns.Options{BaseURL: a.BaseURL, KeyID: a.KeyID, TeamID: a.TeamID, PrivateKey: string(key), Topic: a.Topic,
			Client: &http.Client{Timeout: pc.Timeout}})
		if err != nil {
			return nil, err
		}
		if push.apns, err = guard(c, a.Rate); err != nil {
			return nil, err
		}
	}
	if push.fcm != nil || push.apns != nil {
		ps.primary[notify.Push] = push
	}
	return ps, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// pushRouter sends each push token to the service it belongs to: a token
// written "apns:..." or "fcm:..." says so; otherwise 64 hex digits is an
// APNs device token and anything else an FCM registration token. With one
// service configured, every token goes to it.
type pushRouter struct {
	fcm, apns *notify.Guard
}

var _ notify.Provider = (*pushRouter)(nil)

func (r *pushRouter) Name() string {
	switch {
	case r.fcm == nil:
		return r.apns.Name()
	case r.apns == nil:
		return r.fcm.Name()
	}
	return "push"
}

func (r *pushRouter) NeedsContact() bool { return true }

func (r *pushRouter) Send(ctx context.Context, m notify.Message) (notify.Receipt, error) {
	g, token := r.route(m.To)
	if g == nil {
		return notify.Receipt{}, notify.Permanentf("no push service takes token %.12q", m.To)
	}
	m.To = token
	rc, err := g.Send(ctx, m)
	if err == nil {
		rc.Provider = g.Name()
	}
	return rc, err
}

func (r *pushRouter) route(to string) (*notify.Guard, string) {
	if t, ok := strings.CutPrefix(to, "apns:"); ok {
		return r.apns, t
	}
	if t, ok := strings.CutPrefix(to, "fcm:"); ok {
		return r.fcm, t
	}
	switch {
	case r.apns == nil:
		return r.fcm, to
	case r.fcm == nil:
		return r.apns, to
	case len(to) == 64 && strings.Trim(strings.ToLower(to), "0123456789abcdef") == "":
		return r.apns, to
	}
	return r.fcm, to
}
