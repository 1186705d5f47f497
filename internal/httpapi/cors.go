package httpapi

import (
	"net/http"
	"strings"
)

// CORS lets web pages on other origins call the API from a browser
// (Options.CORSOrigins, http.cors_origins), as the <sluice-inbox> element
// (web/static/inbox.js) does from an application's own pages.
//
// The model: an allowed origin's request gets Access-Control-Allow-Origin
// echoing its Origin, and its preflight (OPTIONS with
// Access-Control-Request-Method) is answered 204 here, whatever the path,
// before any route or authentication runs; any other origin gets no CORS
// header at all, so the browser withholds the answer from its page. A
// preflight of an unknown path is answered too: it reveals nothing the
// actual request's 404 would not, and the page then reads that 404.
//
// CORS opens no credentials: Access-Control-Allow-Credentials is never
// sent, so a browser neither sends the dashboard's session cookie with a
// page's cross-origin request nor shows the page the answer to one that
// carries it. A page authenticates only with what it holds itself: an
// inbox token or an API key, in Authorization or ?token=. Nor does CORS
// change what the server accepts: keyless mode still refuses unsafe
// methods from other origins (http.CrossOriginProtection), and a request
// sent without a browser never cared about CORS.
type cors struct {
	any     bool            // "*": every origin
	origins map[string]bool // exact, lowercase scheme://host[:port]
}

// The preflight's answer: the methods the API has, the request headers a
// page may set (Last-Event-ID: a fetch-based event stream resumes with
// it), and the response headers a page may read besides the safelisted
// ones. corsMaxAge is Chromium's cap: browsers cache a preflight that
// long.
const (
	corsMethods = "GET, HEAD, POST, PUT, PATCH, DELETE"
	corsHeaders = "Authorization, Content-Type, Idempotency-Key, Last-Event-ID"
	corsExpose  = "Retry-After, X-Request-Id, Location, RateLimit, RateLimit-Policy, " +
		"X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset"
	corsMaxAge = "7200"
)

// newCORS returns the policy for origins (config.HTTP.CORSOrigins,
// validated there), or nil, which adds nothing, when there are none.
func newCORS(origins []string) *cors {
	if len(origins) == 0 {
		return nil
	}
	c := &cors{origins: make(map[string]bool, len(origins))}
	for _, o := range origins {
		if o == "*" {
			c.any = true
		}
		c.origins[strings.ToLower(strings.TrimSpace(o))] = true
	}
	return c
}

// serve adds r's CORS headers to w and reports whether it answered r, a
// preflight of an allowed origin, itself. A nil policy adds nothing.
func (c *cors) serve(w http.ResponseWriter, r *http.Request) bool {
	if c == nil {
		return false
	}
	h := w.Header()
	// Every answer may differ by Origin: a shared cache must not hand one
	// origin's answer (or its lack of CORS headers) to another.
	h.Add("Vary", "Origin")
	origin := r.Header.Get("Origin")
	if origin == "" || !(c.any || c.origins[origin]) {
		return false
	}
	h.Set("Access-Control-Allow-Origin", origin)
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		h.Add("Vary", "Access-Control-Request-Method, Access-Control-Request-Headers")
		h.Set("Access-Control-Allow-Methods", corsMethods)
		h.Set("Access-Control-Allow-Headers", corsHeaders)
		h.Set("Access-Control-Max-Age", corsMaxAge)
		w.WriteHeader(http.StatusNoContent)
		return true
	}
	h.Set("Access-Control-Expose-Headers", corsExpose)
	return false
}
