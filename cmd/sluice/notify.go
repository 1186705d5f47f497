package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/notify/outbox"
	"github.com/sluicehq/sluice/internal/notify/redisdedupe"
	"github.com/sluicehq/sluice/internal/notify/webhook"
	"github.com/sluicehq/sluice/internal/queue"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/ratelimit"
)

// notifyNode is the notification pipeline of one node: the service the API
// calls, and the workers and scheduler it runs until stop.
type notifyNode struct {
	log       *slog.Logger
	providers *providerSet
	svc       *notify.Service
	queue     *queue.NotifyQueue
	cancel    context.CancelFunc
	workers   sync.WaitGroup
}

// notifyDeps are what the notification pipeline borrows from the rest of
// the node besides its engines.
type notifyDeps struct {
	// links shortens SMS links when that is turned on; nil leaves them.
	links notify.LinkShortener
}

// startNotify builds the notification service on db, q, (when not nil)
// Redis and the node's rate limit store, and starts its workers and
// scheduler. The per-user marketing cap and the providers' pacing count in
// rlStore, so with Redis every node shares one count per user and one
// rate per provider.
func startNotify(ctx context.Context, cfg config.Config, log *slog.Logger, reg prometheus.Registerer, db *store.DB, q *queue.Conn,
	rc rueidis.Client, rlStore ratelimit.Store, deps notifyDeps) (*notifyNode, error) {
	nc := cfg.Notify
	secret := nc.Webhook.Secret
	if secret == "" {
		var created bool
		var err error
		secret, created, err = webhook.LoadOrCreateSecret(filepath.Join(cfg.DataDir, "webhook-secret"))
		if err != nil {
			return nil, err
		}
		if created {
			log.Info("generated a webhook signing secret", "file", filepath.Join(cfg.DataDir, "webhook-secret"))
		}
		if cfg.DatabaseURL != "" {
			log.Warn("webhook secret comes from this node's data dir; set --webhook-secret so every node signs alike")
		}
	}
	wh, err := webhook.New(webhook.Options{Secret: secret, AllowPrivate: cfg.AllowPrivate, Timeout: nc.Webhook.Timeout})
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	nq, err := q.NotifyQueue(ctx, queue.NotifyOptions{
		Partitions:  nc.Partitions,
		AckWait:     nc.AckWait,
		Unconfirmed: !nc.ConfirmPublish,
		Workers: map[notify.Category]int{notify.Critical: nc.WorkersCritical, notify.Orders: nc.WorkersOrders,
			notify.Marketing: nc.WorkersMarketing},
		Logger: log,
	})
	if err != nil {
		return nil, err
	}
	reg.MustRegister(metrics.NewQueueLag(nq))
	ps, err := buildProviders(nc.Providers, rlStore, reg, log)
	if err != nil {
		nq.Close()
		return nil, fmt.Errorf("providers: %w", err)
	}
	ob := &outbox.Provider{}
	providers := map[notify.Channel]notify.Provider{notify.Email: ob, notify.SMS: ob, notify.Push: ob, notify.Webhook: wh}
	maps.Copy(providers, ps.primary)
	failover := []notify.Category{}
	for _, c := range nc.Providers.Failover {
		failover = append(failover, notify.Category(c))
	}
	opts := notify.Options{
		Store:         db,
		Queue:         nq,
		Providers:     providers,
		Backups:       ps.backups,
		Failover:      failover,
		Callbacks:     ps.callbacks,
		History:       nc.Retention,
		RecoveryAfter: nc.RecoveryAfter,
		SendTimeout:   max(nc.Webhook.Timeout, nc.Providers.Timeout+nc.Providers.MaxPacingWait) + 5*time.Second,
		Retry:         retryRules(nc),
		Observe:       metrics.NewDeliveries(reg),
		Logger:        log,
	}
	if rc != nil {
		opts.Dedupe = redisdedupe.New(rc, "sluice:", 24*time.Hour)
	}
	if nc.Providers.ShortenSMSLinks && deps.links != nil {
		opts.Links = deps.links
		opts.Rewriters = append(opts.Rewriters, notify.ShortenSMSLinks(deps.links, 2*time.Second))
	}
	for ch, p := range ps.primary {
		log.Info("notification provider", "channel", ch, "provider", p.Name(), "backups", len(ps.backups[ch]))
	}
	if nc.MarketingCap > 0 {
		lim, err := ratelimit.NewPolicyLimiter(rlStore, ratelimit.Policy{
			Name: "notify_marketing_per_user", Algorithm: ratelimit.TokenBucket,
			Limit: int64(nc.MarketingCap), Period: nc.MarketingPeriod,
		})
		if err != nil {
			nq.Close()
			return nil, fmt.Errorf("marketing cap: %w", err)
		}
		opts.MarketingCap = lim
	}
	n := &notifyNode{log: log, providers: ps, svc: notify.NewService(opts), queue: nq}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.cancel = cancel
	n.workers.Go(func() {
		if err := nq.Run(wctx, n.svc.Process); err != nil {
			log.Error("notification workers stopped", "error", err)
		}
	})
	n.workers.Go(func() { _ = n.svc.RunScheduler(wctx, notify.SchedulerOptions{}) })
	return n, nil
}

// stop stops fetching jobs, waits (until ctx ends) for the jobs in flight
// and the scheduler, and for the queue to acknowledge what was published.
func (n *notifyNode) stop(ctx context.Context) {
	n.cancel()
	done := make(chan struct{})
	go func() { n.workers.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	_ = n.queue.Flush(ctx)
	if err := n.queue.Close(); err != nil {
		n.log.Warn("close notification queue", "error", err)
	}
	n.providers.close()
}

func retryRules(nc config.NotifyConfig) map[notify.Category]notify.RetryRule {
	out := notify.DefaultRetryRules()
	for name, r := range nc.RetryRules() {
		c := notify.Category(name)
		rule := out[c]
		rule.Base, rule.Cap, rule.Attempts = r.Base, r.Cap, r.Attempts
		out[c] = rule
	}
	return out
}
