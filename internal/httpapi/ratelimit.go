package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/httplimit"
)

// Ratelimiter is what the rate limit routes need: *limits.Service.
type Ratelimiter interface {
	Check(ctx context.Context, reqs []limits.CheckRequest) (bool, []limits.Result, error)
	Peek(ctx context.Context, policy, key string) (limits.Result, error)
	Reset(ctx context.Context, policy, key string) error
	Policy(name string) (limits.NamedPolicy, limits.Source, error)
	Policies() ([]limits.NamedPolicy, []limits.Source)
	PutPolicy(ctx context.Context, p limits.NamedPolicy) (bool, error)
	DeletePolicy(ctx context.Context, name string) error
	BlockKey(ctx context.Context, req limits.BlockRequest) (limits.Block, error)
	Blocks() []limits.Block
	Unblock(ctx context.Context, key string, policy, domain *string) error
}

func (s *Server) registerRatelimit() {
	rl := withService(s.opts.Ratelimit, "rate limiting is not enabled on this server")
	s.Handle("POST /v1/ratelimit/check", auth.ScopeRatelimitCheck, rl(s.check))
	s.Handle("POST /v1/ratelimit/settle", auth.ScopeRatelimitCheck, rl(settle))
	s.Handle("POST /v1/ratelimit/simulate", auth.ScopeRatelimitCheck, rl(s.simulate))
	s.Handle("GET /v1/ratelimit/policies", auth.ScopeRatelimitCheck, rl(listPolicies))
	s.Handle("GET /v1/ratelimit/policies/{name}", auth.ScopeRatelimitCheck, rl(getPolicy))
	s.Handle("PUT /v1/ratelimit/policies/{name}", auth.ScopeAdmin, rl(putPolicy))
	s.Handle("DELETE /v1/ratelimit/policies/{name}", auth.ScopeAdmin, rl(deletePolicy))
	s.Handle("POST /v1/ratelimit/blocks", auth.ScopeAdmin, rl(createBlock))
	s.Handle("GET /v1/ratelimit/blocks", auth.ScopeAdmin, rl(listBlocks))
	s.Handle("DELETE /v1/ratelimit/blocks/{key}", auth.ScopeAdmin, rl(deleteBlock))
	s.Handle("GET /v1/ratelimit/keys/{policy}/{key}", auth.ScopeRatelimitCheck, rl(getKey))
	s.Handle("DELETE /v1/ratelimit/keys/{policy}/{key}", auth.ScopeAdmin, rl(resetKey))
}

// checkItem is one check; Cost is a pointer so that an absent cost (1) and
// an explicit 0 (refused) differ.
type checkItem struct {
	Policy string `json:"policy"`
	Key    string `json:"key"`
	Cost   *int64 `json:"cost"`
	// Reserve false, in a reservation, makes this check's cost final.
	Reserve *bool `json:"reserve,omitempty"`
}

type checkBody struct {
	checkItem
	Checks []checkItem `json:"checks"`
	usageFields
}

// decisionJSON is a decision on the wire.
type decisionJSON struct {
	Allowed      bool  `json:"allowed"`
	Limit        int64 `json:"limit"`
	Remaining    int64 `json:"remaining"`
	RetryAfterMS int64 `json:"retry_after_ms"`
	ResetAfterMS int64 `json:"reset_after_ms"`
	WouldRefuse  bool  `json:"would_refuse,omitempty"`
}

type resultJSON struct {
	Policy string `json:"policy"`
	Key    string `json:"key"`
	decisionJSON
	DecidedBy string `json:"decided_by"`
}

type checkResponse struct {
	decisionJSON
	DecidedBy string       `json:"decided_by,omitempty"`
	Results   []resultJSON `json:"results,omitempty"`
	reservationJSON
}

// millis rounds up, so a client waiting retry_after_ms is never early.
func millis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

func toDecisionJSON(d limits.Verdict) decisionJSON {
	return decisionJSON{Allowed: d.Allowed, Limit: d.Limit, Remaining: d.Remaining,
		RetryAfterMS: millis(d.RetryAfter), ResetAfterMS: millis(d.ResetAfter), WouldRefuse: d.WouldRefuse}
}

func (s *Server) check(rl Ratelimiter, w http.ResponseWriter, r *http.Request) error {
	body, err := decodeCheck(r)
	if err != nil {
		return err
	}
	single := body.Checks == nil
	items := body.Checks
	if single {
		items = []checkItem{body.checkItem}
	} else if body.Policy != "" || body.Key != "" || body.Cost != nil {
		return apperr.New(apperr.Invalid, "send either policy, key and cost, or checks, not both")
	}
	reqs := make([]limits.CheckRequest, len(items))
	for i, it := range items {
		reqs[i] = limits.CheckRequest{Policy: it.Policy, Key: it.Key, Cost: 1}
		if it.Cost != nil {
			reqs[i].Cost = *it.Cost
		}
	}
	if mode, err := usageMode(rl, body, items); err != nil {
		return err
	} else if mode != "" {
		return checkUsage(rl, w, r, body, items, reqs, mode)
	}
	allowed, results, err := rl.Check(r.Context(), reqs)
	if err != nil {
		return err
	}
	writeCheck(w, single, allowed, results, reservationJSON{})
	return nil
}

// decodeCheck reads a check body: the common shapes through
// decodeCheckFast, anything else through the strict decoder.
func decodeCheck(r *http.Request) (checkBody, error) {
	buf, err := readBody(r)
	if err != nil {
		return checkBody{}, err
	}
	defer putBody(buf)
	if body, ok := decodeCheckFast(buf.Bytes()); ok {
		return body, nil
	}
	var body checkBody
	err = decodeBody(buf.Bytes(), &body)
	return body, err
}

// writeCheck answers a check.
func writeCheck(w http.ResponseWriter, single, allowed bool, results []limits.Result, res reservationJSON) {
	setRateLimitHeaders(w.Header(), results)
	var combined ratelimit.Decision
	if len(results) == 1 {
		combined = results[0].Verdict.Decision // Combine of one, without its slice
	} else {
		ds := make([]ratelimit.Decision, len(results))
		for i, res := range results {
			ds[i] = res.Verdict.Decision
		}
		combined = ratelimit.Combine(ds)
	}
	out := checkResponse{decisionJSON: toDecisionJSON(limits.Verdict{Decision: combined})}
	out.Allowed = allowed
	for _, res := range results {
		out.WouldRefuse = out.WouldRefuse || res.WouldRefuse
		if res.DecidedBy == limits.ByBlock {
			out.DecidedBy = limits.ByBlock
		}
	}
	if single {
		out.DecidedBy = results[0].DecidedBy
	} else {
		out.Results = make([]resultJSON, len(results))
		for i, res := range results {
			out.Results[i] = resultJSON{Policy: res.Policy, Key: res.Key, decisionJSON: toDecisionJSON(res.Verdict), DecidedBy: res.DecidedBy}
		}
	}
	if !allowed {
		out.RetryAfterMS = max(out.RetryAfterMS, 1)
	}
	out.reservationJSON = res
	writeCheckResponse(w, &out)
}

// setRateLimitHeaders sets the RateLimit and X-RateLimit headers for the
// policies of a check.
func setRateLimitHeaders(h http.Header, results []limits.Result) {
	if len(results) == 1 {
		res := &results[0]
		qs := [1]httplimit.Quota{{Name: res.Policy, Limit: res.Quota, Window: res.Window, Decision: res.Verdict.Decision}}
		httplimit.SetHeaders(h, qs[:])
		return
	}
	qs := make([]httplimit.Quota, len(results))
	for i, res := range results {
		qs[i] = httplimit.Quota{Name: res.Policy, Limit: res.Quota, Window: res.Window, Decision: res.Verdict.Decision}
	}
	httplimit.SetHeaders(h, qs)
}

type keyStateJSON struct {
	Policy string `json:"policy"`
	Key    string `json:"key"`
	decisionJSON
	Blocked   bool       `json:"blocked"`
	DecidedBy string     `json:"decided_by"`
	Block     *blockJSON `json:"block,omitempty"`
}

func getKey(rl Ratelimiter, w http.ResponseWriter, r *http.Request) error {
	res, err := rl.Peek(r.Context(), r.PathValue("policy"), r.PathValue("key"))
	if err != nil {
		return err
	}
	out := keyStateJSON{Policy: res.Policy, Key: res.Key, decisionJSON: toDecisionJSON(res.Verdict),
		Blocked: res.DecidedBy == limits.ByBlock, DecidedBy: res.DecidedBy}
	if res.Block != nil {
		b := toBlockJSON(*res.Block)
		out.Block = &b
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func resetKey(rl Ratelimiter, w http.ResponseWriter, r *http.Request) error {
	if err := rl.Reset(r.Context(), r.PathValue("policy"), r.PathValue("key")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
