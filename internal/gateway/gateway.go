// Package gateway is Sluice's rate limiting reverse proxy, an adapter of
// the rate limit service (internal/limits): an
// httputil.ReverseProxy in front of an upstream, behind the httplimit
// middleware, with its routes, tiers and global capacity limit from the
// YAML configuration and its decisions from the rate limit service (so
// blocks, policy modes, failover and metrics apply as for the decision
// API).
//
// Per request: the client is its API key when the key is known (named in
// gateway.tiers, which gives its tier, or active in the API key store:
// default_tier) or else its IP (anonymous_policy), so made-up keys share
// their IP's limits; forwarding headers are believed only from trusted
// proxies. A route with require_key refuses unknown clients with 401. The route matching the path (longest
// prefix) adds its policies, an IP policy and, on login routes, an account
// policy keyed by the account named in the body. The global policy, if
// any, sheds load with 503.
package gateway

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/httplimit"
)

// tierPolicy in a route's policies stands for the client's tier.
const tierPolicy = "tier"

// globalKey is the counter key of the global capacity limit.
const globalKey = "global"

// Options configures New.
type Options struct {
	// Config is what to limit and where to forward.
	Config Config
	// TrustedProxies are the peers whose forwarding headers name the
	// client (httplimit.Identifier); cmd/sluice passes the one list every
	// part of Sluice uses. None: the client is the peer.
	TrustedProxies []netip.Prefix
	// ProxyHeader is the forwarding header TrustedProxies write, the only
	// one read (httplimit.Identifier.Header); empty reads both.
	ProxyHeader httplimit.ProxyHeader
	// Limits decides the checks. Required.
	Limits *limits.Service
	// Logger receives proxy errors and misconfigured policy names. If nil,
	// nothing is logged.
	Logger *slog.Logger
	// Transport reaches the upstream. If nil, http.DefaultTransport.
	Transport http.RoundTripper
	// HTTP sets the limits against slow clients on Serve's server
	// (cmd/sluice passes its configured listener limits); the write
	// timeout it sets also bounds a non-streaming request's upstream call.
	// If nil, the server keeps net/http's zero values: no limits.
	HTTP func(*http.Server)
	// Keys is the API key store: an active stored key is a known client
	// (default_tier, unless gateway.tiers names it). If nil, only the keys
	// named in gateway.tiers are known.
	Keys KeyStore
	// TLS, when set, makes Serve serve HTTPS with it (after a PROXY
	// protocol header, when the listener reads one); Sluice hands in a
	// tlsconf.Reloader's Config, so a replaced certificate serves the
	// next handshake. It should offer "h2" and "http/1.1" (NextProtos).
	// If nil, Serve serves plain HTTP.
	TLS *tls.Config
	// UsageUnreadable, if set, counts a response of a cost_from_response
	// route whose cost could not be read (it keeps its estimate): its
	// route's path and why ("encoding", "corrupt", "too_large",
	// "invalid").
	UsageUnreadable func(route, reason string)
}

// Gateway is the rate limiting reverse proxy, an http.Handler. It is safe
// for concurrent use.
type Gateway struct {
	cfg    Config
	svc    *limits.Service
	log    *slog.Logger
	id     httplimit.Identifier
	routes []Route // longest path first
	proxy  *httputil.ReverseProxy
	mw     *httplimit.Middleware
	h      http.Handler
	keys   *keyCache          // nil without Options.Keys
	http   func(*http.Server) // nil: no limits
	tls    *tls.Config        // nil: plain HTTP
	// writeTimeout bounds a non-streaming request's upstream call.
	writeTimeout time.Duration
	warned       sync.Map // policy names already reported unknown
	onUnreadable func(route, reason string)
}

// New builds the gateway; it fails on an invalid upstream.
func New(opts Options) (*Gateway, error) {
	if opts.Limits == nil {
		return nil, errors.New("gateway: Limits is required")
	}
	up, err := url.Parse(opts.Config.Upstream)
	if err != nil || up.Host == "" {
		return nil, fmt.Errorf("gateway upstream %q: not a URL", opts.Config.Upstream)
	}
	g := &Gateway{cfg: opts.Config, svc: opts.Limits, log: opts.Logger, id: httplimit.Identifier{TrustedProxies: opts.TrustedProxies, Header: opts.ProxyHeader},
		http: opts.HTTP, tls: opts.TLS, onUnreadable: opts.UsageUnreadable}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	g.cfg.DefaultTier = cmp.Or(g.cfg.DefaultTier, "free")
	g.cfg.AnonymousPolicy = cmp.Or(g.cfg.AnonymousPolicy, "free")
	g.routes = slices.Clone(g.cfg.Routes)
	slices.SortStableFunc(g.routes, func(a, b Route) int { return cmp.Compare(len(b.Path), len(a.Path)) })

	g.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(up)
			pr.SetXForwarded()
			// Keep the chain a trusted proxy sent, so the upstream sees
			// the same client the limits did.
			// (Forwarded is dropped, as ReverseProxy does before Rewrite:
			// the upstream gets the client in X-Forwarded-For.)
			if prior := strings.Join(pr.In.Header.Values("X-Forwarded-For"), ", "); prior != "" && g.id.TrustedPeer(pr.In) {
				pr.Out.Header.Set("X-Forwarded-For", prior+", "+pr.Out.Header.Get("X-Forwarded-For"))
			}
			pr.Out.Host = pr.In.Host
		},
		Transport: opts.Transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			g.log.Warn("gateway upstream failed", slog.String("path", r.URL.Path), slog.Any("error", err))
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	g.mw = &httplimit.Middleware{Limits: g.limits, Decide: g.decide, MaxWait: g.cfg.Global.MaxWait}
	if g.cfg.Global.Policy != "" {
		g.mw.Global = g.global
	}
	if opts.Keys != nil {
		g.keys = newKeyCache(opts.Keys)
	}
	var hs http.Server
	g.applyHTTP(&hs)
	g.writeTimeout = hs.WriteTimeout
	g.h = g.withUsage(g.mw.Wrap(g.requireKey(http.HandlerFunc(g.forward)))) // usage.go: settles reservations when responses end
	return g, nil
}

// applyHTTP sets Options.HTTP's limits on hs.
func (g *Gateway) applyHTTP(hs *http.Server) {
	if g.http != nil {
		g.http(hs)
	}
}

// ServeHTTP implements http.Handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if rt, ok := g.route(r); (!ok || !rt.Streaming) && g.writeTimeout > 0 {
		// Past the write timeout the client's connection is useless: the
		// upstream call ends then too, rather than when the upstream
		// answers.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.writeTimeout)
		defer cancel()
	}
	var b *handlerBody
	if r.ContentLength != 0 {
		// The proxy's Transport may still be reading the body when the
		// handler returns (its last read, after the upstream's answer
		// ended); the server must not be reading the connection then.
		b = newHandlerBody(r)
		ctx = context.WithValue(ctx, bodyCtxKey{}, b)
		defer b.shut(w)
	}
	// A copy of r: the server's own request keeps the server's body,
	// which it drains, or gives up on and closes the connection, by its
	// type.
	r = r.WithContext(ctx)
	if b != nil {
		r.Body = b
	}
	g.h.ServeHTTP(w, r.WithContext(context.WithValue(ctx, clientCtxKey{}, g.resolve(r))))
}

// forward proxies an admitted request to the upstream.
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request) {
	if b := bodyFrom(r); b != nil {
		b.serveDuplex(w)
	}
	if u := usageFrom(r.Context()); u != nil && u.routed && u.route.Streaming {
		// Exempt from Serve's read and write timeouts, explicitly (a
		// refusal keeps them).
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Time{})
		_ = rc.SetWriteDeadline(time.Time{})
	}
	g.proxy.ServeHTTP(w, r)
}

// route returns the route of r, if any.
func (g *Gateway) route(r *http.Request) (Route, bool) {
	for _, rt := range g.routes {
		if !strings.HasPrefix(r.URL.Path, rt.Path) {
			continue
		}
		if len(rt.Methods) == 0 || slices.ContainsFunc(rt.Methods, func(m string) bool { return strings.EqualFold(m, r.Method) }) {
			return rt, true
		}
	}
	return Route{}, false
}

// limits is the client's checks for r.
func (g *Gateway) limits(r *http.Request) []httplimit.Limit {
	c := clientOf(r)
	rt, ok := g.route(r)
	policies := []string{tierPolicy}
	if ok && rt.Policies != nil { // policies: [] is none, not the tier
		policies = rt.Policies
	}
	var out []httplimit.Limit
	add := func(name, key string) {
		if l, ok := g.limit(name, key); ok && !slices.ContainsFunc(out, func(o httplimit.Limit) bool {
			return o.Policy.Name == name && o.Key == key
		}) {
			out = append(out, l)
		}
	}
	for _, name := range policies {
		if name == tierPolicy {
			name = c.tier
		}
		add(name, c.key())
	}
	if ok && rt.IPPolicy != "" {
		add(rt.IPPolicy, httplimit.IPKey(c.id.IP))
	}
	if ok && rt.AccountPolicy != "" {
		if account := httplimit.AccountFromBody(r, rt.AccountField, 0); account != "" {
			add(rt.AccountPolicy, "account:"+account)
		}
	}
	return out
}

func (g *Gateway) global(*http.Request) []httplimit.Limit {
	if l, ok := g.limit(g.cfg.Global.Policy, globalKey); ok {
		return []httplimit.Limit{l}
	}
	return nil
}

// limit describes policy name for key, or logs that it does not exist
// (a misconfigured route then limits nothing rather than failing).
func (g *Gateway) limit(name, key string) (httplimit.Limit, bool) {
	p, _, err := g.svc.Policy(name)
	if err != nil {
		if _, seen := g.warned.LoadOrStore(name, true); !seen {
			g.log.Warn("gateway configuration names an unknown rate limit policy; it is skipped until it exists", slog.String("policy", name))
		}
		return httplimit.Limit{}, false
	}
	return httplimit.Limit{Key: key, Cost: 1, Policy: &ratelimit.Policy{Name: p.Name, Algorithm: p.Algorithm,
		Limit: p.Limit, Period: time.Duration(p.Period), Burst: p.Burst}}, true
}

// decide asks the rate limit service, which applies blocks and modes.
func (g *Gateway) decide(ctx context.Context, ls []httplimit.Limit) ([]ratelimit.Decision, error) {
	if u := usageFrom(ctx); u != nil && u.reserves(ls) {
		return g.reserve(ctx, u, ls)
	}
	reqs := make([]limits.CheckRequest, len(ls))
	for i, l := range ls {
		reqs[i] = limits.CheckRequest{Policy: l.Policy.Name, Key: l.Key, Cost: max(l.Cost, 1)}
	}
	_, results, err := g.svc.Check(ctx, reqs)
	if err != nil {
		if apperr.Is(err, apperr.Invalid) || apperr.Is(err, apperr.NotFound) {
			g.log.Warn("gateway check refused by the rate limiter; request let through", slog.Any("error", err))
		}
		return nil, err
	}
	ds := make([]ratelimit.Decision, len(results))
	for i, res := range results {
		ds[i] = res.Verdict.Decision
	}
	return ds, nil
}

// Serve serves the gateway on ln until ctx ends, then drains within
// shutdown: HTTPS with Options.TLS, else plain HTTP. Slow clients are cut
// off by Options.HTTP's timeouts (routes with streaming: true excepted).
func (g *Gateway) Serve(ctx context.Context, ln net.Listener, shutdown time.Duration) error {
	if g.tls != nil {
		ln = tls.NewListener(ln, g.tls) // the TLS handshake runs on the first read, after ln's PROXY header
	}
	hs := &http.Server{Handler: g, ErrorLog: slog.NewLogLogger(g.log.Handler(), slog.LevelWarn)}
	g.applyHTTP(hs)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("gateway: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdown)
	defer cancel()
	err := hs.Shutdown(sctx)
	<-errc
	return err
}
