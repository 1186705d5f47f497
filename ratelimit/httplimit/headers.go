package httplimit

import (
	"net/http"
	"strconv"
	"strings"
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
	var pol, cur strings.Builder
	most := 0
	var retry time.Duration
	for i, q := range qs {
		if i > 0 {
			pol.WriteString(", ")
			cur.WriteString(", ")
		}
		name := sfString(q.Name)
		pol.WriteString(name)
		pol.WriteString(";q=")
		pol.WriteString(strconv.FormatInt(q.Limit, 10))
		pol.WriteString(";w=")
		pol.WriteString(strconv.FormatInt(max(1, Seconds(q.Window)), 10))
		cur.WriteString(name)
		cur.WriteString(";r=")
		cur.WriteString(strconv.FormatInt(q.Decision.Remaining, 10))
		cur.WriteString(";t=")
		cur.WriteString(strconv.FormatInt(Seconds(q.Decision.ResetAfter), 10))
		m := qs[most].Decision
		if d := q.Decision; d.Remaining < m.Remaining || (d.Remaining == m.Remaining && d.ResetAfter > m.ResetAfter) {
			most = i
		}
		if !q.Decision.Allowed {
			retry = max(retry, q.Decision.RetryAfter)
		}
	}
	// Keys in canonical form, assigned directly: these headers are set on
	// every checked request, and Set would canonicalize each one again.
	h["Ratelimit-Policy"] = []string{pol.String()}
	h["Ratelimit"] = []string{cur.String()}
	m := qs[most].Decision
	h["X-Ratelimit-Limit"] = []string{strconv.FormatInt(m.Limit, 10)}
	h["X-Ratelimit-Remaining"] = []string{strconv.FormatInt(m.Remaining, 10)}
	h["X-Ratelimit-Reset"] = []string{strconv.FormatInt(Seconds(m.ResetAfter), 10)}
	if retry > 0 {
		h["Retry-After"] = []string{strconv.FormatInt(Seconds(retry), 10)}
	}
}

// sfString writes s as a structured-field string: quoted, with '"' and
// '\' escaped and anything outside printable ASCII dropped.
func sfString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
