package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/gateway"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
)

// rawCost reports the cost of every request as the literal text of its
// ?cost= query, in the X-Usage-Tokens header, a JSON body (/json) and the
// last event of a stream (/sse).
var rawCost = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	raw := r.URL.Query().Get("cost")
	switch r.URL.Path {
	case "/header":
		w.Header().Set("X-Usage-Tokens", raw)
	case "/json":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"usage":{"total_tokens":%s}}`, raw)
	case "/sse":
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"choices\":[]}\n\ndata: {\"usage\":{\"total_tokens\":%s}}\n\ndata: [DONE]\n\n", raw)
	}
})

// TestHugeReportedCostIsCharged: a reported cost past what the store
// holds (2^53, 2^63, 1e300, an exponent past a float64) charges the
// largest cost it takes, so the key is refused at once, rather than
// failing the settle and keeping the estimate; a cost that is none
// (negative, a string, NaN, Infinity) keeps the estimate.
func TestHugeReportedCostIsCharged(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"/header", "/json", "/sse"} {
		t.Run(path[1:], func(t *testing.T) {
			t.Parallel()
			cost := gateway.CostFromResponse{JSON: "usage.total_tokens", Estimate: 300}
			if path == "/header" {
				cost = gateway.CostFromResponse{Header: "X-Usage-Tokens", Estimate: 300}
			}
			cases := []struct {
				raw      string
				refused  bool // the next request: in debt for the largest cost
				jsonOnly bool // not a header value
			}{
				{raw: "9007199254740992", refused: true},    // 2^53
				{raw: "9223372036854775808", refused: true}, // 2^63, past an int64
				{raw: "1e300", refused: true},
				{raw: "1e400", refused: true}, // past a float64
				{raw: "-5"},
				{raw: `"NaN"`, jsonOnly: true},
				{raw: "NaN"},
				{raw: "Infinity", refused: path == "/header"}, // no JSON number; a header's float
				{raw: `"12"`, jsonOnly: true},
			}
			tiers := map[string]string{}
			for i := range cases {
				tiers[fmt.Sprint("key", i)] = "tpm"
			}
			gs, _ := setupUpstream(t, gateway.Config{AnonymousPolicy: "tpm", Tiers: tiers,
				Routes: []gateway.Route{{Path: "/", Policies: []string{"tier"}, CostFromResponse: &cost}}}, rawCost,
				limits.NamedPolicy{Name: "tpm", Algorithm: ratelimit.FixedWindow, Limit: 1000, Period: limits.Period(time.Minute)})
			for i, c := range cases {
				if c.jsonOnly && path == "/header" {
					continue
				}
				key := fmt.Sprint("key", i)
				get := func() *http.Response {
					resp := do(t, gs, req{path: path + "?cost=" + url.QueryEscape(c.raw), apiKey: key})
					_, _ = io.Copy(io.Discard, resp.Body)
					return resp
				}
				if resp := get(); resp.StatusCode != 200 {
					t.Fatalf("cost %s: first request = %d", c.raw, resp.StatusCode)
				}
				resp := get()
				switch {
				case c.refused && resp.StatusCode != 429:
					t.Errorf("cost %s: next request = %d (remaining %s), want 429: charged the largest cost, not the estimate",
						c.raw, resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
				case !c.refused && (resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Remaining") != "400"):
					t.Errorf("cost %s: next request = %d remaining %s, want 200 with 400 left (two estimates of 300)",
						c.raw, resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
				}
			}
		})
	}
}
