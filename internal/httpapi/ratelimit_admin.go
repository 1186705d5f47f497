package httpapi

import (
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
)

// policyBody is a policy on the wire. Period is a string parsed here so a
// bad one is a 422 naming the field, not a JSON syntax error.
type policyBody struct {
	Name           string `json:"name"`
	Algorithm      string `json:"algorithm"`
	Limit          int64  `json:"limit"`
	Period         string `json:"period"`
	Burst          int64  `json:"burst"`
	Mode           string `json:"mode,omitempty"`
	BurstOver      int64  `json:"burst_over"`
	OnStoreFailure string `json:"on_store_failure,omitempty"`
	Sync           string `json:"sync,omitempty"`
	SyncInterval   string `json:"sync_interval,omitempty"`
	Description    string `json:"description,omitempty"`
	MaxDebt        int64  `json:"max_debt,omitempty"`
	Source         string `json:"source,omitempty"` // responses only
}

// toPolicy converts b, naming bad fields with prefix.
func (b policyBody) toPolicy(prefix string) (limits.NamedPolicy, error) {
	p := limits.NamedPolicy{Name: b.Name, Algorithm: ratelimit.Algorithm(b.Algorithm), Limit: b.Limit, Burst: b.Burst,
		Mode: limits.Mode(b.Mode), BurstOver: b.BurstOver, OnStoreFailure: limits.Failure(b.OnStoreFailure),
		Sync: limits.Sync(b.Sync), Description: b.Description, MaxDebt: b.MaxDebt}
	var fe []apperr.FieldError
	if b.Source != "" {
		fe = append(fe, apperr.FieldError{Field: prefix + "source", Detail: "is set by the server"})
	}
	periodBad := true
	if b.Period == "" {
		fe = append(fe, apperr.FieldError{Field: prefix + "period", Detail: "is required, e.g. \"1m\""})
	} else if d, err := limits.ParsePeriod(b.Period); err != nil {
		fe = append(fe, apperr.FieldError{Field: prefix + "period", Detail: err.Error()})
	} else {
		p.Period, periodBad = d, false
	}
	if b.SyncInterval != "" {
		if d, err := limits.ParsePeriod(b.SyncInterval); err != nil {
			fe = append(fe, apperr.FieldError{Field: prefix + "sync_interval", Detail: err.Error()})
		} else {
			p.SyncInterval = d
		}
	}
	p = p.Normalize()
	for _, f := range p.FieldErrors(prefix) {
		if !periodBad || f.Field != prefix+"period" {
			fe = append(fe, f)
		}
	}
	return p, apperr.Fields(apperr.Unprocessable, "the policy is invalid", fe)
}

func toPolicyBody(p limits.NamedPolicy, src limits.Source) policyBody {
	b := policyBody{Name: p.Name, Algorithm: string(p.Algorithm), Limit: p.Limit, Period: p.Period.String(),
		Burst: p.Burst, Mode: string(p.Mode), BurstOver: p.BurstOver, OnStoreFailure: string(p.OnStoreFailure),
		Sync: string(p.Sync), Description: p.Description, MaxDebt: p.MaxDebt, Source: string(src)}
	if p.SyncInterval != 0 {
		b.SyncInterval = p.SyncInterval.String()
	}
	return b
}

func listPolicies(rl Ratelimiter, w http.ResponseWriter, _ *http.Request) error {
	ps, srcs := rl.Policies()
	items := make([]policyBody, len(ps))
	for i := range ps {
		items[i] = toPolicyBody(ps[i], srcs[i])
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
	return nil
}

func getPolicy(rl Ratelimiter, w http.ResponseWriter, r *http.Request) error {
	p, src, err := rl.Policy(r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toPolicyBody(p, src))
	return nil
}

func putPolicy(rl Ratelimiter, w http.ResponseWriter, r *http.Request) error {
	var body policyBody
	if err := decodeJSON(r, &body); err != nil {
		return err
	}
	name := r.PathValue("name")
	if body.Name == "" {
		body.Name = name
	} else if body.Name != name {
		return apperr.Fields(apperr.Unprocessable, "the policy is invalid",
			[]apperr.FieldError{{Field: "name", Detail: "must match the name in the path, " + name}})
	}
	p, err := body.toPolicy("")
	if err != nil {
		return err
	}
	created, err := rl.PutPolicy(r.Context(), p)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, toPolicyBody(p, limits.FromDatabase))
	return nil
}

func deletePolicy(rl Ratelimiter, w http.ResponseWriter, r *http.Request) error {
	if err := rl.DeletePolicy(r.Context(), r.PathValue("name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type blockBody struct {
	Key      string `json:"key"`
	Policy   string `json:"policy,omitempty"`
	Domain   string `json:"domain,omitempty"`
	Duration string `json:"duration"`
	Reason   string `json:"reason"`
}

type blockJSON struct {
	Key       string    `json:"key"`
	Policy    string    `json:"policy,omitempty"`
	Domain    string    `json:"domain,omitempty"`
	Reason    string    `json:"reason"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

func toBlockJSON(b limits.Block) blockJSON {
	return blockJSON{Key: b.Key, Policy: b.Policy, Domain: b.Domain, Reason: b.Reason, CreatedAt: b.CreatedAt.UTC(),
		ExpiresAt: b.ExpiresAt.UTC()}
}

func createBlock(rl Ratelimiter, w http.ResponseWriter, r *http.Request) error {
	var body blockBody
	if err := decodeJSON(r, &body); err != nil {
		return err
	}
	req := limits.BlockRequest{Key: body.Key, Policy: body.Policy, Domain: body.Domain, Reason: body.Reason}
	if body.Duration == "" {
		return apperr.Fields(apperr.Unprocessable, "the block is invalid",
			[]apperr.FieldError{{Field: "duration", Detail: "is required, e.g. \"15m\""}})
	}
	d, err := limits.ParsePeriod(body.Duration)
	if err != nil {
		return apperr.Fields(apperr.Unprocessable, "the block is invalid",
			[]apperr.FieldError{{Field: "duration", Detail: err.Error()}})
	}
	req.Duration = time.Duration(d)
	b, err := rl.BlockKey(r.Context(), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, toBlockJSON(b))
	return nil
}

func listBlocks(rl Ratelimiter, w http.ResponseWriter, _ *http.Request) error {
	bs := rl.Blocks()
	writeItems(w, bs, toBlockJSON)
	return nil
}

func deleteBlock(rl Ratelimiter, w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	param := func(name string) *string {
		if !q.Has(name) {
			return nil
		}
		v := q.Get(name)
		return &v
	}
	if err := rl.Unblock(r.Context(), r.PathValue("key"), param("policy"), param("domain")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type simRequestBody struct {
	AtMS int64  `json:"at_ms"`
	Key  string `json:"key"`
	Cost *int64 `json:"cost"`
}

type simulateBody struct {
	Policy     *policyBody      `json:"policy"`
	PolicyName string           `json:"policy_name"`
	Requests   []simRequestBody `json:"requests"`
}

type simulateResponse struct {
	Decisions   []decisionJSON `json:"decisions"`
	Allowed     int            `json:"allowed"`
	Refused     int            `json:"refused"`
	WouldRefuse int            `json:"would_refuse"`
}

func (s *Server) simulate(rl Ratelimiter, w http.ResponseWriter, r *http.Request) error {
	var body simulateBody
	if err := decodeJSON(r, &body); err != nil {
		return err
	}
	p, err := simPolicy(rl, body)
	if err != nil {
		return err
	}
	reqs := make([]ratelimit.SimRequest, len(body.Requests))
	for i, q := range body.Requests {
		reqs[i] = ratelimit.SimRequest{At: time.Duration(q.AtMS) * time.Millisecond, Key: q.Key, Cost: 1}
		if q.Cost != nil {
			reqs[i].Cost = *q.Cost
		}
		if q.AtMS > int64(100*365*24*time.Hour/time.Millisecond) {
			reqs[i].At = -1 // refused as out of range by Simulate
		}
	}
	ds, err := limits.Simulate(p, reqs)
	if err != nil {
		return err
	}
	out := simulateResponse{Decisions: make([]decisionJSON, len(ds))}
	for i, d := range ds {
		out.Decisions[i] = toDecisionJSON(d)
		if d.Allowed {
			out.Allowed++
		} else {
			out.Refused++
		}
		if d.WouldRefuse {
			out.WouldRefuse++
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// simPolicy is the inline policy or the named one.
func simPolicy(rl Ratelimiter, body simulateBody) (limits.NamedPolicy, error) {
	switch {
	case body.Policy != nil && body.PolicyName != "":
		return limits.NamedPolicy{}, apperr.New(apperr.Invalid, "send either policy or policy_name, not both")
	case body.Policy != nil:
		if body.Policy.Name == "" {
			body.Policy.Name = "simulated"
		}
		return body.Policy.toPolicy("policy.")
	case body.PolicyName != "":
		p, _, err := rl.Policy(body.PolicyName)
		return p, err
	default:
		return limits.NamedPolicy{}, apperr.Fields(apperr.Unprocessable, "the simulation is invalid",
			[]apperr.FieldError{{Field: "policy", Detail: "an inline policy or a policy_name is required"}})
	}
}
