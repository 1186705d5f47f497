package config

import (
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// Links configures the URL shortener.
type Links struct {
	CodeLength        int           `yaml:"code_length" flag:"links-code-length" usage:"characters in a generated short code (4-10); 62^n codes exist"`
	Key               string        `yaml:"key" flag:"links-key" usage:"secret keying the code permutation (at least 16 characters); empty: generated once and kept in the database. Changing it changes future codes only"`
	BaseURL           string        `yaml:"base_url" flag:"links-base-url" usage:"public root of short URLs, e.g. https://sho.rt; empty: http://<http-addr>"`
	FallbackURL       string        `yaml:"fallback_url" flag:"links-fallback-url" usage:"where expired links redirect; empty: they answer 410 Gone"`
	AllowedTargets    []string      `yaml:"allowed_private_targets" flag:"links-allowed-private-targets" usage:"host names or CIDR prefixes accepted as link targets although private, loopback or this service's own (comma-separated)"`
	CacheSize         int           `yaml:"cache_size" flag:"links-cache-size" usage:"links cached in process for redirects"`
	NegativeCacheSize int           `yaml:"negative_cache_size" flag:"links-negative-cache-size" usage:"unknown codes remembered in process"`
	CacheTTL          time.Duration `yaml:"cache_ttl" flag:"links-cache-ttl" usage:"how long a cached link (and the list of custom domains) is trusted; bounds how long a link deleted, or a domain added, changed or removed, on another node is unseen here if the announcement is lost"`
	StaleTTL          time.Duration `yaml:"stale_ttl" flag:"links-stale-ttl" usage:"how long past links.cache_ttl a link stays cached (in process and in Redis) to keep redirecting while the database fails; 0: not kept"`
	NegativeTTL       time.Duration `yaml:"negative_ttl" flag:"links-negative-ttl" usage:"how long an unknown code is remembered as unknown"`
	ClickBuffer       int           `yaml:"click_buffer" flag:"links-click-buffer" usage:"hits held between flushes; beyond it hits are dropped and counted, never slowing a redirect"`
	FlushInterval     time.Duration `yaml:"flush_interval" flag:"links-flush-interval" usage:"time between writes of buffered hits"`
	PurgeInterval     time.Duration `yaml:"purge_interval" flag:"links-purge-interval" usage:"time between purges of expired links"`
	ExpiredRetention  time.Duration `yaml:"expired_retention" flag:"links-expired-retention" usage:"how long an expired link is kept (answering 410) before it is purged"`
	ClickRetention    time.Duration `yaml:"click_retention" flag:"links-click-retention" usage:"how long raw clicks are kept; the purge job (every links.purge_interval) deletes older ones in batches of 1,000, keeping the hourly rollups, so stats of old periods still answer; 0: forever"`
	UnknownPerMinute  int           `yaml:"unknown_per_minute" flag:"links-unknown-per-minute" usage:"lookups of unknown codes allowed per client IP per minute (429 beyond), and as many of unknown tracked email links (counted apart); 0: unlimited"`

	// Attribution (docs/links.md).
	NotificationClickIDs bool   `yaml:"notification_click_ids" flag:"links-notification-click-ids" usage:"give the short links made for notifications' SMS click ids (a sluice_cid parameter on the target), so POST /v1/conversions can credit a sale to the message"`
	GeoIPDB              string `yaml:"geoip_db" flag:"links-geoip-db" usage:"MaxMind-format database (GeoLite2 or DB-IP lite, Country or City .mmdb) locating clients for country and city redirect rules; reloaded within a minute when the file changes; empty: such rules are refused"`

	// Live configures the live stats streams (docs/links.md, "Live stats").
	Live LinksLive `yaml:"live"`
	// Domains configures custom short domains (docs/links.md, "Custom
	// domains").
	Domains LinksDomains `yaml:"domains"`
}

// Values of links.domains.verify.
const (
	DomainsVerifyNone = "none" // a domain serves once registered
	DomainsVerifyDNS  = "dns"  // a domain serves once its TXT record holds its token
)

// LinksDomains configures custom short domains: how a registration is
// proved, and how many one key and the server hold.
type LinksDomains struct {
	Verify         string        `yaml:"verify" flag:"links-domains-verify" usage:"how a custom domain is proved before it serves redirects: none (it serves once registered, first come first served) or dns (a TXT record _sluice.<domain> must hold its verification_token; until then its codes answer 404 and other keys may claim it too)"`
	Resolver       string        `yaml:"resolver" flag:"links-domains-resolver" usage:"DNS server (host:port, UDP then TCP) the TXT records of custom domains are looked up on; empty: the system resolver"`
	VerifyInterval time.Duration `yaml:"verify_interval" flag:"links-domains-verify-interval" usage:"with links.domains.verify dns, how often every node looks up the TXT records of the unverified custom domains (POST /v1/domains/{domain}/verify checks one at once)"`
	MaxPerOwner    int           `yaml:"max_per_owner" flag:"links-domains-max-per-owner" usage:"custom domains and pending claims one API key may hold; more are refused with 429"`
	Max            int           `yaml:"max" flag:"links-domains-max" usage:"custom domains and pending claims the server holds in all (at most 10000: every node keeps them in memory); more are refused with 429"`
}

func defaultLinksDomains() LinksDomains {
	return LinksDomains{Verify: DomainsVerifyNone, VerifyInterval: 10 * time.Minute, MaxPerOwner: 100, Max: 10_000}
}

func (d LinksDomains) validate(bad func(flag, format string, args ...any)) {
	if d.Verify != DomainsVerifyNone && d.Verify != DomainsVerifyDNS {
		bad("links-domains-verify", "%q is neither none nor dns", d.Verify)
	}
	if d.Resolver != "" {
		if host, port, err := net.SplitHostPort(d.Resolver); err != nil || host == "" || port == "" {
			bad("links-domains-resolver", "%q is not host:port", d.Resolver)
		}
	}
	if d.VerifyInterval < 10*time.Second || d.VerifyInterval > 24*time.Hour {
		bad("links-domains-verify-interval", "must be from 10s to 24h")
	}
	if d.MaxPerOwner < 1 {
		bad("links-domains-max-per-owner", "must be at least 1")
	}
	if d.Max < 1 || d.Max > 10_000 {
		bad("links-domains-max", "must be from 1 to 10000")
	}
}

// OwnHosts are the host names this server answers on, which no custom
// domain may cover: the hosts of links.base_url, ui.public_url and
// notify.providers.callback_base_url, every --allowed-hosts entry and the
// host of --gateway-listen when it is a name; lower case, without port or
// trailing dot. IP addresses and empty hosts are left out (no domain can
// be one).
func (c Config) OwnHosts() []string {
	var out []string
	add := func(h string) {
		if hh, _, err := net.SplitHostPort(h); err == nil {
			h = hh
		}
		h = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(h), "."))
		if _, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil || h == "" {
			return
		}
		for _, o := range out {
			if o == h {
				return
			}
		}
		out = append(out, h)
	}
	for _, u := range []string{c.LinksBaseURL(), c.UIPublicURL(), c.Notify.Providers.CallbackBaseURL} {
		if p, err := url.Parse(u); err == nil && u != "" {
			add(p.Host)
		}
	}
	for _, h := range c.AllowedHosts {
		add(h)
	}
	if c.Gateway.Listen != "" {
		add(c.Gateway.Listen)
	}
	return out
}

// LinksLive configures the live link stats streams
// (GET /v1/links/{code}/stats/stream).
type LinksLive struct {
	MaxStreams   int           `yaml:"max_streams" flag:"links-live-max-streams" usage:"live link stats streams open at once on this node; more are refused with 429"`
	MaxPerKey    int           `yaml:"max_streams_per_key" flag:"links-live-max-streams-per-key" usage:"live link stats streams one API key (or dashboard session's key) may hold open on this node; more are refused with 429"`
	Buffer       int           `yaml:"buffer" flag:"links-live-buffer" usage:"hits one live stream may have waiting to be written; a client further behind is cut off (it reconnects and resumes), never slowing the click flusher"`
	Heartbeat    time.Duration `yaml:"heartbeat" flag:"links-live-heartbeat" usage:"how often an idle live link stats stream sends a comment line; the stream's key or session is checked again at each"`
	ReplayWindow time.Duration `yaml:"replay_window" flag:"links-live-replay-window" usage:"how long recorded hits are kept (in NATS memory) for a stream that reconnects with Last-Event-ID"`
}

func defaultLinksLive() LinksLive {
	return LinksLive{MaxStreams: 1000, MaxPerKey: 20, Buffer: 256, Heartbeat: 15 * time.Second, ReplayWindow: 10 * time.Minute}
}

func (c LinksLive) validate(bad func(flag, format string, args ...any)) {
	if c.MaxStreams < 1 {
		bad("links-live-max-streams", "must be at least 1")
	}
	if c.MaxPerKey < 1 {
		bad("links-live-max-streams-per-key", "must be at least 1")
	}
	if c.Buffer < 1 || c.Buffer > 100_000 {
		bad("links-live-buffer", "must be from 1 to 100000")
	}
	if c.Heartbeat < time.Second || c.Heartbeat > 5*time.Minute {
		bad("links-live-heartbeat", "must be from 1s to 5m")
	}
	if c.ReplayWindow < time.Minute || c.ReplayWindow > 24*time.Hour {
		bad("links-live-replay-window", "must be from 1m to 24h")
	}
}

// DefaultLinks returns the shortener's defaults.
func DefaultLinks() Links {
	return Links{
		CodeLength:        7,
		CacheSize:         100_000,
		NegativeCacheSize: 10_000,
		CacheTTL:          30 * time.Second,
		StaleTTL:          24 * time.Hour,
		NegativeTTL:       5 * time.Second,
		ClickBuffer:       100_000,
		FlushInterval:     500 * time.Millisecond,
		PurgeInterval:     time.Hour,
		ExpiredRetention:  24 * time.Hour,
		UnknownPerMinute:  60,
		Live:              defaultLinksLive(),
		Domains:           defaultLinksDomains(),
	}
}

// LinksBaseURL returns links.base_url, or http://<http-addr> when it is
// empty (localhost for an address that listens on every interface).
func (c Config) LinksBaseURL() string {
	if c.Links.BaseURL != "" {
		return strings.TrimRight(c.Links.BaseURL, "/")
	}
	host, port, err := net.SplitHostPort(c.HTTPAddr)
	if err != nil {
		return "http://" + c.HTTPAddr
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// AllowedTargetPrefixes splits links.allowed_private_targets into CIDR
// prefixes (single addresses become /32 or /128) and host names.
func (l Links) AllowedTargetPrefixes() (prefixes []netip.Prefix, hosts []string) {
	for _, t := range l.AllowedTargets {
		t = strings.ToLower(strings.TrimSpace(t))
		if p, err := netip.ParsePrefix(t); err == nil {
			prefixes = append(prefixes, p.Masked())
		} else if a, err := netip.ParseAddr(t); err == nil {
			prefixes = append(prefixes, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
		} else {
			hosts = append(hosts, strings.TrimSuffix(t, "."))
		}
	}
	return prefixes, hosts
}

func (l Links) validate(bad func(flag, format string, args ...any)) {
	if l.CodeLength < 4 || l.CodeLength > 10 {
		bad("links-code-length", "%d is not between 4 and 10", l.CodeLength)
	}
	if l.Key != "" && len(l.Key) < 16 {
		bad("links-key", "must be at least 16 characters (or empty to generate one)")
	}
	for _, u := range []struct{ flag, v string }{{"links-base-url", l.BaseURL}, {"links-fallback-url", l.FallbackURL}} {
		if u.v == "" {
			continue
		}
		p, err := url.Parse(u.v)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			bad(u.flag, "%q is not an absolute http(s) URL", u.v)
		}
	}
	if l.BaseURL != "" {
		if p, err := url.Parse(l.BaseURL); err == nil && strings.Trim(p.Path, "/") != "" {
			bad("links-base-url", "%q has a path; short links are served at the root", l.BaseURL)
		}
	}
	for _, t := range l.AllowedTargets {
		if strings.TrimSpace(t) == "" || strings.ContainsAny(t, " /:") && !validPrefix(t) {
			bad("links-allowed-private-targets", "%q is neither a host name nor an address or CIDR prefix", t)
		}
	}
	for _, n := range []struct {
		flag string
		v    int
		min  int
	}{{"links-cache-size", l.CacheSize, 1}, {"links-negative-cache-size", l.NegativeCacheSize, 1},
		{"links-click-buffer", l.ClickBuffer, 1}, {"links-unknown-per-minute", l.UnknownPerMinute, 0}} {
		if n.v < n.min {
			bad(n.flag, "must be at least %d", n.min)
		}
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"links-cache-ttl", l.CacheTTL}, {"links-negative-ttl", l.NegativeTTL}, {"links-flush-interval", l.FlushInterval},
		{"links-purge-interval", l.PurgeInterval}, {"links-expired-retention", l.ExpiredRetention}} {
		if d.v <= 0 {
			bad(d.flag, "must be positive")
		}
	}
	if l.StaleTTL < 0 {
		bad("links-stale-ttl", "must not be negative")
	}
	if l.ClickRetention < 0 {
		bad("links-click-retention", "must not be negative (0 keeps clicks forever)")
	}
	l.Live.validate(bad)
	l.Domains.validate(bad)
}

func validPrefix(s string) bool {
	s = strings.TrimSpace(s)
	if _, err := netip.ParsePrefix(s); err == nil {
		return true
	}
	_, err := netip.ParseAddr(s)
	return err == nil
}
