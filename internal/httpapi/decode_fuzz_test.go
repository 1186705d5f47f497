package httpapi

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/apperr"
)

// FuzzDecodeBody checks that no input panics the decoder and that every
// refusal is an Invalid application error (a 400, never a 500).
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{`{"name":"a","scopes":["admin"]}`, `{`, `{"name":1}`, `[]`, `null`, `{"x":1}`, `{"name":"a"} {}`, "\xff", `{"scopes":[1]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req keyRequest
		err := decodeBody(body, &req)
		if err == nil {
			return
		}
		if _, ok := errors.AsType[*apperr.Error](err); !ok || apperr.CodeOf(err) != apperr.Invalid {
			t.Fatalf("decodeBody(%q) error = %v (%T), want an Invalid *apperr.Error", body, err, err)
		}
	})
}

// FuzzCreateKeyHandler drives the whole request path with arbitrary bodies:
// the answer is 201 or a 4xx problem, never a 5xx.
func FuzzCreateKeyHandler(f *testing.F) {
	for _, s := range []string{`{"name":"a","scopes":["admin"]}`, `{"name":"","scopes":[]}`, `{"name":"a","scopes":["nope"]}`, `garbage`} {
		f.Add(s)
	}
	b := setup(f)
	f.Fuzz(func(t *testing.T, body string) {
		resp := b.do(call{method: "POST", path: "/v1/keys", body: body})
		if resp.StatusCode >= 500 {
			t.Fatalf("body %q: status %d", body, resp.StatusCode)
		}
		if resp.StatusCode != http.StatusCreated && !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
			t.Fatalf("body %q: status %d without problem+json", body, resp.StatusCode)
		}
	})
}
