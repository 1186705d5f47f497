package main

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/shorten"
	"github.com/sluicehq/sluice/ratelimit/httplimit"
)

// newAPI builds the node's HTTP API on the services started before it:
// the trusted proxies, the limits on failed authentication and unknown
// email links, then the handler; it warns when no API key serves yet.
func (n *node) newAPI(ctx context.Context, checks []httpapi.Check, limiter *limits.Service, links *shorten.Service, notifier *notify.Service) error {
	cfg := n.cfg
	ui, err := uiOptions(ctx, cfg, n.db)
	if err != nil {
		return err
	}
	if err := n.trustProxies(); err != nil {
		return err
	}
	authFailures, err := n.authFailureLimiter()
	if err != nil {
		return fmt.Errorf("--auth-failures-per-minute: %w", err)
	}
	unknownEmailLinks, err := n.unknownEmailLinkLimiter()
	if err != nil {
		return fmt.Errorf("links.unknown_per_minute: %w", err)
	}
	n.api = httpapi.New(httpapi.Options{
		Logger:       n.log,
		Registry:     n.reg,
		Panics:       n.panics,
		Keys:         n.db,
		Checks:       checks,
		MaxBodyBytes: cfg.MaxBodyBytes,
		Version:      buildVersion(),
		Ratelimit:    limiter,
		Links:        links,
		UI:           ui,
		Notify:       notifier,
		Preferences:  notifier,
		Events:       n.events.svc,
		// Events in, workflows and their runs; the attributes branches read.
		Workflows:  n.workflows,
		Attributes: n.workflows, // the store's, bounded by max_attribute_users
		Audiences:  n.audiences, // topics and broadcasts
		// The access log, redirects' unknown-code limit and the keyless
		// loopback check see the client behind trusted proxies.
		TrustedProxies: n.proxies,
		ProxyHeader:    n.proxyHeader,
		AllowedHosts:   cfg.AllowedHosts,
		AuthFailures:   authFailures,
		// Pages on these origins may call the API from a browser.
		CORSOrigins: cfg.HTTP.CORSOrigins,
		// Unknown tracked email links, limited as unknown short codes.
		UnknownEmailLinks: unknownEmailLinks,
		MetricsAuth:       cfg.MetricsAuth,
		// /openapi.json names ui.public_url as its server, if set.
		PublicURL: cfg.UI.PublicURL,

		// The in-app inbox's routes and streams.
		Inbox:          n.inbox,
		InboxHeartbeat: cfg.Notify.Inbox.Heartbeat,
		// The live link stats streams.
		LinkLive:          n.live.hub,
		LinkLiveHeartbeat: cfg.Links.Live.Heartbeat,
	})
	n.warnNoAPIKey(ctx)
	return nil
}

// trustProxies reads the trusted load balancers and the forwarding header
// they write (--trusted-proxies, --trusted-proxy-header).
func (n *node) trustProxies() error {
	cfg := n.cfg
	if cfg.ProxyHeader != "any" {
		n.proxyHeader = httplimit.ProxyHeader(cfg.ProxyHeader)
	}
	var err error
	if n.proxies, err = cfg.Proxies(); err != nil {
		return err
	}
	if cfg.ProxyProtocol && len(n.proxies) == 0 {
		n.log.Warn("--proxy-protocol without --trusted-proxies: any peer can name the client address it likes; list the load balancers")
	}
	return nil
}

// warnNoAPIKey logs who is served while no API key is active: nobody once
// every key was revoked, loopback clients before the first key.
func (n *node) warnNoAPIKey(ctx context.Context) {
	count, err := n.db.CountActiveAPIKeys(ctx)
	if err != nil || count != 0 {
		return
	}
	if ever, err := n.db.APIKeyEverCreated(ctx); err == nil && ever {
		n.log.Warn(httpapi.ClosedWarning)
	} else if err == nil {
		n.log.Warn("no API key created yet: only loopback clients naming localhost (or --allowed-hosts) are served, trusted as admins, until the first key is created; " +
			"a reverse proxy on this host makes every client it forwards look local unless it is in --trusted-proxies and names the client; " +
			"create a key with `sluice keys create --scope admin`")
	}
}
