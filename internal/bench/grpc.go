package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// RLSRequests builds n Envoy rate limit requests in domain, each with
// perCall descriptors of one entry {key, "bench-<i>"}, the values spread
// over n, so the server keeps n counters. Envoy sends one descriptor per
// matching rate limit action; callers that batch send many.
func RLSRequests(domain, key string, n, perCall int) []*rlspb.RateLimitRequest {
	reqs := make([]*rlspb.RateLimitRequest, n)
	for i := range reqs {
		ds := make([]*commonpb.RateLimitDescriptor, max(1, perCall))
		for j := range ds {
			ds[j] = &commonpb.RateLimitDescriptor{Entries: []*commonpb.RateLimitDescriptor_Entry{
				{Key: key, Value: "bench-" + strconv.Itoa((i*len(ds)+j)%max(n, len(ds)))},
			}}
		}
		reqs[i] = &rlspb.RateLimitRequest{Domain: domain, Descriptors: ds}
	}
	return reqs
}

// ShouldRateLimit returns operations that call ShouldRateLimit with
// reqs[seq % len(reqs)]. OVER_LIMIT answers count in over: a refusal is an
// answer, not an error.
func ShouldRateLimit(c rlspb.RateLimitServiceClient, reqs []*rlspb.RateLimitRequest, over *atomic.Int64) func(worker int) Op {
	return func(int) Op {
		return func(ctx context.Context, seq int64) error {
			resp, err := c.ShouldRateLimit(ctx, reqs[seq%int64(len(reqs))])
			if err != nil {
				return err
			}
			switch resp.GetOverallCode() {
			case rlspb.RateLimitResponse_OK:
			case rlspb.RateLimitResponse_OVER_LIMIT:
				over.Add(1)
			default:
				return fmt.Errorf("ShouldRateLimit answered %v", resp.GetOverallCode())
			}
			return nil
		}
	}
}
