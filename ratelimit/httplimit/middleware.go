package httplimit

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// Limit is one check a request must pass: Cost (1 if zero) of Key under
// Policy, whose Name, Limit and Period the headers describe.
type Limit struct {
	Policy *ratelimit.Policy
	Key    string
	Cost   int64
}

// DefaultProblemBase prefixes the type of refusal problems.
const DefaultProblemBase = "https://sluice.dev/problems/"

// Middleware rate limits an http.Handler. Every response carries the
// RateLimit and X-RateLimit headers of the limits that applied. A client
// over its own quota gets 429 with Retry-After; a request refused only by
// the global capacity limit (load shedding) gets 503 with Retry-After, or
// waits up to MaxWait for capacity. Refusals are problem+json bodies whose
// type ends in quota-exceeded or temporary-reduced-capacity and which list
// violated-policies. The client's and the global checks are decided
// together and atomically: a refused request consumes nothing.
//
// Set the fields before serving; a Middleware is then safe for concurrent
// use.
type Middleware struct {
	// Limits returns the client's checks for r: its quota. Returning none
	// lets r through unchecked (unless Global refuses). Required.
	Limits func(r *http.Request) []Limit
	// Global, if set, returns the capacity checks shared by every client.
	Global func(r *http.Request) []Limit
	// MaxWait, if positive, lets a request refused by the global limits
	// alone wait up to this long for capacity instead of a 503. A client
	// over its own quota never waits.
	MaxWait time.Duration
	// Store decides the checks, with ratelimit.AllowAll. Required unless
	// Decide is set.
	Store ratelimit.Store
	// Decide, if set, replaces Store: it decides checks atomically and
	// returns one Decision per check, in order (the Sluice gateway uses it
	// to apply blocks and policy modes).
	Decide func(ctx context.Context, checks []Limit) ([]ratelimit.Decision, error)
	// OnError is called when deciding fails. If nil, the request goes
	// ahead: a broken limiter must not take the service down with it.
	OnError func(w http.ResponseWriter, r *http.Request, err error) (handled bool)
	// ProblemBase prefixes problem types. If empty, DefaultProblemBase.
	ProblemBase string
}

// Wrap returns next behind the limits.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var held *ratelimit.UsageReservation // concurrency leases (lease.go)
		// Deferred, so the slots are freed however the response ends: a
		// handler's panic too (httputil.ReverseProxy panics with
		// http.ErrAbortHandler when the client hangs up mid-response),
		// which goes on after.
		defer func() {
			if held != nil {
				_ = held.Cancel(context.WithoutCancel(r.Context()))
			}
		}()
		if m.admit(w, r, &held) {
			next.ServeHTTP(w, r)
		}
	})
}

// admit decides r, writing the headers, and the refusal when it refuses.
func (m *Middleware) admit(w http.ResponseWriter, r *http.Request, held **ratelimit.UsageReservation) bool {
	client := m.Limits(r)
	var global []Limit
	if m.Global != nil {
		global = m.Global(r)
	}
	all := append(client[:len(client):len(client)], global...)
	if len(all) == 0 {
		return true
	}
	var deadline time.Time
	for {
		ds, err := m.decide(r.Context(), all, held)
		if err != nil {
			if m.OnError != nil && m.OnError(w, r, err) {
				return false
			}
			return true
		}
		qs := make([]Quota, len(all))
		var overQuota, overCapacity []string
		var wait, quotaWait time.Duration
		for i, l := range all {
			qs[i] = QuotaOf(l.Policy, ds[i])
			switch {
			case ds[i].Allowed:
			case i < len(client):
				overQuota = append(overQuota, l.Policy.Name)
				quotaWait = max(quotaWait, ds[i].RetryAfter) // a key in debt: when the debt is repaid
			default:
				overCapacity = append(overCapacity, l.Policy.Name)
				wait = max(wait, ds[i].RetryAfter, time.Millisecond)
			}
		}
		h := w.Header()
		h.Del("Retry-After") // from an earlier round of waiting
		SetHeaders(h, qs)
		switch {
		case len(overQuota) > 0:
			m.refuse(w, r, http.StatusTooManyRequests, "quota-exceeded", "Too Many Requests",
				"the client is over its rate limit; retry after Retry-After seconds", overQuota, quotaWait)
			return false
		case len(overCapacity) == 0:
			return true
		}
		if m.MaxWait > 0 && deadline.IsZero() {
			deadline = time.Now().Add(m.MaxWait)
		}
		if m.MaxWait <= 0 || time.Until(deadline) < wait || !sleep(r.Context(), wait) {
			m.refuse(w, r, http.StatusServiceUnavailable, "temporary-reduced-capacity", "Service Unavailable",
				"the service is shedding load; retry after Retry-After seconds", overCapacity, wait)
			return false
		}
	}
}

func (m *Middleware) decide(ctx context.Context, ls []Limit, held **ratelimit.UsageReservation) ([]ratelimit.Decision, error) {
	if m.Decide != nil {
		return m.Decide(ctx, ls)
	}
	checks := make([]ratelimit.Check, len(ls))
	for i, l := range ls {
		checks[i] = ratelimit.Check{Policy: l.Policy, Key: l.Key, Cost: max(l.Cost, 1), Fixed: true}
	}
	if ds, ok, err := m.lease(ctx, checks, held); ok {
		return ds, err
	}
	_, ds, err := ratelimit.AllowAll(ctx, m.Store, checks)
	return ds, err
}

// sleep waits d, reporting false if ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// refusal is the problem+json body of a refusal.
type refusal struct {
	Type     string   `json:"type"`
	Title    string   `json:"title"`
	Status   int      `json:"status"`
	Detail   string   `json:"detail"`
	Instance string   `json:"instance,omitempty"`
	Violated []string `json:"violated-policies"`
	// RetryAfterMS is when the request would pass, in ms (Retry-After in
	// seconds, rounded up): for a key in debt after a usage charge, when
	// the debt is repaid.
	RetryAfterMS int64 `json:"retry_after_ms,omitempty"`
}

func (m *Middleware) refuse(w http.ResponseWriter, r *http.Request, status int, slug, title, detail string, violated []string, retry time.Duration) {
	base := m.ProblemBase
	if base == "" {
		base = DefaultProblemBase
	}
	body, _ := json.Marshal(refusal{Type: base + slug, Title: title, Status: status, Detail: detail,
		Instance: r.URL.Path, Violated: violated, RetryAfterMS: (retry + time.Millisecond - 1).Milliseconds()})
	h := w.Header()
	if h.Get("Retry-After") == "" {
		h.Set("Retry-After", "1")
	}
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
