package main

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/sluicehq/sluice/internal/announce"
	"github.com/sluicehq/sluice/internal/geoip"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/panics"
	"github.com/sluicehq/sluice/internal/shorten"
	"github.com/sluicehq/sluice/ratelimit"
)

// linkKeySecret names the generated code key among the server secrets.
const linkKeySecret = "code_key"

// startLinks builds the URL shortener, starts its click flusher and
// purge job, and listens for links deleted on any node.
func (n *node) startLinks(ctx context.Context) (*shorten.Service, error) {
	cfg := n.cfg.Links
	codec, err := n.linkCodec(ctx)
	if err != nil {
		return nil, err
	}
	opts := shorten.Options{
		Store:             n.db,
		Codec:             codec,
		BaseURL:           n.cfg.LinksBaseURL(),
		Targets:           n.linkTargets(),
		FallbackURL:       cfg.FallbackURL,
		CacheSize:         cfg.CacheSize,
		NegativeCacheSize: cfg.NegativeCacheSize,
		CacheTTL:          cfg.CacheTTL,
		StaleTTL:          cfg.StaleTTL,
		NegativeTTL:       cfg.NegativeTTL,
		ClickBuffer:       cfg.ClickBuffer,
		FlushInterval:     cfg.FlushInterval,
		PurgeInterval:     cfg.PurgeInterval,
		ExpiredRetention:  cfg.ExpiredRetention,
		ClickRetention:    cfg.ClickRetention,
		Metrics:           metrics.NewLinks(n.reg),
		Logger:            n.log,
		Panics:            n.panics, // a flush that panics loses its batch, not the flusher

		NotificationClickIDs: cfg.NotificationClickIDs,
		Domains:              n.domainOptions(), // node_domains.go
		OnClicks:             n.events.svc.OnClicks,
		OnRecorded:           n.live.publish, // the live stats streams (node_linklive.go)
	}
	if n.redis != nil {
		opts.Shared = n.sharedLinkCache()
	}
	if err := n.linkGeoIP(ctx, &opts); err != nil {
		return nil, err
	}
	if opts.Limiter, err = n.unknownCodeLimiter(); err != nil {
		return nil, err
	}
	buses := n.linkBuses(&opts)
	links, err := shorten.New(opts)
	if err != nil {
		return nil, err
	}
	if err := n.listenLinkBuses(links, buses); err != nil {
		return nil, err
	}
	// The click flusher and purge job stop after the servers have drained
	// (no more hits), with a last flush.
	n.goBackground(ctx, "link click flusher", links.Run)
	// Warns of registered domains that are this server's own hosts, then
	// checks the unverified claims on a schedule (links.domains.verify dns).
	n.goBackground(ctx, "custom domain verifier", links.RunDomains)
	return links, nil
}

// linkCodec is the code permutation, keyed by links.key or else by the
// key generated once and kept in the database, so every node sharing
// PostgreSQL permutes with the same key.
func (n *node) linkCodec(ctx context.Context) (*shorten.Codec, error) {
	key := n.cfg.Links.Key
	if key == "" {
		var err error
		if key, err = serverSecret(ctx, n.db, linkKeySecret); err != nil {
			return nil, fmt.Errorf("link key: %w", err)
		}
	}
	return shorten.NewCodec([]byte(key), n.cfg.Links.CodeLength)
}

// linkGeoIP opens links.geoip_db, when set, for the clicks' countries,
// and reloads it in the background when the file changes.
func (n *node) linkGeoIP(ctx context.Context, opts *shorten.Options) error {
	if n.cfg.Links.GeoIPDB == "" {
		return nil
	}
	geo, err := geoip.Open(n.cfg.Links.GeoIPDB, n.log)
	if err != nil {
		return fmt.Errorf("links.geoip_db: %w", err)
	}
	opts.Geo = geo
	opts.Country = func(client string) string { // the stats' country of a click
		a, err := netip.ParseAddr(client)
		if err != nil {
			return ""
		}
		country, _ := geo.Locate(a)
		return country
	}
	n.goBackground(ctx, "geoip database reloader", func(ctx context.Context) error { return geo.Run(ctx, 0) })
	return nil
}

// unknownCodeLimiter limits redirects of unknown codes per client
// (links.unknown_per_minute), or is nil when that is 0. It counts on the
// node's counter store (Redis when configured), so the limit holds across
// nodes; only unknown codes pay for the check.
func (n *node) unknownCodeLimiter() (shorten.Limiter, error) {
	per := int64(n.cfg.Links.UnknownPerMinute)
	if per <= 0 {
		return nil, nil
	}
	lim, err := ratelimit.NewPolicyLimiter(n.counters, ratelimit.Policy{
		Name: "links_unknown", Algorithm: ratelimit.TokenBucket, Limit: per, Period: time.Minute, Burst: per,
	})
	if err != nil {
		return nil, fmt.Errorf("unknown-code limit: %w", err)
	}
	return lim, nil
}

// linkBuses are the subjects on which nodes tell each other of link and
// domain changes.
type linkBuses struct{ deleted, created, domains *announce.Bus }

// linkBuses opens the link announcements and has opts post on them.
// Deletes are announced to every node, so none keeps redirecting a
// deleted link from its cache for up to links.cache_ttl; creations too,
// so every node caches a new link and redirects it even while the
// database and Redis both fail.
func (n *node) linkBuses(opts *shorten.Options) linkBuses {
	b := linkBuses{
		deleted: announce.New(n.queue.NATS(), n.queue.Name(announce.SubjectLinksDeleted)),
		created: announce.New(n.queue.NATS(), n.queue.Name(announce.SubjectLinksCreated)),
		domains: announce.New(n.queue.NATS(), n.queue.Name(announce.SubjectDomainsChanged)),
	}
	opts.Announce = b.deleted.Post
	opts.AnnounceDomains = func() error { return b.domains.Post("") }
	opts.AnnounceCreated = func(code string, l shorten.CachedLink) error {
		return b.created.Post(announce.EncodeLinkCreated(code, l))
	}
	return b
}

// listenLinkBuses applies the other nodes' link announcements to links'
// caches until the node stops. A message that panics its listener is
// dropped (panics.Announce).
func (n *node) listenLinkBuses(links *shorten.Service, b linkBuses) error {
	stopDeleted, err := b.deleted.Listen(panics.Func(n.panics, panics.Announce, links.Forget))
	if err != nil {
		return err
	}
	n.onStop("link delete listener", func(context.Context) error { return stopDeleted() })
	// This node cached what it created or changed already; its own
	// announcement, heard late, would undo a later change (see
	// ListenOthers).
	stopCreated, err := b.created.ListenOthers(panics.Func(n.panics, panics.Announce, func(data string) {
		if code, l, err := announce.DecodeLinkCreated(data); err == nil {
			links.Learn(code, l)
		}
	}))
	if err != nil {
		return err
	}
	n.onStop("link create listener", func(context.Context) error { return stopCreated() })
	stopDomains, err := b.domains.Listen(panics.Func(n.panics, panics.Announce, func(string) { links.ForgetDomains() }))
	if err != nil {
		return err
	}
	n.onStop("domain change listener", func(context.Context) error { return stopDomains() })
	return nil
}

// linkTargets is where short links, and email tracked links, may lead:
// not to this server's own addresses, nor to private ones unless allowed.
func (n *node) linkTargets() shorten.TargetPolicy {
	prefixes, hosts := n.cfg.Links.AllowedTargetPrefixes()
	return shorten.TargetPolicy{
		OwnHosts:       shorten.OwnHosts(n.cfg.LinksBaseURL(), n.cfg.HTTPAddr),
		AllowPrivate:   n.cfg.AllowPrivate,
		AllowedPrivate: prefixes,
		AllowedHosts:   hosts,
	}
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
			BotHits: x.BotHits, FirstClickAt: x.FirstClickAt, Conversions: x.Conversions}
	}
	return out, nil
}
