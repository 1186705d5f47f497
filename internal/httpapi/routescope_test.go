package httpapi

import (
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/auth"
)

// routeScopes declares the scope of every route, the security review's
// table: a route registered without an entry here fails
// TestRouteScopes, so nobody adds a route without saying who may call it.
// public means no key (the route guards itself, or serves public data).
var routeScopes = map[string]auth.Scope{
	"GET /healthz":        public,
	"GET /readyz":         public, // details only for admin (TestReadyzDetailsNeedAdmin)
	"GET /metrics":        public, // a key with --metrics-auth (TestMetricsAuth)
	"GET /openapi.json":   public,
	"GET /{code}":         public,
	"GET /e/{token}":      public,
	"GET /{$}":            public, // 302 to /ui/
	"GET /ui":             public,
	"GET /ui/{path...}":   public,
	"POST /v1/session":    public, // takes a key in its body
	"GET /v1/session":     public,
	"DELETE /v1/session":  public,
	"GET /v1/preferences": public, // signed preference token
	"PUT /v1/preferences": public,
	"POST /v1/providers/{provider}/callbacks": public, // provider signatures

	"POST /v1/keys":                            auth.ScopeAdmin,
	"GET /v1/keys":                             auth.ScopeAdmin,
	"DELETE /v1/keys/{id}":                     auth.ScopeAdmin,
	"GET /v1/stats":                            auth.ScopeAdmin,
	"PUT /v1/templates/{type}":                 auth.ScopeAdmin,
	"DELETE /v1/templates/{type}":              auth.ScopeAdmin,
	"GET /v1/templates":                        auth.ScopeNotifyRead,
	"POST /v1/dead-letters/{id}/replay":        auth.ScopeAdmin,
	"PUT /v1/ratelimit/policies/{name}":        auth.ScopeAdmin,
	"DELETE /v1/ratelimit/policies/{name}":     auth.ScopeAdmin,
	"POST /v1/ratelimit/blocks":                auth.ScopeAdmin,
	"GET /v1/ratelimit/blocks":                 auth.ScopeAdmin,
	"DELETE /v1/ratelimit/blocks/{key}":        auth.ScopeAdmin,
	"DELETE /v1/ratelimit/keys/{policy}/{key}": auth.ScopeAdmin,

	"POST /v1/ratelimit/check":              auth.ScopeRatelimitCheck,
	"POST /v1/ratelimit/settle":             auth.ScopeRatelimitCheck,
	"POST /v1/ratelimit/simulate":           auth.ScopeRatelimitCheck,
	"GET /v1/ratelimit/policies":            auth.ScopeRatelimitCheck,
	"GET /v1/ratelimit/policies/{name}":     auth.ScopeRatelimitCheck,
	"GET /v1/ratelimit/keys/{policy}/{key}": auth.ScopeRatelimitCheck,

	"POST /v1/notifications":              auth.ScopeNotifySend,
	"POST /v1/notifications/batch":        auth.ScopeNotifySend,
	"DELETE /v1/notifications/{id}":       auth.ScopeNotifySend,
	"PUT /v1/users/{id}/settings":         auth.ScopeNotifySend,
	"POST /v1/users/{id}/preference-link": auth.ScopeNotifySend,
	"GET /v1/notifications/{id}":          auth.ScopeNotifyRead,
	"GET /v1/users/{id}/notifications":    auth.ScopeNotifyRead,
	"GET /v1/users/{id}/settings":         auth.ScopeNotifyRead,
	"GET /v1/templates/{type}":            auth.ScopeNotifyRead,
	"GET /v1/dead-letters":                auth.ScopeNotifyRead,
	"GET /v1/outbox":                      auth.ScopeNotifyRead,

	"POST /v1/event-subscriptions":              auth.ScopeAdmin,
	"DELETE /v1/event-subscriptions/{id}":       auth.ScopeAdmin,
	"POST /v1/event-subscriptions/{id}/recover": auth.ScopeAdmin,
	"GET /v1/event-subscriptions":               auth.ScopeNotifyRead,
	"GET /v1/event-subscriptions/{id}":          auth.ScopeNotifyRead,
	// The inbox's routes also admit the user's own inbox token (TestInboxTokenAuth).
	"POST /v1/users/{id}/inbox-token":                auth.ScopeNotifySend,
	"DELETE /v1/users/{id}/inbox-tokens":             auth.ScopeNotifySend, // API keys and sessions only
	"GET /v1/users/{id}/inbox":                       auth.ScopeNotifyRead,
	"GET /v1/users/{id}/inbox/stream":                auth.ScopeNotifyRead,
	"POST /v1/users/{id}/inbox/read-all":             auth.ScopeNotifySend,
	"POST /v1/users/{id}/inbox/{message_id}/read":    auth.ScopeNotifySend,
	"POST /v1/users/{id}/inbox/{message_id}/unread":  auth.ScopeNotifySend,
	"POST /v1/users/{id}/inbox/{message_id}/archive": auth.ScopeNotifySend,

	"POST /v1/events":                               auth.ScopeNotifySend,
	"POST /v1/events/batch":                         auth.ScopeNotifySend,
	"PUT /v1/workflows/{key}":                       auth.ScopeAdmin,
	"DELETE /v1/workflows/{key}":                    auth.ScopeAdmin,
	"GET /v1/workflows/{key}":                       auth.ScopeNotifyRead,
	"GET /v1/workflows":                             auth.ScopeNotifyRead,
	"GET /v1/workflow-runs/{id}":                    auth.ScopeNotifyRead,
	"GET /v1/workflows/{key}/runs":                  auth.ScopeNotifyRead,
	"GET /v1/users/{id}/workflow-runs":              auth.ScopeNotifyRead,
	"POST /v1/workflows/{key}/cancel":               auth.ScopeNotifySend,
	"PUT /v1/users/{id}/attributes":                 auth.ScopeNotifySend,
	"GET /v1/users/{id}/attributes":                 auth.ScopeNotifyRead,
	"POST /v1/topics/{key}/subscribers":             auth.ScopeNotifySend,
	"DELETE /v1/topics/{key}/subscribers/{user_id}": auth.ScopeNotifySend,
	"GET /v1/topics/{key}/subscribers":              auth.ScopeNotifyRead,
	"GET /v1/topics":                                auth.ScopeNotifyRead,
	"POST /v1/broadcasts":                           auth.ScopeNotifySend,
	"GET /v1/broadcasts/{id}":                       auth.ScopeNotifyRead,
	"GET /v1/broadcasts":                            auth.ScopeNotifyRead,
	"DELETE /v1/broadcasts/{id}":                    auth.ScopeNotifySend,

	"POST /v1/links":                    auth.ScopeLinksWrite,
	"GET /v1/links":                     auth.ScopeLinksWrite,
	"GET /v1/links/{code}":              auth.ScopeLinksWrite,
	"DELETE /v1/links/{code}":           auth.ScopeLinksWrite,
	"PUT /v1/links/{code}/rules":        auth.ScopeLinksWrite,
	"GET /v1/stats/links":               auth.ScopeLinksWrite,
	"GET /v1/links/{code}/clicks":       auth.ScopeLinksWrite,
	"GET /v1/links/{code}/stats":        auth.ScopeLinksWrite,
	"GET /v1/links/{code}/stats/stream": auth.ScopeLinksWrite,
	"GET /v1/links/{code}/qr":           auth.ScopeLinksWrite,
	"POST /v1/domains":                  auth.ScopeLinksWrite,
	"GET /v1/domains":                   auth.ScopeLinksWrite,
	"DELETE /v1/domains/{domain}":       auth.ScopeLinksWrite,
	"GET /v1/domains/{domain}":          auth.ScopeLinksWrite,
	"PATCH /v1/domains/{domain}":        auth.ScopeLinksWrite,
	"POST /v1/domains/{domain}/verify":  auth.ScopeLinksWrite,
	"POST /v1/conversions":              auth.ScopeLinksWrite,
}

// samplePath fills a route's wildcards: "/v1/keys/{id}" -> "/v1/keys/x".
func samplePath(path string) string {
	var b strings.Builder
	for seg := range strings.SplitSeq(strings.TrimPrefix(path, "/"), "/") {
		b.WriteByte('/')
		if strings.HasPrefix(seg, "{") {
			seg = "x"
		}
		b.WriteString(seg)
	}
	return b.String()
}

// TestRouteScopes walks the server's route table: every route must be
// declared in routeScopes with the scope it is registered with, and each
// route that needs a scope must answer 401 without a key and 403 to a
// valid key holding every other scope but admin.
func TestRouteScopes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.addKey(t, auth.ScopeAdmin) // keys configured: no keyless mode
	without := map[auth.Scope]string{}
	for _, sc := range auth.Scopes {
		var others []auth.Scope
		for _, o := range auth.Scopes {
			if o != sc && o != auth.ScopeAdmin {
				others = append(others, o)
			}
		}
		without[sc] = b.addKey(t, others...)
	}
	seen := map[string]bool{}
	for _, rt := range b.srv.routes {
		seen[rt.pattern] = true
		want, declared := routeScopes[rt.pattern]
		t.Run(rt.pattern, func(t *testing.T) {
			t.Parallel()
			if !declared {
				t.Fatalf("route %q has no declared scope: add it to routeScopes", rt.pattern)
			}
			if rt.scope != want {
				t.Fatalf("route %q is registered with scope %q, declared %q", rt.pattern, rt.scope, want)
			}
			if want == public {
				return
			}
			method, path, _ := strings.Cut(rt.pattern, " ")
			body := ""
			if method == "POST" || method == "PUT" {
				body = "{}"
			}
			if resp := b.do(call{method: method, path: samplePath(path), body: body}); resp.StatusCode != 401 {
				t.Errorf("no key: status = %d, want 401", resp.StatusCode)
			} else {
				decodeProblem(t, resp)
			}
			resp := b.do(call{method: method, path: samplePath(path), body: body, key: without[want]})
			if resp.StatusCode != 403 {
				t.Errorf("key without %q: status = %d, want 403", want, resp.StatusCode)
			} else {
				decodeProblem(t, resp)
			}
		})
	}
	for pattern := range routeScopes {
		if !seen[pattern] {
			t.Errorf("routeScopes declares %q, which is not served", pattern)
		}
	}
	if !slices.Equal(b.srv.Routes(), sortedPatterns(b.srv)) {
		t.Error("Routes() and the route table disagree")
	}
}

func sortedPatterns(s *Server) []string {
	var out []string
	for _, rt := range s.routes {
		out = append(out, rt.pattern)
	}
	slices.Sort(out)
	return out
}
