package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzCreateLink posts arbitrary bodies to POST /v1/links: the answer is a
// 201 link whose target passed validation, or a 4xx problem; never a 5xx.
func FuzzCreateLink(f *testing.F) {
	for _, s := range []string{
		`{"url":"https://example.com/page"}`, `{"url":"https://example.com","slug":"spring-sale"}`,
		`{"url":"https://example.com","expires_at":"2030-01-01T00:00:00Z"}`, `{"url":"https://example.com","expires_at":"2001-01-01T00:00:00Z"}`,
		`{"url":"http://127.0.0.1/admin"}`, `{"url":"javascript:alert(1)"}`, `{"url":"https://sho.rt/x"}`,
		`{"url":"https://example.com","slug":"v1"}`, `{"url":""}`, `{"url":"https://example.com","owner":"x"}`, `[]`,
	} {
		f.Add([]byte(s))
	}
	b, _ := setupLinks(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		resp := b.do(call{method: "POST", path: "/v1/links", body: string(body), contentType: "application/json"})
		defer resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("POST /v1/links with %q = %d, want 201 or 4xx", body, resp.StatusCode)
		}
		var v map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatalf("POST /v1/links with %q: body is not JSON: %v", body, err)
		}
		if resp.StatusCode == 201 {
			target, _ := v["url"].(string)
			if lower := strings.ToLower(target); !strings.HasPrefix(lower, "http://") && !strings.HasPrefix(lower, "https://") {
				t.Fatalf("POST /v1/links with %q made a link to %q", body, target)
			}
			return
		}
		if resp.StatusCode < 400 || v["status"] != float64(resp.StatusCode) {
			t.Fatalf("POST /v1/links with %q = %d with body %v, want a problem", body, resp.StatusCode, v)
		}
	})
}
