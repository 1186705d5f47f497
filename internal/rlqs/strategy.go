package rlqs

import (
	"math"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/internal/envoyrls"
	"github.com/sluicehq/sluice/ratelimit"
)

// envoyUnits are the rule units Envoy's RateLimitUnit can name. It has no
// week: a weekly fixed window is assigned as a token bucket.
var envoyUnits = map[rlspb.RateLimitResponse_RateLimit_Unit]typev3.RateLimitUnit{
	rlspb.RateLimitResponse_RateLimit_SECOND: typev3.RateLimitUnit_SECOND,
	rlspb.RateLimitResponse_RateLimit_MINUTE: typev3.RateLimitUnit_MINUTE,
	rlspb.RateLimitResponse_RateLimit_HOUR:   typev3.RateLimitUnit_HOUR,
	rlspb.RateLimitResponse_RateLimit_DAY:    typev3.RateLimitUnit_DAY,
	rlspb.RateLimitResponse_RateLimit_MONTH:  typev3.RateLimitUnit_MONTH,
	rlspb.RateLimitResponse_RateLimit_YEAR:   typev3.RateLimitUnit_YEAR,
}

// blanket is a strategy admitting or refusing everything.
func blanket(r typev3.RateLimitStrategy_BlanketRule) *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: r}}
}

// limited is the strategy giving a client share requests per period of l
// (l.RequestsPerUnit > 0, share > 0):
//
//   - token_bucket and gcra rules: a token bucket refilled at the share's
//     rate, holding the share's part of the rule's burst (at least 1);
//   - fixed and sliding windows: requests_per_time_unit of the share,
//     rounded down, per the rule's unit; when that is under 1, or the unit
//     is a week (which Envoy cannot name), a token bucket of the same rate
//     holding the share rounded down (at least 1).
//
// Rates are rounded down (fill intervals up), so the shares of a bucket's
// clients never add up to more than the rule allows per period; only the
// bucket sizes' minimum of 1 token can pass it, by at most one request per
// client at once.
func limited(l envoyrls.Limit, share float64) *typev3.RateLimitStrategy {
	limit := float64(l.RequestsPerUnit)
	if l.Algorithm != ratelimit.TokenBucket && l.Algorithm != ratelimit.GCRA {
		if u, ok := envoyUnits[l.Unit]; ok && share >= 1 {
			return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_RequestsPerTimeUnit_{
				RequestsPerTimeUnit: &typev3.RateLimitStrategy_RequestsPerTimeUnit{
					RequestsPerTimeUnit: uint64(math.Floor(share)), TimeUnit: u}}}
		}
		return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{
			TokenBucket: tokenBucket(share, l.Period, max(1, math.Floor(share)))}}
	}
	burst := math.Floor(float64(l.Burst) * share / limit)
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{
		TokenBucket: tokenBucket(share, l.Period, max(1, burst))}}
}

// tokenBucket refills rate tokens per period: the whole part of the rate
// (at least 1) per fill, every fill interval rounded up to the nanosecond.
func tokenBucket(rate float64, period time.Duration, maxTokens float64) *typev3.TokenBucket {
	perFill := max(1, min(math.Floor(rate), math.MaxUint32))
	interval := math.Ceil(perFill * float64(period) / rate)
	interval = min(interval, float64(math.MaxInt64/2))
	return &typev3.TokenBucket{
		MaxTokens:     uint32(min(maxTokens, math.MaxUint32)),
		TokensPerFill: wrapperspb.UInt32(uint32(perFill)),
		FillInterval:  durationpb.New(time.Duration(interval)),
	}
}

// assign is a quota assignment of strategy to id for ttl.
func assign(id *rlqspb.BucketId, strategy *typev3.RateLimitStrategy, ttl time.Duration) *rlqspb.RateLimitQuotaResponse_BucketAction {
	return &rlqspb.RateLimitQuotaResponse_BucketAction{
		BucketId: id,
		BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{
			QuotaAssignmentAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
				AssignmentTimeToLive: durationpb.New(ttl),
				RateLimitStrategy:    strategy,
			}},
	}
}

// abandon tells the client to forget id.
func abandon(id *rlqspb.BucketId) *rlqspb.RateLimitQuotaResponse_BucketAction {
	return &rlqspb.RateLimitQuotaResponse_BucketAction{
		BucketId: id,
		BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_AbandonAction_{
			AbandonAction: &rlqspb.RateLimitQuotaResponse_BucketAction_AbandonAction{}},
	}
}
