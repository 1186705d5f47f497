package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
)

// Ratelimit configures the rate limit service.
type Ratelimit struct {
	Nodes           int           `yaml:"nodes" flag:"ratelimit-nodes" usage:"how many Sluice nodes share Redis; while Redis is down each node admits limit / nodes"`
	RefreshInterval time.Duration `yaml:"refresh_interval" flag:"ratelimit-refresh" usage:"periodic reload of policies and blocks (changes through the API reach every node at once by NATS)"`
	StoreTimeout    time.Duration `yaml:"store_timeout" flag:"ratelimit-store-timeout" usage:"longest wait for Redis on one check before falling back to local limiters"`
	HotKeys         int           `yaml:"hot_keys" flag:"ratelimit-hot-keys" usage:"over-limit keys answered locally until their retry time, without a Redis round trip (0 disables)"`
	MaxHolds        int           `yaml:"max_holds" flag:"ratelimit-max-holds" usage:"most unsettled reservations one key (policy and key) may have at once; past it a check answers 429"`
	MaxAPIKeyHolds  int           `yaml:"max_holds_per_api_key" flag:"ratelimit-max-holds-per-api-key" usage:"most unsettled reservations one API key may have at once over every key; past it a check answers 429"`
	MaxNodeHolds    int           `yaml:"max_holds_per_node" flag:"ratelimit-max-holds-per-node" usage:"most reservations this node keeps in memory at once (unsettled, and settled ones remembered a minute, which go first), over every key and API key, when it has no Redis or while Redis is down; past it a check answers 429"`
	MaxBlocks       int           `yaml:"max_blocks" flag:"ratelimit-max-blocks" usage:"most emergency blocks in force at once (every node keeps them in memory); past it a new block answers 429"`
	// Policies are the rate limit policies fixed by the file: they hide
	// stored policies of the same name and cannot be changed through the
	// API.
	Policies []limits.NamedPolicy `yaml:"policies"`
}

// Gateway configures the rate limiting reverse proxy. It runs when Listen
// is set.
type Gateway struct {
	Listen         string   `yaml:"listen" flag:"gateway-listen" usage:"listen address of the rate limiting reverse proxy; empty disables it"`
	Upstream       string   `yaml:"upstream" flag:"gateway-upstream" usage:"URL the gateway forwards admitted requests to"`
	TrustedProxies []string `yaml:"trusted_proxies" flag:"gateway-trusted-proxies" usage:"deprecated: added to --trusted-proxies"` // kept for configurations written before it (see Config.Proxies)
	// TLSCertFile and TLSKeyFile serve the gateway over TLS (see
	// Config.GatewayTLS): by default it serves the node's --tls-cert-file.
	TLSCertFile string `yaml:"tls_cert_file" flag:"gateway-tls-cert-file" usage:"PEM certificate served with TLS 1.2+ on --gateway-listen instead of --tls-cert-file (which the gateway serves when this is empty); reloaded like it; TLS comes after a PROXY protocol header"`
	TLSKeyFile  string `yaml:"tls_key_file" flag:"gateway-tls-key-file" usage:"PEM private key of --gateway-tls-cert-file"`
	// DefaultTier is the policy of known API keys not listed in tiers.
	DefaultTier string `yaml:"default_tier"`
	// AnonymousPolicy is the policy limiting clients without a known API
	// key, by IP.
	AnonymousPolicy string `yaml:"anonymous_policy"`
	// Tiers maps API keys to their tier's policy name (key: policy).
	Tiers map[string]string `yaml:"tiers"`
	// Global is the capacity limit shared by every client (load
	// shedding): refused requests get 503.
	Global GatewayGlobal `yaml:"global"`
	// Routes choose the limits of each path; the longest matching prefix
	// wins. With none, every request gets its client's tier.
	Routes []GatewayRoute `yaml:"routes"`
}

// GatewayGlobal is the gateway's load shedding limit.
type GatewayGlobal struct {
	// Policy names the load shedding policy, one limit shared by every
	// client (refused requests get 503); empty disables load shedding.
	Policy string `yaml:"policy"`
	// MaxWait, if positive, lets a request refused only by the global
	// limit wait up to this long for capacity instead of getting 503.
	MaxWait time.Duration `yaml:"max_wait"`
}

// GatewayRoute is the limits of the requests under one path prefix.
type GatewayRoute struct {
	// Path is a path prefix, "/" for everything.
	Path string `yaml:"path"`
	// Methods restricts the route to these methods; empty means all.
	Methods []string `yaml:"methods"`
	// Policies are checked keyed by the client's identity (a known API
	// key, else IP); "tier" stands for the client's tier. Absent: [tier];
	// an explicit empty list checks none of them.
	Policies []string `yaml:"policies"`
	// RequireKey refuses requests without a known API key (401).
	RequireKey bool `yaml:"require_key"`
	// Streaming exempts the route from the listener's read and write
	// timeouts (server-sent events, long polls, large downloads).
	Streaming bool `yaml:"streaming"`
	// IPPolicy, if set, is checked keyed by the client IP even when an API
	// key is present (login routes).
	IPPolicy string `yaml:"ip_policy"`
	// AccountField names the JSON body field holding the target account,
	// checked under account_policy (login routes).
	AccountField string `yaml:"account_field"`
	// AccountPolicy is checked keyed by the account account_field names;
	// the two go together.
	AccountPolicy string `yaml:"account_policy"`
	// CostFromResponse, if set, charges the route's usage policies what
	// the response says the request cost, when it ends (docs/ratelimit.md,
	// "Usage-based limits"); exactly one of header and json..
	CostFromResponse *CostFromResponse `yaml:"cost_from_response"`
	// CountStatuses, if set, charges the route's checks only for responses
	// with these statuses (failed logins: [401, 403]); other requests are
	// checked but never charged.
	CountStatuses []int `yaml:"count_statuses"`
}

// CostFromResponse names where a response carries its request's cost.
type CostFromResponse struct {
	// Header is a response header (or trailer) holding the cost, such as
	// X-Usage-Tokens.
	Header string `yaml:"header"`
	// JSON is a dotted path to a number in a JSON response body, such as
	// usage.total_tokens; for a text/event-stream response, in the last
	// event carrying it.
	JSON string `yaml:"json"`
	// Estimate is reserved when the request arrives and replaced by the
	// real cost when the response ends; 0 means 1.
	Estimate int64 `yaml:"estimate"`
	// Policies are the route's policies whose cost is the usage (the
	// others cost 1); empty: every policy of the route's policies list.
	Policies []string `yaml:"policies"`
}

func defaultRatelimit() Ratelimit {
	return Ratelimit{Nodes: 1, RefreshInterval: 30 * time.Second, StoreTimeout: 250 * time.Millisecond, HotKeys: 100_000,
		MaxHolds: ratelimit.DefaultMaxHolds, MaxAPIKeyHolds: ratelimit.DefaultMaxOwnerHolds, MaxNodeHolds: ratelimit.DefaultMaxStoreHolds,
		MaxBlocks: limits.DefaultMaxBlocks}
}

// validate adds the rate limit and gateway problems to bad.
func (c Config) validateRatelimit(bad func(flag, format string, args ...any)) {
	r := c.Ratelimit
	if r.Nodes < 1 {
		bad("ratelimit-nodes", "must be at least 1")
	}
	if r.RefreshInterval < 100*time.Millisecond {
		bad("ratelimit-refresh", "must be at least 100ms")
	}
	if r.StoreTimeout <= 0 || r.StoreTimeout > 10*time.Second {
		bad("ratelimit-store-timeout", "must be between 1ns and 10s")
	}
	if r.HotKeys < 0 {
		bad("ratelimit-hot-keys", "must not be negative")
	}
	if r.MaxHolds < 1 {
		bad("ratelimit-max-holds", "must be at least 1")
	}
	if r.MaxAPIKeyHolds < 1 {
		bad("ratelimit-max-holds-per-api-key", "must be at least 1")
	}
	if r.MaxNodeHolds < 1 {
		bad("ratelimit-max-holds-per-node", "must be at least 1")
	}
	if r.MaxBlocks < 1 {
		bad("ratelimit-max-blocks", "must be at least 1")
	}
	seen := map[string]bool{}
	for i, p := range r.Policies {
		for _, f := range p.FieldErrors(fmt.Sprintf("ratelimit.policies[%d].", i)) {
			bad("config", "%s %s", f.Field, f.Detail)
		}
		if seen[p.Name] {
			bad("config", "ratelimit.policies[%d]: policy %q is defined twice", i, p.Name)
		}
		seen[p.Name] = true
	}
	g := c.Gateway
	if g.Listen == "" {
		return
	}
	if _, _, err := net.SplitHostPort(g.Listen); err != nil {
		bad("gateway-listen", "%q is not host:port", g.Listen)
	}
	if u, err := url.Parse(g.Upstream); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("gateway-upstream", "%q is not an http:// or https:// URL (required with --gateway-listen)", g.Upstream)
	}
	for i, rt := range g.Routes {
		if !strings.HasPrefix(rt.Path, "/") {
			bad("config", "gateway.routes[%d].path %q must start with /", i, rt.Path)
		}
		if (rt.AccountField == "") != (rt.AccountPolicy == "") {
			bad("config", "gateway.routes[%d]: account_field and account_policy go together", i)
		}
		if c := rt.CostFromResponse; c != nil && ((c.Header == "") == (c.JSON == "") || c.Estimate < 0) {
			bad("config", "gateway.routes[%d].cost_from_response needs exactly one of header and json, and an estimate of at least 0", i)
		}
		for _, st := range rt.CountStatuses {
			if st < 100 || st > 599 {
				bad("config", "gateway.routes[%d].count_statuses: %d is no HTTP status", i, st)
			}
		}
	}
}
