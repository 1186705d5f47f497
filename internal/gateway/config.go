package gateway

import "time"

// Config is what the gateway limits and where it forwards. cmd/sluice fills
// it from the gateway section of Sluice's configuration (docs/gateway.md).
type Config struct {
	// Upstream is the URL admitted requests are forwarded to. Required.
	Upstream string
	// DefaultTier is the policy of known API keys not listed in Tiers;
	// default "free".
	DefaultTier string
	// AnonymousPolicy limits clients without a known API key, by IP;
	// default "free".
	AnonymousPolicy string
	// Tiers maps API keys to their tier's policy name.
	Tiers map[string]string
	// Global is the capacity limit shared by every client (load
	// shedding): refused requests get 503.
	Global Global
	// Routes choose the limits of each path; the longest matching prefix
	// wins. With none, every request gets its client's tier.
	Routes []Route
}

// Global is the gateway's load shedding limit. The zero value sheds
// nothing.
type Global struct {
	// Policy names the policy; empty disables load shedding.
	Policy string
	// MaxWait, if positive, lets a request refused only by the global
	// limit wait up to this long for capacity instead of getting 503.
	MaxWait time.Duration
}

// Route is the limits of the requests under one path prefix.
type Route struct {
	// Path is a path prefix, "/" for everything.
	Path string
	// Methods restricts the route to these methods; empty means all.
	Methods []string
	// Policies are checked keyed by the client's identity (a known API
	// key, else IP). "tier" stands for the client's tier. Nil: ["tier"];
	// an empty, non-nil list checks none of them.
	Policies []string
	// RequireKey refuses requests without a known API key (401).
	RequireKey bool
	// Streaming exempts the route from the listener's read and write
	// timeouts (server-sent events, long polls, large downloads).
	Streaming bool
	// IPPolicy, if set, is checked keyed by the client IP even when an API
	// key is present (login routes).
	IPPolicy string
	// AccountField names the JSON body field holding the target account,
	// checked under AccountPolicy (login routes).
	AccountField  string
	AccountPolicy string
	// CostFromResponse, if set, charges the route's usage policies what
	// the response says the request cost, when it ends.
	CostFromResponse *CostFromResponse
	// CountStatuses, if set, charges the route's checks only for responses
	// with these statuses (failed logins: 401, 403); other requests are
	// checked but never charged.
	CountStatuses []int
}

// CostFromResponse names where a response carries its request's cost.
type CostFromResponse struct {
	// Header is a response header (or trailer) holding the cost, such as
	// X-Usage-Tokens.
	Header string
	// JSON is a dotted path to a number in a JSON response body, such as
	// usage.total_tokens; for a text/event-stream response, in the last
	// event carrying it.
	JSON string
	// Estimate is reserved when the request arrives and replaced by the
	// real cost when the response ends. 0 means 1.
	Estimate int64
	// Policies are the route's policies whose cost is the usage (the
	// others cost 1). Empty: every policy of the route's policies list.
	Policies []string
}
