package main

import (
	"time"

	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/ratelimit"
)

// authFailureLimiter limits failed authentications to
// --auth-failures-per-minute per client on the node's counter store
// (Redis when configured, so the count holds across nodes), or returns
// nil when the setting is 0. The HTTP API and the gRPC key check
// (startEnvoy) each take one; as they share the policy name and the
// store, a client's failures on both count against one budget.
func (n *node) authFailureLimiter() (httpapi.AuthFailureLimiter, error) {
	per := int64(n.cfg.AuthFailures)
	if per <= 0 {
		return nil, nil
	}
	return ratelimit.NewPolicyLimiter(n.counters, ratelimit.Policy{
		Name: "auth_failures", Algorithm: ratelimit.TokenBucket, Limit: per, Period: time.Minute, Burst: per,
	})
}

// unknownEmailLinkLimiter limits lookups of unknown tracked email links
// (GET /e/{token}) to links.unknown_per_minute per client, as the
// shortener limits unknown codes, or returns nil when that is 0.
func (n *node) unknownEmailLinkLimiter() (httpapi.AuthFailureLimiter, error) {
	per := int64(n.cfg.Links.UnknownPerMinute)
	if per <= 0 {
		return nil, nil
	}
	return ratelimit.NewPolicyLimiter(n.counters, ratelimit.Policy{
		Name: "email_unknown", Algorithm: ratelimit.TokenBucket, Limit: per, Period: time.Minute, Burst: per,
	})
}
