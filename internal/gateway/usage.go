package gateway

import (
	"bytes"
	"context"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/httplimit"
)

// Usage-based limits in the gateway (docs/gateway.md, "Usage-based
// limits"): a route with cost_from_response reserves an estimate and
// settles it with the cost the response reports when it ends; a route
// with count_statuses charges only responses with those statuses; a
// concurrency policy's lease is released when the response ends.

// maxMetered bounds the body kept to find a JSON cost: a whole JSON body,
// or one server-sent event.
const maxMetered = 1 << 20

// settleTimeout bounds settling after the response ended.
const settleTimeout = 5 * time.Second

type usageKey struct{}

// usage is one request's reservation, from decide to the response's end.
type usage struct {
	route  Route
	routed bool
	id     string // the reservation, once decide took one
}

func usageFrom(ctx context.Context) *usage {
	u, _ := ctx.Value(usageKey{}).(*usage)
	return u
}

// withUsage gives each request its usage slot and, once the response has
// ended, settles the reservation decide took for it.
func (g *Gateway) withUsage(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := &usage{}
		u.route, u.routed = g.route(r)
		r = r.WithContext(context.WithValue(r.Context(), usageKey{}, u))
		m := &meter{ResponseWriter: w}
		if u.routed && u.route.CostFromResponse != nil {
			m.field = u.route.CostFromResponse.JSON
		}
		// Deferred: the reverse proxy aborts with a panic
		// (http.ErrAbortHandler) when the client hangs up mid-response,
		// and the leases must come back then too; the panic goes on.
		defer g.settle(r, u, m)
		next.ServeHTTP(m, r)
	})
}

// settle settles u's reservation, if decide took one, with the cost of
// the response in m, which has ended (or been aborted).
func (g *Gateway) settle(r *http.Request, u *usage, m *meter) {
	m.finish()
	if u.id == "" {
		return
	}
	cost := g.cost(u, m)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), settleTimeout)
	defer cancel()
	if _, err := g.svc.Settle(ctx, u.id, cost); err != nil {
		g.log.Warn("gateway could not settle a reservation; it keeps its estimate", slog.String("path", r.URL.Path), slog.Any("error", err))
	}
}

// counting reports whether u's route counts only some statuses.
func (u *usage) counting() bool { return u.routed && len(u.route.CountStatuses) > 0 }

// metered reports whether u's route takes its cost from the response.
func (u *usage) metered() bool { return u.routed && u.route.CostFromResponse != nil }

// usagePolicy reports whether l's cost comes from the response.
func (g *Gateway) usagePolicy(u *usage, l httplimit.Limit) bool {
	if !u.metered() {
		return false
	}
	if ps := u.route.CostFromResponse.Policies; len(ps) > 0 {
		return slices.Contains(ps, l.Policy.Name)
	}
	n := l.Policy.Name
	return n != u.route.IPPolicy && n != u.route.AccountPolicy && n != g.cfg.Global.Policy
}

// reserves reports whether decide must reserve ls rather than check them.
func (u *usage) reserves(ls []httplimit.Limit) bool {
	return u.metered() || u.counting() || slices.ContainsFunc(ls, func(l httplimit.Limit) bool { return l.Policy.Algorithm == ratelimit.Concurrency })
}

// reserve is decide for a request settled when its response ends.
func (g *Gateway) reserve(ctx context.Context, u *usage, ls []httplimit.Limit) ([]ratelimit.Decision, error) {
	reqs := make([]limits.UsageRequest, len(ls))
	for i, l := range ls {
		reqs[i] = limits.UsageRequest{CheckRequest: limits.CheckRequest{Policy: l.Policy.Name, Key: l.Key, Cost: max(l.Cost, 1)}, Fixed: true}
		if g.usagePolicy(u, l) {
			reqs[i].Cost = min(max(u.route.CostFromResponse.Estimate, 1), l.Policy.MaxCost())
			reqs[i].Fixed = false
		} else if u.counting() && !u.metered() {
			reqs[i].Fixed = false // charged 1 for a counted status, else nothing
		}
	}
	opts := ratelimit.UsageOptions{}
	if u.counting() {
		opts.Charge = ratelimit.ChargeOnSettle
	}
	_, results, res, err := g.svc.Reserve(ctx, reqs, opts)
	if err != nil {
		if apperr.Is(err, apperr.Invalid) || apperr.Is(err, apperr.NotFound) {
			g.log.Warn("gateway reservation refused by the rate limiter; request let through", slog.Any("error", err))
		}
		return nil, err
	}
	u.id = res.ID
	ds := make([]ratelimit.Decision, len(results))
	for i, r := range results {
		ds[i] = r.Verdict.Decision
	}
	return ds, nil
}

// cost is what u's request cost, from its response in m.
func (g *Gateway) cost(u *usage, m *meter) int64 {
	status := cmpOr(m.status, http.StatusOK)
	cost := int64(1)
	if u.metered() {
		c := u.route.CostFromResponse
		cost = max(c.Estimate, 1)
		switch v, st := responseCost(c, m); {
		case st == costFound:
			cost = v
		case st == costInvalid:
			g.unreadable(u.route.Path, unreadableInvalid)
		case m.unreadable != "":
			g.unreadable(u.route.Path, m.unreadable)
		}
	}
	if u.counting() && !slices.Contains(u.route.CountStatuses, status) {
		return 0
	}
	return cost
}

// unreadable counts a metered response whose cost could not be read.
func (g *Gateway) unreadable(route, reason string) {
	if g.onUnreadable != nil {
		g.onUnreadable(route, reason)
	}
}

func cmpOr(a, b int) int {
	if a == 0 {
		return b
	}
	return a
}

// responseCost reads the cost from the response's header (or trailer) or
// its JSON body.
func responseCost(c *CostFromResponse, m *meter) (int64, costState) {
	if c.Header != "" {
		return parseCost(m.Header().Get(c.Header))
	}
	if m.sse {
		return m.last, m.state
	}
	return fieldOf(m.buf.Bytes(), c.JSON)
}

// meter passes a response through, keeping its status and, when a JSON
// field holds the cost, the body (a JSON document) or the last
// server-sent event that carried the field.
type meter struct {
	http.ResponseWriter
	status int
	field  string
	sse    bool
	skip   bool // not JSON, or too long: nothing to find
	buf    bytes.Buffer
	last   int64
	state  costState // of the last event that carried the field
	// dec decodes a compressed body for the meter (decode.go); the
	// fields above are then its goroutine's until finish.
	dec        *decoder
	unreadable string // why the body could not be read, if it could not
}

func (m *meter) WriteHeader(code int) {
	if m.status == 0 && code >= 200 {
		m.status = code
		ct, _, _ := mime.ParseMediaType(m.Header().Get("Content-Type"))
		m.sse = ct == "text/event-stream"
		m.skip = m.field == "" || (!m.sse && ct != "application/json" && !strings.HasSuffix(ct, "+json"))
		if encs, ok := encodings(m.Header()); !m.skip && !ok {
			m.skip, m.unreadable = true, unreadableEncoding
		} else if !m.skip && len(encs) > 0 {
			m.dec = newDecoder(encs, m.consume)
		}
	}
	m.ResponseWriter.WriteHeader(code)
}

func (m *meter) Write(b []byte) (int, error) {
	if m.status == 0 {
		m.WriteHeader(http.StatusOK)
	}
	switch {
	case m.skip:
	case m.dec != nil:
		m.dec.write(b)
	case !m.consume(b):
		m.skip = true
	}
	return m.ResponseWriter.Write(b)
}

// consume meters b, the next bytes of the (decoded) body, reporting
// false when the rest is of no use: a JSON document over maxMetered.
func (m *meter) consume(b []byte) bool {
	m.buf.Write(b)
	if m.sse {
		m.events()
	}
	if m.buf.Len() > maxMetered {
		m.buf.Reset()
		if !m.sse {
			m.unreadable = unreadableTooLarge
			return false
		}
	}
	return true
}

// finish ends the metering once the response has ended (or was
// aborted): it waits for the decoder, if any.
func (m *meter) finish() {
	if m.dec != nil {
		if fail := m.dec.close(); fail != "" && m.unreadable == "" {
			m.unreadable = fail
		}
		m.dec = nil
	}
}

// events consumes the complete events in buf.
func (m *meter) events() {
	for {
		data := m.buf.Bytes()
		i, n := bytes.Index(data, []byte("\n\n")), 2
		if j := bytes.Index(data, []byte("\r\n\r\n")); j >= 0 && (i < 0 || j < i) {
			i, n = j, 4
		}
		if i < 0 {
			return
		}
		var payload []byte
		for line := range bytes.Lines(data[:i]) {
			line = bytes.TrimRight(line, "\r\n")
			if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				payload = append(append(payload, bytes.TrimPrefix(d, []byte(" "))...), '\n')
			}
		}
		if v, st := fieldOf(payload, m.field); st != costMissing {
			m.last, m.state = v, st
		}
		m.buf.Next(i + n)
	}
}

// Flush lets streamed responses through as they come.
func (m *meter) Flush() {
	if f, ok := m.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (m *meter) Unwrap() http.ResponseWriter { return m.ResponseWriter }
