package envoyrls_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/envoyrls"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// start is a moment on a whole hour, so minute and hour windows start now.
var start = time.Unix(1_800_000_000, 0)

// newClock returns a clock the test moves, shared by the store and the
// server, reading start.
func newClock() *ratelimittest.Clock { return ratelimittest.NewClock(start) }

// bundle is one server under test and the real generated client talking to
// it over an in-process connection.
type bundle struct {
	client rlspb.RateLimitServiceClient
	server *envoyrls.Server
	store  ratelimit.Store
	reg    *prometheus.Registry
	clock  *ratelimittest.Clock
	logs   *enginetest.LogBuffer
}

// setup starts a server with the given YAML files (name: contents) and
// options (Store, Now, Logger and Registerer are filled in when nil).
func setup(t *testing.T, files map[string]string, opts envoyrls.Options) *bundle {
	t.Helper()
	raw := map[string][]byte{}
	for n, y := range files {
		raw[n] = []byte(y)
	}
	cfg, err := envoyrls.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, cfg, opts)
}

func serve(t *testing.T, cfg *envoyrls.Config, opts envoyrls.Options) *bundle {
	t.Helper()
	return serveOn(t, cfg, opts, backends[0])
}

// backend opens a counter store on a clock.
type backend struct {
	name string
	open func(t *testing.T, now func() time.Time) ratelimit.Store
}

// backends are the stores the service is tested on: the same test body
// runs against each.
var backends = []backend{
	{"memory", func(_ *testing.T, now func() time.Time) ratelimit.Store {
		return ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: now})
	}},
	{"redis", func(t *testing.T, now func() time.Time) ratelimit.Store { return redisStores(t, 1, now)[0] }},
}

// redisStores opens n stores on the test Redis sharing one fresh key
// prefix, as n nodes sharing a server would, or skips without Redis.
func redisStores(t *testing.T, n int, now func() time.Time) []ratelimit.Store {
	t.Helper()
	url := enginetest.RedisURL(t)
	var tag [6]byte
	_, _ = rand.Read(tag[:])
	// Keys expire by themselves: the store sets a TTL on every key.
	prefix := "sluicetest:envoy:" + hex.EncodeToString(tag[:]) + ":"
	out := make([]ratelimit.Store, n)
	for i := range out {
		rc := enginetest.RedisClient(t, url, enginetest.NoClientCache)
		var err error
		if out[i], err = redisstore.New(rc, redisstore.Options{Prefix: prefix, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func serveOn(t *testing.T, cfg *envoyrls.Config, opts envoyrls.Options, be backend) *bundle {
	t.Helper()
	b := &bundle{clock: newClock(), reg: prometheus.NewRegistry(), logs: &enginetest.LogBuffer{}}
	if opts.Store == nil {
		opts.Store = be.open(t, b.clock.Now)
	}
	if opts.Now == nil {
		opts.Now = b.clock.Now
	}
	opts.Logger = slog.New(slog.NewTextHandler(b.logs, nil))
	opts.Registerer = b.reg
	b.store = opts.Store
	srv, err := envoyrls.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	b.server = srv
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer()
	b.server.Register(gs)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	b.client = rlspb.NewRateLimitServiceClient(conn)
	return b
}

// call sends one request and fails the test on a transport error.
func (b *bundle) call(t *testing.T, req *rlspb.RateLimitRequest) *rlspb.RateLimitResponse {
	t.Helper()
	resp, err := b.client.ShouldRateLimit(context.Background(), req)
	if err != nil {
		t.Fatalf("ShouldRateLimit(%v) = %v", req, err)
	}
	return resp
}

// req builds a request for domain with descriptors.
func req(domain string, ds ...*commonpb.RateLimitDescriptor) *rlspb.RateLimitRequest {
	return &rlspb.RateLimitRequest{Domain: domain, Descriptors: ds}
}

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *commonpb.RateLimitDescriptor {
	d := &commonpb.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &commonpb.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// metric returns the value of a counter with the given labels (name=value
// pairs), or 0 when it has not been created.
func (b *bundle) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := b.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.Metric {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.Label {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
