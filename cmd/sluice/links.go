package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/announce"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/queue"
	"github.com/sluicehq/sluice/internal/shorten"
	"github.com/sluicehq/sluice/internal/shorten/rediscache"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/ratelimit"
)

// linkKeySecret names the generated code key among the server secrets.
const linkKeySecret = "code_key"

// newLinks builds the URL shortener from cfg and starts listening for
// links deleted on any node; stopListen ends that. rc is nil without
// Redis; counters is the node's rate limit store, shared by every limiter.
func newLinks(ctx context.Context, cfg config.Config, db *store.DB, q *queue.Conn, rc rueidis.Client, counters ratelimit.Store,
	reg prometheus.Registerer, log *slog.Logger) (links *shorten.Service, stopListen func() error, err error) {
	key := cfg.Links.Key
	if key == "" {
		// Kept in the database, not the data dir, so every node sharing
		// PostgreSQL permutes with the same key.
		if key, err = serverSecret(ctx, db, linkKeySecret); err != nil {
			return nil, nil, fmt.Errorf("link key: %w", err)
		}
	}
	codec, err := shorten.NewCodec([]byte(key), cfg.Links.CodeLength)
	if err != nil {
		return nil, nil, err
	}
	base := cfg.LinksBaseURL()
	prefixes, hosts := cfg.Links.AllowedTargetPrefixes()
	opts := shorten.Options{
		Store:   db,
		Codec:   codec,
		BaseURL: base,
		Targets: shorten.TargetPolicy{
			OwnHosts:       ownHosts(base, cfg.HTTPAddr),
			AllowPrivate:   cfg.AllowPrivate,
			AllowedPrivate: prefixes,
			AllowedHosts:   hosts,
		},
		FallbackURL:       cfg.Links.FallbackURL,
		CacheSize:         cfg.Links.CacheSize,
		NegativeCacheSize: cfg.Links.NegativeCacheSize,
		CacheTTL:          cfg.Links.CacheTTL,
		NegativeTTL:       cfg.Links.NegativeTTL,
		ClickBuffer:       cfg.Links.ClickBuffer,
		FlushInterval:     cfg.Links.FlushInterval,
		PurgeInterval:     cfg.Links.PurgeInterval,
		ExpiredRetention:  cfg.Links.ExpiredRetention,
		Metrics:           metrics.NewLinks(reg),
		Logger:            log,
	}
	if rc != nil {
		opts.Shared = rediscache.New(rc, "")
	}
	if n := int64(cfg.Links.UnknownPerMinute); n > 0 {
		// On the node's counter store (Redis when configured), so the limit
		// holds across nodes; only unknown codes pay for the check.
		lim, err := ratelimit.NewPolicyLimiter(counters, ratelimit.Policy{
			Name: "links_unknown", Algorithm: ratelimit.TokenBucket, Limit: n, Period: time.Minute, Burst: n,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("unknown-code limit: %w", err)
		}
		opts.Limiter = lim
	}
	// Deletes are announced to every node, so none keeps redirecting a
	// deleted link from its cache for up to links.cache_ttl.
	bus := announce.New(q.NATS(), q.Name("links.deleted"))
	opts.Announce = bus.Post
	if links, err = shorten.New(opts); err != nil {
		return nil, nil, err
	}
	if stopListen, err = bus.Listen(links.Forget); err != nil {
		return nil, nil, err
	}
	return links, stopListen, nil
}

// ownHosts are the host names of this service, refused as link targets.
func ownHosts(base, httpAddr string) []string {
	var hosts []string
	if u, err := url.Parse(base); err == nil && u.Hostname() != "" {
		hosts = append(hosts, strings.ToLower(u.Hostname()))
	}
	if h, _, err := net.SplitHostPort(httpAddr); err == nil && h != "" && h != "0.0.0.0" && h != "::" {
		hosts = append(hosts, strings.ToLower(h))
	}
	return hosts
}

// smsLinks adapts the shortener to notify.LinkShortener, so the
// notification domain needs neither package shorten nor its types.
type smsLinks struct{ svc *shorten.Service }

var _ notify.LinkShortener = smsLinks{}

// ShortenLinks replaces every link of body by the notification's short
// link for it; links that fail stay long.
func (l smsLinks) ShortenLinks(ctx context.Context, notificationID, body string) string {
	return shorten.RewriteLinks(body, l.svc.NotificationShortener(ctx, notificationID))
}

// Links lists the notification's links with their clicks.
func (l smsLinks) Links(ctx context.Context, notificationID string) ([]notify.Link, error) {
	ls, err := l.svc.NotificationLinks(ctx, notificationID)
	if err != nil {
		return nil, err
	}
	out := make([]notify.Link, len(ls))
	for i, x := range ls {
		out[i] = notify.Link{Code: x.Code, ShortURL: l.svc.ShortURL(x.Code), URL: x.URL, Clicks: x.Clicks,
			BotHits: x.BotHits, FirstClickAt: x.FirstClickAt}
	}
	return out, nil
}
