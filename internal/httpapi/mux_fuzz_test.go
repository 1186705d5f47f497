package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/sluicehq/sluice/internal/audience"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/events"
	"github.com/sluicehq/sluice/internal/inbox"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/internal/linklive"
	"github.com/sluicehq/sluice/internal/notify"
	notifyoutbox "github.com/sluicehq/sluice/internal/notify/outbox"
	"github.com/sluicehq/sluice/internal/shorten"
	"github.com/sluicehq/sluice/internal/workflow"
	"github.com/sluicehq/sluice/ratelimit"
)

// fullAPI is the whole HTTP API with every service configured on one
// real SQLite store, for fuzzing the real mux.
type fullAPI struct {
	srv    *Server
	admin  string   // an admin key's secret
	routes []string // the server's route patterns
}

type discardQueue struct{}

func (discardQueue) Publish(context.Context, notify.Job) error { return nil }

func setupFull(tb testing.TB) *fullAPI {
	tb.Helper()
	b := setup(tb)
	log := slog.New(slog.DiscardHandler)
	rules, err := limits.NewRules(limits.RulesOptions{Store: b.db})
	if err != nil {
		tb.Fatal(err)
	}
	if err := rules.Load(context.Background()); err != nil {
		tb.Fatal(err)
	}
	rl, err := limits.NewService(limits.Options{Rules: rules, Counters: ratelimit.NewMemoryStore(ratelimit.MemoryOptions{})})
	if err != nil {
		tb.Fatal(err)
	}
	codec, err := shorten.NewCodec([]byte("fuzz key"), 7)
	if err != nil {
		tb.Fatal(err)
	}
	links, err := shorten.New(shorten.Options{Store: b.db, Codec: codec, BaseURL: "https://sho.rt",
		Targets: shorten.TargetPolicy{OwnHosts: []string{"sho.rt"}}, Logger: log})
	if err != nil {
		tb.Fatal(err)
	}
	ob := &notifyoutbox.Provider{}
	ns := notify.NewService(notify.Options{Store: b.db, Queue: discardQueue{}, Logger: log,
		Providers: map[notify.Channel]notify.Provider{notify.Email: ob, notify.SMS: ob, notify.Push: ob, notify.Webhook: ob}})
	ev := events.NewService(events.Options{Store: b.db, Notifier: ns})
	wf := workflow.New(workflow.Options{Store: b.db, Sender: ns, Templates: ns, Profiles: profiles{ns, b.db}, Logger: log})
	b.srv = New(Options{Logger: log, Keys: b.db, Ratelimit: rl, Links: links, Notify: ns, Preferences: ns, Events: ev,
		Workflows: wf, Attributes: b.db, Audiences: audience.New(audience.Options{Store: b.db, Notifier: ns}),
		Inbox:    inbox.New(inbox.Options{Store: b.db}),
		LinkLive: linklive.NewHub(linklive.Options{}),
		Checks:   []Check{{Name: "database", Ping: b.db.Ping}},
		UI: UIOptions{Secret: []byte("0123456789abcdef0123456789abcdef"), PublicURL: "https://n.example.com",
			Assets: fstest.MapFS{"index.html": {Data: []byte("<!doctype html>")}}}})
	secret, key, err := auth.NewKey("fuzz", []auth.Scope{auth.ScopeAdmin}, time.Now(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	if err := b.db.CreateAPIKey(context.Background(), key); err != nil {
		tb.Fatal(err)
	}
	return &fullAPI{srv: b.srv, admin: secret, routes: b.srv.Routes()}
}

var pathParam = regexp.MustCompile(`\{[a-z]+(\.\.\.)?\}`)

// request builds the request of route pattern with its path parameters
// set to param (escaped) and body.
func (a *fullAPI) request(pattern, param string, body []byte, contentType, query string) *http.Request {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = http.MethodGet, pattern
	}
	path = pathParam.ReplaceAllLiteralString(path, url.PathEscape(param))
	if query != "" {
		path += "?" + url.PathEscape(query) // escaped: a raw query could be no URL at all
	}
	req := httptest.NewRequest(method, "http://127.0.0.1:8080"+path, strings.NewReader(string(body)))
	req.RemoteAddr = "192.0.2.10:5555"
	req.Header.Set("Authorization", "Bearer "+a.admin)
	if strings.HasSuffix(path, "/stream") || strings.Contains(path, "/stream?") {
		// An event stream runs until its client leaves: this one leaves soon.
		ctx, cancel := context.WithTimeout(req.Context(), 20*time.Millisecond)
		_ = cancel // released by the timeout
		req = req.WithContext(ctx)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return req
}

var (
	fuzzAPIOnce sync.Once
	fuzzAPI     *fullAPI
)

// FuzzAPI drives the real mux, with every service on a real store, with
// random and mutated bodies, path parameters and queries for every route
// (authorized by an admin key): nothing may panic or answer 5xx, and
// every error is problem+json.
func FuzzAPI(f *testing.F) {
	fuzzAPIOnce.Do(func() { fuzzAPI = setupFull(f) })
	a := fuzzAPI
	bodies := []string{``, `{}`, `[]`, `null`, `{"x":1}`, `{`,
		`{"user_id":"u1","type":"otp","data":{"code":"1"},"request_id":"r1"}`,
		`{"notifications":[{"user_id":"u1","type":"otp"}]}`,
		`{"url":"https://example.com/a","slug":"spring","expires_at":"2099-01-01T00:00:00Z"}`,
		`{"policy":"free","key":"k","cost":1}`, `{"checks":[{"policy":"free","key":"k"}]}`,
		`{"name":"free","algorithm":"token_bucket","limit":60,"period":"1m"}`,
		`{"key":"ip:1.2.3.4","policy":"free","reason":"abuse","ttl":"1h"}`,
		`{"name":"ci","scopes":["admin"]}`, `{"secret":"sk_x"}`, `{"ttl":"48h"}`,
		`{"channels":{"email":false},"categories":{"marketing":false},"contacts":{"email":"a@b.c","webhook_url":"https://example.com/h"}}`,
		`{"category":"orders","subject":{"en":"Hi {{.name}}"},"body":{"en":"Body"}}`,
		`MessageSid=SM1&MessageStatus=delivered`,
		`{"name":"cart.abandoned","user_id":"u1","data":{"cart_id":"c1"}}`, `{"events":[{"name":"e","user_id":"u1"}]}`,
		`{"trigger":{"event":"cart.abandoned"},"steps":[{"send":"abandoned_cart"},{"wait_for":{"event":"order.placed","match":{"cart_id":"{cart_id}"},"timeout":"1h"}}]}`,
	}
	for i := range a.routes {
		for _, body := range bodies {
			f.Add(uint16(i), "x", []byte(body), uint8(0), "")
		}
		f.Add(uint16(i), "", []byte(`{}`), uint8(1), "cursor=zz&limit=-1")
		f.Add(uint16(i), "../..", []byte(`{}`), uint8(2), "group=country")
		f.Add(uint16(i), "u%2F1\x00", []byte("\xff\xfe"), uint8(3), "limit=1000000")
	}
	contentTypes := []string{"application/json", "", "application/x-www-form-urlencoded", "text/plain", "application/json; charset=latin1"}
	f.Fuzz(func(t *testing.T, route uint16, param string, body []byte, ct uint8, query string) {
		pattern := a.routes[int(route)%len(a.routes)]
		if len(param) > 512 || len(query) > 512 {
			return
		}
		req := a.request(pattern, param, body, contentTypes[int(ct)%len(contentTypes)], query)
		rec := httptest.NewRecorder()
		a.srv.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s (param %q, query %q, body %q) = %d %s", pattern, param, query, body, rec.Code, rec.Body)
		}
		if rec.Code >= 400 && rec.Header().Get("Content-Type") != "application/problem+json" {
			t.Fatalf("%s (param %q, body %q) = %d with Content-Type %q, want problem+json", pattern, param, body, rec.Code, rec.Header().Get("Content-Type"))
		}
	})
}

// TestFullAPIServes: FuzzAPI's server really serves (its requests are
// authorized and reach the services), so the fuzzing goes past the door.
func TestFullAPIServes(t *testing.T) {
	t.Parallel()
	a := setupFull(t)
	for _, tt := range []struct {
		pattern, body string
		want          int
	}{
		{"POST /v1/links", `{"url":"https://example.com/a"}`, http.StatusCreated},
		{"POST /v1/notifications", `{"user_id":"u1","type":"otp","data":{"code":"1"}}`, http.StatusAccepted},
		{"GET /v1/keys", ``, http.StatusOK},
		{"PUT /v1/ratelimit/policies/{name}", `{"algorithm":"token_bucket","limit":60,"period":"1m"}`, http.StatusOK},
	} {
		rec := httptest.NewRecorder()
		a.srv.ServeHTTP(rec, a.request(tt.pattern, "free", []byte(tt.body), "application/json", ""))
		if rec.Code != tt.want {
			t.Errorf("%s = %d %s, want %d", tt.pattern, rec.Code, rec.Body, tt.want)
		}
	}
}
