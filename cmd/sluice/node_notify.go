package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/inbox"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/notify/guard"
	"github.com/sluicehq/sluice/internal/notify/outbox"
	"github.com/sluicehq/sluice/internal/notify/webhook"
	"github.com/sluicehq/sluice/internal/queue"
	"github.com/sluicehq/sluice/internal/shorten"
	"github.com/sluicehq/sluice/ratelimit"
)

// startNotify builds the notification service on the node's engines and
// counter store, and starts its workers and scheduler. The per-user
// marketing cap and the providers' pacing count in n.counters, so with
// Redis every node shares one count per user and one rate per provider.
// links shortens SMS links when that is turned on; nil leaves them. ready
// is the /readyz detail of the providers' breakers, nil without providers.
func (n *node) startNotify(ctx context.Context, links notify.LinkShortener) (svc *notify.Service, ready *httpapi.Check, err error) {
	nc := n.cfg.Notify
	wh, err := n.webhookProvider()
	if err != nil {
		return nil, nil, err
	}
	nq, err := n.notifyQueue(ctx)
	if err != nil {
		return nil, nil, err
	}
	ps, err := buildProviders(nc.Providers, n.counters, n.reg, n.log)
	if err != nil {
		return nil, nil, fmt.Errorf("providers: %w", err)
	}
	n.onStop("notification providers", func(context.Context) error { ps.close(); return nil })
	providers, system, err := n.notifyProviders(wh, ps)
	if err != nil {
		return nil, nil, err
	}
	failover := []notify.Category{}
	for _, c := range nc.Providers.Failover {
		failover = append(failover, notify.Category(c))
	}
	opts := notify.Options{
		Store:         n.db,
		Reads:         n.db, // the escalation condition "read": the in-app inbox
		Queue:         nq,
		Providers:     providers,
		Backups:       ps.backups,
		Failover:      failover,
		Callbacks:     ps.callbacks,
		History:       nc.Retention,
		RecoveryAfter: nc.RecoveryAfter,
		SendTimeout:   max(nc.Webhook.Timeout, nc.Providers.Timeout+nc.Providers.MaxPacingWait) + 5*time.Second,
		Retry:         retryRules(nc),
		Observe:       metrics.NewDeliveries(n.reg),
		Logger:        n.log,
		System:        system,
		OnStatus:      n.events.svc.OnStatus,
	}
	if n.redis != nil {
		opts.Dedupe = n.requestDedupe()
	}
	if opts.Email, err = n.emailTracking(nc); err != nil {
		return nil, nil, err
	}
	if nc.Providers.ShortenSMSLinks && links != nil {
		opts.Links = links
		opts.Rewriters = append(opts.Rewriters, notify.ShortenSMSLinks(links, 2*time.Second))
	}
	for ch, p := range ps.primary {
		n.log.Info("notification provider", "channel", ch, "provider", p.Name(), "backups", len(ps.backups[ch]))
	}
	if opts.MarketingCap, err = n.marketingCap(); err != nil {
		return nil, nil, err
	}
	if opts.SMSGuard, err = n.smsGuard(nc.SMSGuard); err != nil {
		return nil, nil, err
	}
	svc = notify.NewService(opts)
	n.runNotify(ctx, svc, nq)
	if len(ps.guards) > 0 {
		// Breaker states inform /readyz without failing it: a provider
		// that is down is failed over or waited out, the node still works.
		ready = &httpapi.Check{Name: "providers", Ping: func(context.Context) error { return nil }, Detail: ps.breakerStates}
	}
	return svc, ready, nil
}

// notifyQueue opens the notification queue, stopped after the workers so
// that what they published is acknowledged first, and exports its lag.
func (n *node) notifyQueue(ctx context.Context) (*queue.NotifyQueue, error) {
	nc := n.cfg.Notify
	nq, err := n.queue.NotifyQueue(ctx, queue.NotifyOptions{
		Partitions:  nc.Partitions,
		AckWait:     nc.AckWait,
		Unconfirmed: !nc.ConfirmPublish,
		Workers: map[notify.Category]int{notify.Critical: nc.WorkersCritical, notify.Orders: nc.WorkersOrders,
			notify.Marketing: nc.WorkersMarketing},
		Logger: n.log,
	})
	if err != nil {
		return nil, err
	}
	n.onStop("notification queue", func(ctx context.Context) error {
		_ = nq.Flush(ctx)
		return nq.Close()
	})
	n.reg.MustRegister(metrics.NewQueueLag(nq))
	return nq, nil
}

// notifyProviders is the provider of each channel: the configured
// providers, else the outbox; webhooks signed and paced; the in-app
// inbox. system delivers the status events' webhooks.
func (n *node) notifyProviders(wh *webhook.Provider, ps *providerSet) (_ map[notify.Channel]notify.Provider, system notify.Provider, err error) {
	whGuard, err := webhookGuards(wh, n.cfg.Notify, n.counters, ps.hooks, n.log)
	if err != nil {
		return nil, nil, fmt.Errorf("webhook pacing: %w", err)
	}
	if system, err = n.systemProvider(n.events, wh, n.counters); err != nil {
		return nil, nil, fmt.Errorf("events pacing: %w", err)
	}
	ob := &outbox.Provider{}
	providers := map[notify.Channel]notify.Provider{notify.Email: ob, notify.SMS: ob, notify.Push: ob, notify.Webhook: whGuard}
	providers[notify.InApp] = &inbox.Provider{Inbox: n.inbox}
	maps.Copy(providers, ps.primary)
	return providers, system, nil
}

// webhookProvider posts webhooks signed with --webhook-secret or, without
// one, with a secret generated once in the data dir.
func (n *node) webhookProvider() (*webhook.Provider, error) {
	nc := n.cfg.Notify
	secret := nc.Webhook.Secret
	if secret == "" {
		file := filepath.Join(n.cfg.DataDir, "webhook-secret")
		var created bool
		var err error
		if secret, created, err = webhook.LoadOrCreateSecret(file); err != nil {
			return nil, err
		}
		if created {
			n.log.Info("generated a webhook signing secret", "file", file)
		}
		if n.cfg.DatabaseURL != "" {
			n.log.Warn("webhook secret comes from this node's data dir; set --webhook-secret so every node signs alike")
		}
	}
	wh, err := webhook.New(webhook.Options{Secret: secret, AllowPrivate: n.cfg.AllowPrivate, Timeout: nc.Webhook.Timeout})
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	return wh, nil
}

// marketingCap is the per-user marketing cap, nil when it is off.
func (n *node) marketingCap() (ratelimit.Limiter, error) {
	nc := n.cfg.Notify
	if nc.MarketingCap <= 0 {
		return nil, nil
	}
	lim, err := ratelimit.NewPolicyLimiter(n.counters, ratelimit.Policy{
		Name: "notify_marketing_per_user", Algorithm: ratelimit.TokenBucket,
		Limit: int64(nc.MarketingCap), Period: nc.MarketingPeriod,
	})
	if err != nil {
		return nil, fmt.Errorf("marketing cap: %w", err)
	}
	return lim, nil
}

// runNotify starts the notification workers and scheduler, and the event
// log's purge, until the node stops.
func (n *node) runNotify(ctx context.Context, svc *notify.Service, nq *queue.NotifyQueue) {
	n.events.notify.Store(svc)
	n.goBackground(ctx, "event log purge", func(ctx context.Context) error { return n.events.svc.Run(ctx, time.Minute) })
	n.goBackground(ctx, "notification workers", func(ctx context.Context) error { return nq.Run(ctx, recoverJobs(n.panics, svc.Process)) })
	n.goBackground(ctx, "notification scheduler", func(ctx context.Context) error {
		return svc.RunScheduler(ctx, notify.SchedulerOptions{})
	})
}

func retryRules(nc config.Notify) map[notify.Category]notify.RetryRule {
	out := notify.DefaultRetryRules()
	for name, r := range nc.RetryRules() {
		c := notify.Category(name)
		rule := out[c]
		rule.Base, rule.Cap, rule.Attempts = r.Base, r.Cap, r.Attempts
		out[c] = rule
	}
	return out
}

// webhookGuards puts the webhook provider behind a guard per receiver host
// (breaker on the providers' breaker settings, pacing at --webhook-rate per
// host on the node's counter store), so one slow or failing receiver opens
// its own breaker and every other receiver is called as usual.
func webhookGuards(wh notify.Provider, nc config.Notify, pace ratelimit.Store, hooks guard.Metrics,
	log *slog.Logger) (*guard.Set, error) {
	pc := nc.Providers
	if nc.Webhook.Rate > 0 { // fail at start, not at the first webhook
		if _, err := guard.NewPacer(guard.PacingOptions{Store: pace, Provider: "webhook:check", Rate: nc.Webhook.Rate,
			MaxWait: pc.MaxPacingWait}); err != nil {
			return nil, err
		}
	}
	return &guard.Set{Provider: wh, Metrics: hooks,
		Key: func(m notify.Message) string {
			if u, err := url.Parse(m.To); err == nil {
				return strings.ToLower(u.Host)
			}
			return ""
		},
		New: func(host string) (*guard.Breaker, *guard.Pacer) {
			b := guard.NewBreaker(guard.BreakerOptions{Failures: pc.BreakerFailures, OpenFor: pc.BreakerOpenFor, Probes: pc.BreakerProbes,
				OnChange: func(s guard.BreakerState) {
					log.Warn("webhook receiver circuit breaker", "host", host, "state", s.String())
				}})
			var p *guard.Pacer
			if nc.Webhook.Rate > 0 {
				share := pc.CriticalShare
				if share == 0 {
					share = -1 // none
				}
				p, _ = guard.NewPacer(guard.PacingOptions{Store: pace, Provider: "webhook:" + host, Rate: nc.Webhook.Rate,
					CriticalShare: share, MaxWait: pc.MaxPacingWait})
			}
			return b, p
		}}, nil
}

// emailTracking configures tracked links and opens in email: always on
// the record store, so a type's track_links works without
// notify.email.track_links; links start with the links' public base URL.
func (n *node) emailTracking(nc config.Notify) (notify.EmailTracking, error) {
	nets, err := nc.Email.Networks()
	if err != nil {
		return notify.EmailTracking{}, err
	}
	window := nc.Email.BotWindow
	if window == 0 {
		window = -1 // 0 in the config turns the window off
	}
	// The List-Unsubscribe target (and any body link to it) is never
	// tracked: one-click unsubscribe must reach the sender as it is.
	var unsubscribe []string
	for _, u := range []string{nc.Providers.SMTP.UnsubscribeURL, nc.Providers.SMTPBackup.UnsubscribeURL} {
		if prefix, _, _ := strings.Cut(u, "{"); prefix != "" {
			unsubscribe = append(unsubscribe, prefix)
		}
	}
	targets := n.linkTargets()
	return notify.EmailTracking{
		Store: n.db, BaseURL: n.cfg.LinksBaseURL(),
		TrackLinks: nc.Email.TrackLinks, TrackOpens: nc.Email.TrackOpens,
		BotWindow: window, BotNetworks: nets,
		ClassifyAgent: shorten.ClassifyHit,
		Observe:       metrics.NewEmailHits(n.reg),
		ValidTarget: func(url string) error {
			_, err := targets.ValidateTarget(url)
			return err
		},
		RewriteText: shorten.RewriteLinks,
		Skip: func(url string) bool {
			for _, p := range unsubscribe {
				if strings.HasPrefix(url, p) {
					return true
				}
			}
			return false
		},
	}, nil
}
