package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/ratelimit"
)

// syncBuffer is a bytes.Buffer safe for a logger shared by goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// setupAuthLimit is setup with failed authentications limited to limit a
// minute per client, and the log kept.
func setupAuthLimit(t *testing.T, limit int64) (*bundle, *syncBuffer) {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, store.Options{DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	lim, err := ratelimit.NewPolicyLimiter(ratelimit.NewMemoryStore(ratelimit.MemoryOptions{}), ratelimit.Policy{
		Name: "auth_failures", Algorithm: ratelimit.TokenBucket, Limit: limit, Period: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return &bundle{t: t, db: db, srv: New(Options{Logger: log, Keys: db, AuthFailures: lim})}, logs
}

// TestFailedAuthenticationsLimitedPerClient: a client guessing keys gets
// 401 for its first failures, then 429 with Retry-After for every
// request presenting a key, a valid one included, while other clients
// are served; no log line holds a presented key.
func TestFailedAuthenticationsLimitedPerClient(t *testing.T) {
	t.Parallel()
	const limit = 5
	b, logs := setupAuthLimit(t, limit)
	admin := b.addKey(t, auth.ScopeAdmin)
	const attacker, other = "198.51.100.7:4000", "198.51.100.8:4000"
	var guesses []string
	for i := range limit {
		guess := fmt.Sprintf("sk_guess%02dXYZ", i)
		guesses = append(guesses, guess)
		if resp := b.do(call{method: "GET", path: "/v1/keys", key: guess, remote: attacker}); resp.StatusCode != 401 {
			t.Fatalf("failure %d: status = %d, want 401", i+1, resp.StatusCode)
		}
	}
	guess := "sk_guessOverXYZ"
	guesses = append(guesses, guess)
	resp := b.do(call{method: "GET", path: "/v1/keys", key: guess, remote: attacker})
	if resp.StatusCode != 429 {
		t.Fatalf("failure %d: status = %d, want 429", limit+1, resp.StatusCode)
	}
	p := decodeProblem(t, resp)
	if !strings.HasSuffix(p.Type, "/too-many-failed-authentications") {
		t.Errorf("type = %q", p.Type)
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After = %q, want whole seconds", resp.Header.Get("Retry-After"))
	}
	// Over the limit, even the right key is refused: otherwise a 429
	// would just mean "wrong", and guessing would go on.
	if resp := b.do(call{method: "GET", path: "/v1/keys", key: admin, remote: attacker}); resp.StatusCode != 429 {
		t.Errorf("valid key from the limited client: status = %d, want 429", resp.StatusCode)
	}
	signInBody := `{"key":"sk_guessSignInXYZ"}`
	guesses = append(guesses, "sk_guessSignInXYZ")
	if resp := b.do(call{method: "POST", path: "/v1/session", body: signInBody, remote: attacker,
		header: map[string][]string{"Sec-Fetch-Site": {"same-origin"}}}); resp.StatusCode != 429 {
		t.Errorf("sign-in from the limited client: status = %d, want 429", resp.StatusCode)
	}
	// Public routes without a key, and other clients, are not affected.
	if resp := b.do(call{method: "GET", path: "/healthz", remote: attacker}); resp.StatusCode != 200 {
		t.Errorf("limited client's /healthz = %d, want 200", resp.StatusCode)
	}
	if resp := b.do(call{method: "GET", path: "/v1/keys", key: admin, remote: other}); resp.StatusCode != 200 {
		t.Errorf("another client's valid key: status = %d, want 200", resp.StatusCode)
	}
	out := logs.String()
	if !strings.Contains(out, "authentication failed") {
		t.Errorf("no failure logged:\n%s", out)
	}
	for _, g := range append(guesses, admin) {
		if strings.Contains(out, g) || strings.Contains(out, g[3:]) {
			t.Errorf("the log holds the presented key %q:\n%s", g, out)
		}
	}
}

// TestSignInFailuresCount: wrong keys pasted into the dashboard's sign-in
// count like wrong bearer keys.
func TestSignInFailuresCount(t *testing.T) {
	t.Parallel()
	b, _ := setupAuthLimit(t, 2)
	b.addKey(t, auth.ScopeAdmin)
	var codes []int
	for i := range 3 {
		resp := b.do(call{method: "POST", path: "/v1/session", body: fmt.Sprintf(`{"key":"sk_wrong%d"}`, i), remote: "198.51.100.9:1",
			header: map[string][]string{"Sec-Fetch-Site": {"same-origin"}}})
		codes = append(codes, resp.StatusCode)
	}
	if fmt.Sprint(codes) != "[401 401 429]" {
		t.Errorf("sign-in statuses = %v, want [401 401 429]", codes)
	}
}

// TestAuthFailuresGroupIPv6ByPrefix: an IPv6 client owns its /64, so
// hopping addresses inside it does not reset the count.
func TestAuthFailuresGroupIPv6ByPrefix(t *testing.T) {
	t.Parallel()
	b, _ := setupAuthLimit(t, 2)
	b.addKey(t, auth.ScopeAdmin)
	var codes []int
	for i := range 3 {
		resp := b.do(call{method: "GET", path: "/v1/keys", key: "sk_nope", remote: fmt.Sprintf("[2001:db8:1:2::%x]:1", i+1)})
		codes = append(codes, resp.StatusCode)
	}
	if fmt.Sprint(codes) != "[401 401 429]" {
		t.Errorf("statuses = %v, want [401 401 429]", codes)
	}
}
