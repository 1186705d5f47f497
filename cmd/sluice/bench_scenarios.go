package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/bench"
)

// targetSluice and targetCompare label the table's rows.
const (
	targetSluice  = "sluice"
	targetCompare = "compare"
)

// benchCheckHTTP drives POST /v1/ratelimit/check, then the same bodies at
// --compare's HTTP endpoint.
func benchCheckHTTP(ctx context.Context, b *benchRun) ([]bench.Result, error) {
	policy := b.policy
	if policy == "" {
		_, err := b.c.PutPolicy(ctx, client.Policy{Name: benchPolicy, Algorithm: "token_bucket", Limit: benchLimit, Period: "1s",
			Description: "made by sluice bench: high enough never to refuse"})
		if err != nil {
			return nil, fmt.Errorf("create policy %s (or name one with --policy): %w", benchPolicy, err)
		}
		policy = benchPolicy
	}
	bodies := make([][]byte, b.keys)
	for i := range bodies {
		bodies[i] = []byte(`{"policy":` + strconv.Quote(policy) + `,"key":"bench-` + strconv.Itoa(i) + `"}`)
	}
	req := func(url string) func(int64) bench.Request {
		return func(seq int64) bench.Request {
			return bench.Request{Method: http.MethodPost, URL: url, Body: bodies[seq%int64(len(bodies))]}
		}
	}
	var refused atomic.Int64
	res, err := bench.Run(ctx, "check-http", targetSluice, b.opts,
		bench.HTTP(b.hc, b.apiKey, req(b.server+"/v1/ratelimit/check"), bench.ExpectDecision(&refused)))
	if err != nil {
		return nil, err
	}
	res.Note = "refused " + strconv.FormatInt(refused.Load(), 10)
	out := []bench.Result{res}
	if b.compareHTTP != "" {
		res, err := bench.Run(ctx, "check-http", targetCompare, b.opts, bench.HTTP(b.hc, "", req(b.compareHTTP), bench.ExpectSuccess))
		if err != nil {
			return out, err
		}
		out = append(out, res)
	}
	return out, nil
}

// benchCheckGRPC drives ShouldRateLimit on Sluice's gRPC listener, then the
// same requests at --compare's gRPC address.
func benchCheckGRPC(ctx context.Context, b *benchRun) ([]bench.Result, error) {
	if b.grpcAddr == "" {
		return nil, errors.New("--grpc-server is needed with --server")
	}
	reqs := bench.RLSRequests(b.domain, b.descriptor, b.keys, b.perCall)
	var out []bench.Result
	for _, t := range []struct{ label, addr string }{{targetSluice, b.grpcAddr}, {targetCompare, b.compareGRPC}} {
		if t.addr == "" {
			continue
		}
		res, err := b.runRLS(ctx, t.label, t.addr, reqs)
		if err != nil {
			return out, err
		}
		out = append(out, res)
	}
	return out, nil
}

// grpcConns is how many connections the callers share: a few, as Envoy's
// workers would hold, so one HTTP/2 connection is not the bottleneck.
const grpcConns = 4

func (b *benchRun) runRLS(ctx context.Context, label, addr string, reqs []*rlspb.RateLimitRequest) (bench.Result, error) {
	clients := make([]rlspb.RateLimitServiceClient, grpcConns)
	for i := range clients {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return bench.Result{}, fmt.Errorf("dial %s: %w", addr, err)
		}
		defer conn.Close()
		clients[i] = rlspb.NewRateLimitServiceClient(conn)
	}
	var over atomic.Int64
	res, err := bench.Run(ctx, "check-grpc", label, b.opts, func(worker int) bench.Op {
		return bench.ShouldRateLimit(clients[worker%len(clients)], reqs, &over)(worker)
	})
	per := len(reqs[0].Descriptors)
	res.Note = fmt.Sprintf("%d descriptor(s)/call, over_limit %d", per, over.Load())
	if per > 1 {
		res.Note += fmt.Sprintf(", %.0f checks/s", res.Rate()*float64(per))
	}
	return res, err
}

// benchRedirect makes --links links, then drives GET /{code} over them
// (302 expected), then GETs --compare's HTTP endpoint with the same load.
func benchRedirect(ctx context.Context, b *benchRun) ([]bench.Result, error) {
	urls := make([]string, b.links)
	for i := range urls {
		l, err := b.c.Shorten(ctx, client.LinkRequest{URL: "https://example.com/bench/" + strconv.Itoa(i)})
		if err != nil {
			return nil, fmt.Errorf("create link %d: %w", i, err)
		}
		urls[i] = b.server + "/" + l.Code
	}
	get := func(seq int64) bench.Request {
		return bench.Request{Method: http.MethodGet, URL: urls[seq%int64(len(urls))]}
	}
	res, err := bench.Run(ctx, "redirect", targetSluice, b.opts, bench.HTTP(b.hc, "", get, bench.ExpectStatus(http.StatusFound)))
	if err != nil {
		return nil, err
	}
	res.Note = strconv.Itoa(len(urls)) + " links"
	out := []bench.Result{res}
	if b.compareHTTP != "" {
		get := func(int64) bench.Request { return bench.Request{Method: http.MethodGet, URL: b.compareHTTP} }
		res, err := bench.Run(ctx, "redirect", targetCompare, b.opts, bench.HTTP(b.hc, "", get, bench.ExpectSuccess))
		if err != nil {
			return out, err
		}
		out = append(out, res)
	}
	return out, nil
}
