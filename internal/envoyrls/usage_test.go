package envoyrls_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/envoyrls"
)

// A tokens-per-minute budget per API key, as Envoy drives it: a request-time
// call with hits_addend 0 (admit or refuse), and a stream-done call
// (apply_on_stream_done) whose hits_addend is the tokens the response used.
const tokensYAML = `
domain: llm
descriptors:
  - key: api_key
    rate_limit: {name: tpm, unit: minute, requests_per_unit: 1000, charge: always}
  - key: plain_key
    rate_limit: {name: plain, unit: minute, requests_per_unit: 1000}
`

func TestChargeAlwaysOnStreamDone(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := envoyrls.Parse(map[string][]byte{"llm.yaml": []byte(tokensYAML)})
			if err != nil {
				t.Fatal(err)
			}
			b := serveOn(t, cfg, envoyrls.Options{}, be)
			steps := []step{
				// request time: a check that adds nothing
				{0, req("llm", hits(desc("api_key", "k1"), 0)), "OK [OK tpm 1000/MINUTE r=1000 t=0]"},
				// stream done: 800 tokens
				{0, req("llm", hits(desc("api_key", "k1"), 800)), "OK [OK tpm 1000/MINUTE r=200 t=60]"},
				{0, req("llm", hits(desc("api_key", "k1"), 0)), "OK [OK tpm 1000/MINUTE r=200 t=60]"},
				// 700 more with 200 left: charged all the same, into debt
				{0, req("llm", hits(desc("api_key", "k1"), 700)), "OK [OK tpm 1000/MINUTE r=0 t=60]"},
				// request time while in debt: refused
				{time.Second, req("llm", hits(desc("api_key", "k1"), 0)), "OVER_LIMIT [OVER_LIMIT tpm 1000/MINUTE r=0 t=59]"},
				// an ordinary request-time call (no descriptor hits_addend) too
				{0, req("llm", desc("api_key", "k1")), "OVER_LIMIT [OVER_LIMIT tpm 1000/MINUTE r=0 t=59]"},
				// the window rolls: the debt is gone
				{59 * time.Second, req("llm", hits(desc("api_key", "k1"), 0)), "OK [OK tpm 1000/MINUTE r=1000 t=0]"},
				// Without charge: always, the over-limit stream-done call is
				// refused and charges nothing (tokens are lost).
				{0, req("llm", hits(desc("plain_key", "k1"), 800)), "OK [OK plain 1000/MINUTE r=200 t=60]"},
				{0, req("llm", hits(desc("plain_key", "k1"), 700)), "OVER_LIMIT [OVER_LIMIT plain 1000/MINUTE r=200 t=60]"},
				{0, req("llm", hits(desc("plain_key", "k1"), 0)), "OK [OK plain 1000/MINUTE r=200 t=60]"},
			}
			for i, s := range steps {
				b.clock.Advance(s.advance)
				if got := summary(b.call(t, s.req)); got != s.want {
					t.Errorf("step %d: ShouldRateLimit = %s\n want %s", i, got, s.want)
				}
			}
		})
	}
}

func TestChargeAlwaysConfigErrors(t *testing.T) {
	t.Parallel()
	for name, y := range map[string]string{
		"unknown value": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1, charge: sometimes}\n",
		"unlimited":     "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, charge: always}\n",
		"zero limit":    "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 0, charge: always}\n",
	} {
		if _, err := envoyrls.Parse(map[string][]byte{"d.yaml": []byte(y)}); err == nil {
			t.Errorf("%s: Parse accepted charge", name)
		}
	}
}
