package envoyrls_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/envoyrls"
	"github.com/sluicehq/sluice/ratelimit"
)

// TestAuthFailureLimit runs the service on a real TCP listener with a
// limit of 3 failed keys a minute (a token bucket on the memory store, on
// the test's clock): after 3 unknown keys the 4th call, and then even a
// valid key, answer RESOURCE_EXHAUSTED, while another client address and
// calls without a key are unaffected; once the bucket refills (20 s on the
// clock) the valid key is served again.
func TestAuthFailureLimit(t *testing.T) {
	t.Parallel()
	db := openKeys(t)
	good, _ := newKey(t, db, auth.ScopeRatelimitCheck)
	bad := "sk_" + strings.Repeat("B", 43)
	clk := newClock()
	store := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: clk.Now})
	lim, err := ratelimit.NewPolicyLimiter(store, ratelimit.Policy{Name: "auth_failures",
		Algorithm: ratelimit.TokenBucket, Limit: 3, Period: time.Minute, Burst: 3})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := envoyrls.Parse(map[string][]byte{"api.yaml": []byte(keysYAML)})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv, err := envoyrls.New(cfg, envoyrls.Options{Store: store, Now: clk.Now, Keys: db, AuthFailures: lim, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	srv.Register(gs)
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)

	// client dials the server from the loopback address from.
	client := func(from string) rlspb.RateLimitServiceClient {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
		conn, err := grpc.NewClient("passthrough:///"+ln.Addr().String(),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }),
			grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return rlspb.NewRateLimitServiceClient(conn)
	}
	guesser, other := client("127.0.0.1"), client("127.0.0.2")
	call := func(c rlspb.RateLimitServiceClient, key string) codes.Code {
		t.Helper()
		ctx := t.Context()
		if key != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "x-api-key", key)
		}
		_, err := c.ShouldRateLimit(ctx, req("api", desc("user", "u1")))
		return status.Code(err)
	}
	expect := func(what string, c rlspb.RateLimitServiceClient, key string, want codes.Code) {
		t.Helper()
		if got := call(c, key); got != want {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
	}

	expect("valid key before any failure", guesser, good, codes.OK)
	for i := range 3 {
		expect("bad key within the limit #"+string(rune('1'+i)), guesser, bad, codes.Unauthenticated)
	}
	expect("4th bad key", guesser, bad, codes.ResourceExhausted)
	expect("valid key while blocked", guesser, good, codes.ResourceExhausted)
	expect("no key while blocked", guesser, "", codes.Unauthenticated)
	expect("another client's valid key", other, good, codes.OK)
	_, err = guesser.ShouldRateLimit(metadata.AppendToOutgoingContext(t.Context(), "x-api-key", good), req("api", desc("user", "u1")))
	if msg := status.Convert(err).Message(); !strings.Contains(msg, "retry after 20s") {
		t.Errorf("refusal %q does not say when to retry (20s)", msg)
	}

	clk.Advance(19 * time.Second)
	expect("valid key a second before the bucket refills", guesser, good, codes.ResourceExhausted)
	clk.Advance(time.Second)
	expect("valid key once the bucket refilled", guesser, good, codes.OK)

	if got := refusedCount(t, reg, "ResourceExhausted"); got != 4 {
		t.Errorf("sluice_envoy_auth_refused_total{code=ResourceExhausted} = %v, want 4", got)
	}
}

// refusedCount reads sluice_envoy_auth_refused_total{code}.
func refusedCount(t *testing.T, reg *prometheus.Registry, code string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_envoy_auth_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" && l.GetValue() == code {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
