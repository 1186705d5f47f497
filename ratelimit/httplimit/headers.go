package httplimit

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// Quota is one policy that applied to a request, as the headers describe
// it: Limit requests per Window under the name Name, and the Decision made.
type Quota struct {
	Name     string
	Limit    int64
	Window   time.Duration
	Decision ratelimit.Decision
}

// QuotaOf describes p and d.
func QuotaOf(p *ratelimit.Policy, d ratelimit.Decision) Quota {
	return Quota{Name: p.Name, Limit: p.Limit, Window: p.Period, Decision: d}
}

// Seconds rounds d up to whole seconds, as Retry-After and the RateLimit
// headers count them: a client told 0 while it must still wait would
// retry too early.
func Seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// SetHeaders sets, for the quotas that applied to one request, the IETF
// httpapi draft's structured fields (draft -10 and later) with one list
// member per quota,
//
//	RateLimit-Policy: "free";q=60;w=60
//	RateLimit: "free";r=59;t=1
//
// and X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset
// (seconds) for the most constrained quota: the one with the least
// remaining, the latest reset breaking ties. It also sets Retry-After
// (whole seconds, rounded up) when any quota refused. Nothing is set for no
// quotas.
func SetHeaders(h http.Header, qs []Quota) {
	if len(qs) == 0 {
		return
	}
	// Every value is appended to one buffer and sliced from one string,
	// and the header slices share one array: these headers are set on
	// every checked request, and building each value on its own cost a
	// dozen allocations.
	var stack [256]byte
	b := stack[:0]
	most := 0
	var retry time.Duration
	for i, q := range qs {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendSFString(b, q.Name)
		b = append(b, ";q="...)
		b = strconv.AppendInt(b, q.Limit, 10)
		b = append(b, ";w="...)
		b = strconv.AppendInt(b, max(1, Seconds(q.Window)), 10)
		m := qs[most].Decision
		if d := q.Decision; d.Remaining < m.Remaining || (d.Remaining == m.Remaining && d.ResetAfter > m.ResetAfter) {
			most = i
		}
		if !q.Decision.Allowed {
			retry = max(retry, q.Decision.RetryAfter)
		}
	}
	var ends [6]int
	ends[0] = len(b)
	for i, q := range qs {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendSFString(b, q.Name)
		b = append(b, ";r="...)
		b = strconv.AppendInt(b, q.Decision.Remaining, 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, Seconds(q.Decision.ResetAfter), 10)
	}
	ends[1] = len(b)
	m := qs[most].Decision
	b = strconv.AppendInt(b, m.Limit, 10)
	ends[2] = len(b)
	b = strconv.AppendInt(b, m.Remaining, 10)
	ends[3] = len(b)
	b = strconv.AppendInt(b, Seconds(m.ResetAfter), 10)
	ends[4] = len(b)
	n := 5
	if retry > 0 {
		b = strconv.AppendInt(b, Seconds(retry), 10)
		ends[5] = len(b)
		n = 6
	}
	all := string(b)
	vals := make([]string, n)
	for i, from := 0, 0; i < n; i++ {
		vals[i], from = all[from:ends[i]], ends[i]
	}
	// Keys in canonical form, assigned directly: Set would canonicalize
	// each one again. Each slice is capped so that an Add appends to a
	// copy, not to its neighbour.
	h["Ratelimit-Policy"] = vals[0:1:1]
	h["Ratelimit"] = vals[1:2:2]
	h["X-Ratelimit-Limit"] = vals[2:3:3]
	h["X-Ratelimit-Remaining"] = vals[3:4:4]
	h["X-Ratelimit-Reset"] = vals[4:5:5]
	if retry > 0 {
		h["Retry-After"] = vals[5:6:6]
	}
}

// appendSFString appends s as a structured-field string: quoted, with '"'
// and '\' escaped and anything outside printable ASCII dropped.
func appendSFString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c >= 0x20 && c < 0x7f:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
