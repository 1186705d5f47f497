package envoyrls

import (
	"math"
	"strconv"
	"strings"
	"time"

	corepb "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/ratelimit"
)

// decision returns the decision of a limited item.
func (c *call) decision(it *item) ratelimit.Decision {
	if it.kind != charge {
		return it.d
	}
	p := &c.checks[it.check]
	d := p.d
	if p.dry && d.Allowed {
		// Nothing was charged: show the allowance as it is, not as the
		// refused request would have left it.
		d.Remaining = min(d.Limit, d.Remaining+p.check.Cost)
	}
	return d
}

// respond fills resp from a decided call and counts it in metrics.
func (s *Server) respond(c *call, resp *rlspb.RateLimitResponse, ser *series) {
	var worst *item
	var worstD ratelimit.Decision
	for i := range c.items {
		it := &c.items[i]
		st := &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK}
		resp.Statuses[i] = st
		if it.kind == noLimit {
			continue
		}
		m := ser
		if it.rule.detailed {
			m = s.m.series(ser.domain, descriptorPath(ser.domain, it.desc.Entries))
		}
		m.requests.Inc()
		if it.kind == unlimited {
			st.LimitRemaining = math.MaxUint32
			continue
		}
		d := c.decision(it)
		st.CurrentLimit = it.rule.limit
		st.LimitRemaining = uint32(min(max(d.Remaining, 0), math.MaxUint32))
		st.DurationUntilReset = &durationpb.Duration{Seconds: ceilSeconds(resetOf(d))}
		over := !d.Allowed
		switch {
		case over && it.rule.shadow:
			m.shadowOver.Inc()
		case over:
			m.overLimit.Inc()
			st.Code = rlspb.RateLimitResponse_OVER_LIMIT
			resp.OverallCode = rlspb.RateLimitResponse_OVER_LIMIT
		case c.passed && it.kind == charge && float64(d.Limit-d.Remaining) > s.nearRatio*float64(d.Limit):
			m.nearLimit.Inc()
		}
		if !it.rule.shadow && (worst == nil || tighter(d, worstD)) {
			worst, worstD = it, d
		}
	}
	if worst != nil {
		resp.ResponseHeadersToAdd = headers(worst.rule, worstD, resp.OverallCode == rlspb.RateLimitResponse_OVER_LIMIT)
	}
}

// failOpen answers every descriptor OK after a store failure, keeping the
// limits that would have applied but no counts.
func (s *Server) failOpen(c *call, resp *rlspb.RateLimitResponse) {
	for i := range c.items {
		it := &c.items[i]
		st := &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK}
		switch it.kind {
		case noLimit:
		case unlimited:
			st.LimitRemaining = math.MaxUint32
		default:
			st.CurrentLimit = it.rule.limit
		}
		resp.Statuses[i] = st
	}
}

// tighter reports whether a constrains the client more than b: refused
// before allowed, then less remaining, then a longer wait.
func tighter(a, b ratelimit.Decision) bool {
	if a.Allowed != b.Allowed {
		return !a.Allowed
	}
	if a.Remaining != b.Remaining {
		return a.Remaining < b.Remaining
	}
	return resetOf(a) > resetOf(b)
}

// resetOf is when the descriptor's limit next lets the client in: the wait
// before a retry for a refusal, the time until the full allowance is back
// otherwise.
func resetOf(d ratelimit.Decision) time.Duration {
	if !d.Allowed && d.RetryAfter > 0 {
		return d.RetryAfter
	}
	return d.ResetAfter
}

// ceilSeconds rounds d up to whole seconds.
func ceilSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// headers are the IETF RateLimit-Policy and RateLimit fields (draft -10
// and later) and the widespread X-RateLimit-* for the most constrained
// descriptor, plus Retry-After when the request is refused.
func headers(r *rule, d ratelimit.Decision, refused bool) []*corepb.HeaderValue {
	name := sfString(r.name)
	remaining := strconv.FormatInt(max(d.Remaining, 0), 10)
	reset := strconv.FormatInt(ceilSeconds(resetOf(d)), 10)
	limit := strconv.FormatUint(uint64(r.rpu), 10)
	window := strconv.FormatInt(int64(r.period()/time.Second), 10)
	h := []*corepb.HeaderValue{
		{Key: "RateLimit-Policy", Value: name + ";q=" + limit + ";w=" + window},
		{Key: "RateLimit", Value: name + ";r=" + remaining + ";t=" + reset},
		{Key: "X-RateLimit-Limit", Value: limit},
		{Key: "X-RateLimit-Remaining", Value: remaining},
		{Key: "X-RateLimit-Reset", Value: reset},
	}
	if refused {
		h = append(h, &corepb.HeaderValue{Key: "Retry-After", Value: strconv.FormatInt(max(1, ceilSeconds(resetOf(d))), 10)})
	}
	return h
}

// sfString quotes s as a structured field string (RFC 9651): printable
// ASCII only, with '"' and '\' escaped; other bytes become '?'.
func sfString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case ch == '"' || ch == '\\':
			b.WriteByte('\\')
			b.WriteByte(ch)
		case ch < 0x20 || ch > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteByte(ch)
		}
	}
	b.WriteByte('"')
	return b.String()
}
