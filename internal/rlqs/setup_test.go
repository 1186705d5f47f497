package rlqs_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/envoyrls"
	"github.com/sluicehq/sluice/internal/rlqs"
	"github.com/sluicehq/sluice/internal/rlqs/redisdemand"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

const apiYAML = `
domain: api
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: tb
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 20}
  - key: weekly
    rate_limit: {unit: week, requests_per_unit: 70}
  - key: free
    rate_limit: {unlimited: true}
  - key: closed
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: shadow
    shadow_mode: true
    rate_limit: {name: shadowed, unit: minute, requests_per_unit: 10}
  - key: app
    descriptors:
      - key: user
        rate_limit: {name: per_user, unit: hour, requests_per_unit: 6}
`

var start = time.Unix(1_800_000_000, 0)

// newClock returns a clock the test moves, shared by the servers of a
// test, reading start.
func newClock() *ratelimittest.Clock { return ratelimittest.NewClock(start) }

func parse(t *testing.T, yaml string) *envoyrls.Config {
	t.Helper()
	cfg, err := envoyrls.Parse(map[string][]byte{"api.yaml": []byte(yaml)})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// node is one server under test behind a real gRPC connection.
type node struct {
	srv  *rlqs.Server
	reg  *prometheus.Registry
	conn *grpc.ClientConn
}

// serve starts a server on cfg (Now and Registerer are filled in) behind
// a real gRPC listener on 127.0.0.1. Every stream of the tests comes from
// 127.0.0.1, so unless opts names one, clients are told apart by the API
// key each envoy sends (rlqs.KeyClient), as with --grpc-require-key.
func serve(t *testing.T, cfg *envoyrls.Config, clk *ratelimittest.Clock, opts rlqs.Options) *node {
	t.Helper()
	n := &node{reg: prometheus.NewRegistry()}
	opts.Now, opts.Registerer = clk.Now, n.reg
	if opts.ClientID == nil {
		opts.ClientID = rlqs.KeyClient
	}
	n.srv = rlqs.New(cfg, opts)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	n.srv.Register(gs)
	go gs.Serve(lis) //nolint:errcheck // ends with Stop
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	n.conn = conn
	return n
}

// envoyKeys numbers the envoys' API keys, so every envoy is a client of
// its own.
var envoyKeys atomic.Int64

// redisDemand opens n demand stores on the test Redis sharing one fresh
// key prefix, as n nodes would, or skips without Redis.
func redisDemand(t *testing.T, n int) []rlqs.DemandStore {
	t.Helper()
	url := enginetest.RedisURL(t)
	var tag [6]byte
	_, _ = rand.Read(tag[:])
	prefix := "sluicetest:rlqs:" + hex.EncodeToString(tag[:]) + ":" // keys expire by themselves
	out := make([]rlqs.DemandStore, n)
	for i := range out {
		out[i] = redisdemand.New(enginetest.RedisClient(t, url, enginetest.NoClientCache), prefix)
	}
	return out
}

// envoy is one Envoy's stream, as the rate_limit_quota filter opens it.
type envoy struct {
	t      *testing.T
	stream grpc.BidiStreamingClient[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse]
	cancel context.CancelFunc
	resps  chan *rlqspb.RateLimitQuotaResponse
	domain string // sent in the first report
	sent   bool
}

func (n *node) envoy(t *testing.T) *envoy {
	t.Helper()
	return n.envoyOf(t, fmt.Sprintf("envoy-%d", envoyKeys.Add(1)))
}

// envoyOf opens a stream as the client of API key key ("": none).
func (n *node) envoyOf(t *testing.T, key string) *envoy {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if key != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-api-key", key)
	}
	s, err := rlqspb.NewRateLimitQuotaServiceClient(n.conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e := &envoy{t: t, stream: s, cancel: cancel, resps: make(chan *rlqspb.RateLimitQuotaResponse, 16), domain: "api"}
	go func() {
		defer close(e.resps)
		for {
			r, err := s.Recv()
			if err != nil {
				return
			}
			e.resps <- r
		}
	}()
	return e
}

// usage is one bucket's report: "k=v,k2=v2 allowed/denied elapsed".
type usage struct {
	bucket          map[string]string
	allowed, denied uint64
	elapsed         time.Duration
}

func u(bucket string, allowed, denied uint64, elapsed time.Duration) usage {
	m := map[string]string{}
	for _, kv := range strings.Split(bucket, ",") {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return usage{bucket: m, allowed: allowed, denied: denied, elapsed: elapsed}
}

// report sends one usage report (the domain on the first) and returns the
// answer.
func (e *envoy) report(us ...usage) *rlqspb.RateLimitQuotaResponse {
	e.t.Helper()
	e.post(us...)
	return e.next()
}

// post sends one usage report (the domain on the first) and returns at
// once, leaving its answer in e.resps.
func (e *envoy) post(us ...usage) {
	e.t.Helper()
	m := &rlqspb.RateLimitQuotaUsageReports{}
	if !e.sent {
		m.Domain, e.sent = e.domain, true
	}
	for _, x := range us {
		m.BucketQuotaUsages = append(m.BucketQuotaUsages, &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId: &rlqspb.BucketId{Bucket: x.bucket}, TimeElapsed: durationpb.New(x.elapsed),
			NumRequestsAllowed: x.allowed, NumRequestsDenied: x.denied})
	}
	if err := e.stream.Send(m); err != nil {
		e.t.Fatalf("send: %v", err)
	}
}

// next waits for the next response.
func (e *envoy) next() *rlqspb.RateLimitQuotaResponse {
	e.t.Helper()
	select {
	case r, ok := <-e.resps:
		if !ok {
			e.t.Fatal("the stream ended")
		}
		return r
	case <-time.After(5 * time.Second):
		e.t.Fatal("no response within 5s")
	}
	return nil
}

// none checks that nothing is pushed within d.
func (e *envoy) none(d time.Duration) {
	e.t.Helper()
	select {
	case r := <-e.resps:
		e.t.Fatalf("unexpected push: %s", summary(r))
	case <-time.After(d):
	}
}

// summary describes a response's actions, one per bucket:
// "tenant=acme: rptu 100/MINUTE ttl=30s".
func summary(r *rlqspb.RateLimitQuotaResponse) string {
	var parts []string
	for _, a := range r.GetBucketAction() {
		var keys []string
		for k, v := range a.GetBucketId().GetBucket() {
			keys = append(keys, k+"="+v)
		}
		sort.Strings(keys)
		parts = append(parts, strings.Join(keys, ",")+": "+action(a))
	}
	return strings.Join(parts, "; ")
}

// sorted is summary with the actions sorted, for pushes (whose order is
// not the reports').
func sorted(r *rlqspb.RateLimitQuotaResponse) string {
	parts := strings.Split(summary(r), "; ")
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

func action(a *rlqspb.RateLimitQuotaResponse_BucketAction) string {
	if a.GetAbandonAction() != nil {
		return "abandon"
	}
	q := a.GetQuotaAssignmentAction()
	ttl := q.GetAssignmentTimeToLive().AsDuration()
	s := q.GetRateLimitStrategy()
	var what string
	switch {
	case s.GetRequestsPerTimeUnit() != nil:
		p := s.GetRequestsPerTimeUnit()
		what = fmt.Sprintf("rptu %d/%s", p.RequestsPerTimeUnit, p.TimeUnit)
	case s.GetTokenBucket() != nil:
		b := s.GetTokenBucket()
		what = fmt.Sprintf("tb max=%d fill=%d/%s", b.MaxTokens, b.GetTokensPerFill().GetValue(), b.GetFillInterval().AsDuration())
	default:
		what = s.GetBlanketRule().String()
	}
	return fmt.Sprintf("%s ttl=%s", what, ttl)
}

// share is the requests per minute (or per the strategy's unit) the one
// action of r assigns.
func share(t *testing.T, r *rlqspb.RateLimitQuotaResponse) uint64 {
	t.Helper()
	as := r.GetBucketAction()
	if len(as) != 1 {
		t.Fatalf("%d actions, want 1: %s", len(as), summary(r))
	}
	p := as[0].GetQuotaAssignmentAction().GetRateLimitStrategy().GetRequestsPerTimeUnit()
	if p == nil || p.TimeUnit != typev3.RateLimitUnit_MINUTE {
		t.Fatalf("not a per-minute assignment: %s", summary(r))
	}
	return p.RequestsPerTimeUnit
}

// metric reads one series' value (counter or gauge).
func (n *node) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	fams, err := n.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m, labels) {
				if g := m.GetGauge(); g != nil {
					return g.GetValue()
				}
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func hasLabels(m *dto.Metric, kv []string) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == kv[i] && l.GetValue() == kv[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}
