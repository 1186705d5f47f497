package envoyrls

import (
	"math"
	"strconv"
	"strings"
	"time"

	corepb "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/ratelimit"
)

// decision returns the decision of a limited item.
func (c *call) decision(it *item) ratelimit.Decision {
	if it.kind != charge {
		return it.d
	}
	// A check that would pass in a refused step was not charged, and its
	// decision says so already: the store reports the key as it is
	// (ratelimit.Store.AllowMulti).
	return c.checks[it.check].d
}

// newResponse returns an OK response with n OK statuses, allocated
// together.
func newResponse(n int) *rlspb.RateLimitResponse {
	resp := &rlspb.RateLimitResponse{
		OverallCode: rlspb.RateLimitResponse_OK,
		Statuses:    make([]*rlspb.RateLimitResponse_DescriptorStatus, n),
	}
	sts := make([]rlspb.RateLimitResponse_DescriptorStatus, n)
	for i := range sts {
		sts[i].Code = rlspb.RateLimitResponse_OK
		resp.Statuses[i] = &sts[i]
	}
	return resp
}

// respond fills resp from a decided call and counts it in metrics: ser
// is the domain's series (nil for an unconfigured domain, whose
// descriptors are all unlimited or blocked), blockedC the counter of its
// blocked descriptors.
func (s *Server) respond(c *call, resp *rlspb.RateLimitResponse, ser *series, blockedC prometheus.Counter) {
	var worst *item
	var worstD ratelimit.Decision
	var durs []durationpb.Duration
	var shownBuf [4]shown
	list := shownBuf[:0] // the descriptors the RateLimit headers describe
	for i := range c.items {
		it := &c.items[i]
		st := resp.Statuses[i]
		if it.kind == noLimit {
			continue
		}
		if it.kind == blocked {
			// Over whatever the counters say: the limit that would apply,
			// none left, and the block's end as the reset.
			blockedC.Inc()
			st.Code = rlspb.RateLimitResponse_OVER_LIMIT
			resp.OverallCode = rlspb.RateLimitResponse_OVER_LIMIT
			if it.rule != nil {
				st.CurrentLimit = it.rule.limit
			}
			if durs == nil {
				durs = make([]durationpb.Duration, len(c.items))
			}
			durs[i].Seconds = ceilSeconds(it.d.RetryAfter)
			st.DurationUntilReset = &durs[i]
			if worst == nil || tighter(it.d, worstD) {
				worst, worstD = it, it.d
			}
			if it.rule != nil {
				list = show(list, it.rule, it.d)
			}
			continue
		}
		m := ser
		if it.rule.detailed {
			m = s.m.detailedSeries(ser.domain, descriptorPath(ser.domain, it.desc.Entries))
		}
		m.requests.Inc()
		if it.kind == unlimited {
			st.LimitRemaining = math.MaxUint32
			continue
		}
		d := c.decision(it)
		st.CurrentLimit = it.rule.limit
		st.LimitRemaining = uint32(min(max(d.Remaining, 0), math.MaxUint32))
		if durs == nil {
			durs = make([]durationpb.Duration, len(c.items))
		}
		durs[i].Seconds = ceilSeconds(resetOf(d))
		st.DurationUntilReset = &durs[i]
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
		if !it.rule.shadow {
			if worst == nil || tighter(d, worstD) {
				worst, worstD = it, d
			}
			list = show(list, it.rule, d)
		}
	}
	switch {
	case worst == nil:
	case worst.rule == nil: // blocked, no limit to describe
		resp.ResponseHeadersToAdd = []*corepb.HeaderValue{{Key: "Retry-After",
			Value: strconv.FormatInt(max(1, ceilSeconds(worstD.RetryAfter)), 10)}}
	default:
		resp.ResponseHeadersToAdd = headers(list, worst.rule, worstD, resp.OverallCode == rlspb.RateLimitResponse_OVER_LIMIT)
	}
}

// shown is a descriptor's limit as the RateLimit headers describe it.
type shown struct {
	rule *rule
	d    ratelimit.Decision
}

// show adds rule's decision d to list, keeping the tighter one of a rule
// listed already (one descriptor sent twice).
func show(list []shown, r *rule, d ratelimit.Decision) []shown {
	for i := range list {
		if list[i].rule == r {
			if tighter(d, list[i].d) {
				list[i].d = d
			}
			return list
		}
	}
	return append(list, shown{r, d})
}

// failOpen answers every descriptor OK after a store failure, keeping the
// limits that would have applied but no counts.
func (s *Server) failOpen(c *call, resp *rlspb.RateLimitResponse) {
	for i := range c.items {
		it := &c.items[i]
		st := resp.Statuses[i]
		switch it.kind {
		case noLimit:
		case unlimited:
			st.LimitRemaining = math.MaxUint32
		default:
			st.CurrentLimit = it.rule.limit
		}
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
// and later), one list member per limited descriptor of list, and the
// widespread X-RateLimit-* for the most constrained one, worst (rule r,
// decision d), plus Retry-After when the request is refused. On a refusal
// nothing was charged, so each descriptor's r is what remains of it.
func headers(list []shown, r *rule, d ratelimit.Decision, refused bool) []*corepb.HeaderValue {
	remaining := strconv.FormatInt(max(d.Remaining, 0), 10)
	secs := ceilSeconds(resetOf(d))
	reset := strconv.FormatInt(secs, 10)
	n := 5
	if refused {
		n = 6
	}
	hv := make([]corepb.HeaderValue, n) // one allocation for all of them
	if len(list) == 1 {
		hv[0].Key, hv[0].Value = "RateLimit-Policy", r.hdrPolicy
		hv[1].Key, hv[1].Value = "RateLimit", r.hdrName+";r="+remaining+";t="+reset
	} else {
		var pol, cur strings.Builder
		for i, sh := range list {
			if i > 0 {
				pol.WriteString(", ")
				cur.WriteString(", ")
			}
			pol.WriteString(sh.rule.hdrPolicy)
			cur.WriteString(sh.rule.hdrName)
			cur.WriteString(";r=")
			cur.WriteString(strconv.FormatInt(max(sh.d.Remaining, 0), 10))
			cur.WriteString(";t=")
			cur.WriteString(strconv.FormatInt(ceilSeconds(resetOf(sh.d)), 10))
		}
		hv[0].Key, hv[0].Value = "RateLimit-Policy", pol.String()
		hv[1].Key, hv[1].Value = "RateLimit", cur.String()
	}
	hv[2].Key, hv[2].Value = "X-RateLimit-Limit", r.hdrLimit
	hv[3].Key, hv[3].Value = "X-RateLimit-Remaining", remaining
	hv[4].Key, hv[4].Value = "X-RateLimit-Reset", reset
	if refused {
		hv[5].Key, hv[5].Value = "Retry-After", strconv.FormatInt(max(1, secs), 10)
	}
	out := make([]*corepb.HeaderValue, n)
	for i := range hv {
		out[i] = &hv[i]
	}
	return out
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
