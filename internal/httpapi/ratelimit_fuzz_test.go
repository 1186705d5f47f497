package httpapi

import (
	"encoding/json"
	"testing"
)

// fuzzRatelimit posts arbitrary bodies to one rate limit route and wants
// a 2xx with a JSON body, or a 4xx problem: never a 5xx, never a panic.
func fuzzRatelimit(f *testing.F, method, path string, seeds []string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	b := setupRL(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		resp := b.do(call{method: method, path: path, body: string(body), contentType: "application/json"})
		if resp.StatusCode >= 500 {
			t.Fatalf("%s %s with %q = %d, want 2xx or 4xx", method, path, body, resp.StatusCode)
		}
		var v map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatalf("%s %s with %q: body is not JSON: %v", method, path, body, err)
		}
		if resp.StatusCode >= 400 && v["status"] != float64(resp.StatusCode) {
			t.Fatalf("%s %s with %q = %d with problem %v", method, path, body, resp.StatusCode, v)
		}
	})
}

func FuzzCheck(f *testing.F) {
	fuzzRatelimit(f, "POST", "/v1/ratelimit/check", []string{
		`{"policy":"free","key":"k","cost":1}`, `{"checks":[{"policy":"free","key":"a"},{"policy":"paid","key":"b","cost":600}]}`,
		`{"policy":"free","key":"k","cost":-9223372036854775808}`, `{"checks":[]}`, `{"policy":"free","key":""}`, `{}`,
		`{"checks":[{"policy":"free","key":"a"},{"policy":"free","key":"a"}]}`, `{"policy":"x","key":"k"}`,
		`{"policy":"free","key":"k","cost":5,"reserve":true,"reservation_ttl":"30s"}`,
		`{"policy":"free","key":"k","cost":9007199254740993,"charge":"after"}`, `{"policy":"free","key":"k","charge":"on_settle"}`,
		`{"reserve":true,"checks":[{"policy":"free","key":"a","reserve":false},{"policy":"paid","key":"a","cost":9}]}`,
	})
}

func FuzzSettle(f *testing.F) {
	fuzzRatelimit(f, "POST", "/v1/ratelimit/settle", []string{
		`{"reservation_id":"x","cost":1}`, `{"reservation_id":"","cost":0}`, `{"reservation_id":"local-x~eA","cost":-1}`,
		`{"reservation_id":"x","cost":9223372036854775807}`, `{}`,
	})
}

func FuzzSimulate(f *testing.F) {
	fuzzRatelimit(f, "POST", "/v1/ratelimit/simulate", []string{
		`{"policy_name":"free","requests":[{"at_ms":0,"key":"a"}]}`,
		`{"policy":{"algorithm":"sliding_window_log","limit":3,"period":"1s","mode":"soft","burst_over":1},"requests":[{"at_ms":5,"key":"a","cost":2}]}`,
		`{"policy":{"algorithm":"gcra","limit":9007199254740991,"period":"3650d","burst":1099511627776},"requests":[]}`,
		`{"policy":{"algorithm":"concurrency","limit":1,"period":"1ms"},"requests":[{"at_ms":9223372036854775807,"key":"a"}]}`,
		`{"policy":{"period":"-1s"}}`,
	})
}

func FuzzPutPolicy(f *testing.F) {
	fuzzRatelimit(f, "PUT", "/v1/ratelimit/policies/fuzz", []string{
		`{"algorithm":"token_bucket","limit":60,"period":"1m","burst":60}`,
		`{"algorithm":"fixed_window","limit":1,"period":"1d","mode":"shadow","on_store_failure":"closed"}`,
		`{"algorithm":"token_bucket","limit":7,"period":"3650d","burst":1099511627776}`,
		`{"name":"other","algorithm":"gcra","limit":1,"period":"1s"}`, `{"period":"1.5d"}`, `{"source":"config"}`,
	})
}

func FuzzCreateBlock(f *testing.F) {
	fuzzRatelimit(f, "POST", "/v1/ratelimit/blocks", []string{
		`{"key":"mallory","duration":"10m","reason":"abuse"}`, `{"key":"k","policy":"free","duration":"1s"}`,
		`{"key":"k","policy":"nope","duration":"1m"}`, `{"key":"","duration":"1m"}`, `{"key":"k","duration":"-1s"}`,
		`{"key":"k","duration":"3650d"}`, `{"key":"k"}`, `{"key":"k","duration":"1m","extra":1}`,
	})
}
