package bench

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
)

// targetSluice and targetCompare label the table's rows.
const (
	targetSluice  = "sluice"
	targetCompare = "compare"
)

// checkHTTP drives POST /v1/ratelimit/check, then the same bodies at
// CompareHTTP.
func checkHTTP(ctx context.Context, s *Session) ([]Result, error) {
	policy := s.Policy
	if policy == "" {
		_, err := s.c.PutPolicy(ctx, client.Policy{Name: DefaultPolicy, Algorithm: "token_bucket", Limit: Limit, Period: "1s",
			Description: "made by sluice bench: high enough never to refuse"})
		if err != nil {
			return nil, fmt.Errorf("create policy %s (or name one with --policy): %w", DefaultPolicy, err)
		}
		policy = DefaultPolicy
	}
	bodies := make([][]byte, s.Keys)
	for i := range bodies {
		bodies[i] = []byte(`{"policy":` + strconv.Quote(policy) + `,"key":"bench-` + strconv.Itoa(i) + `"}`)
	}
	req := func(url string) func(int64) Request {
		return func(seq int64) Request {
			return Request{Method: http.MethodPost, URL: url, Body: bodies[seq%int64(len(bodies))]}
		}
	}
	var refused atomic.Int64
	res, err := Run(ctx, "check-http", targetSluice, s.Options,
		HTTP(s.hc, s.APIKey, req(s.Server+"/v1/ratelimit/check"), ExpectDecision(&refused)))
	if err != nil {
		return nil, err
	}
	res.Note = "refused " + strconv.FormatInt(refused.Load(), 10)
	out := []Result{res}
	if s.CompareHTTP != "" {
		res, err := Run(ctx, "check-http", targetCompare, s.Options, HTTP(s.hc, "", req(s.CompareHTTP), ExpectSuccess))
		if err != nil {
			return out, err
		}
		out = append(out, res)
	}
	return out, nil
}

// checkGRPC drives ShouldRateLimit on Sluice's gRPC listener, then the
// same requests at CompareGRPC.
func checkGRPC(ctx context.Context, s *Session) ([]Result, error) {
	if s.GRPCAddr == "" {
		return nil, errors.New("--grpc-server is needed with --server")
	}
	reqs := RLSRequests(s.Domain, s.Descriptor, s.Keys, s.PerCall)
	var out []Result
	for _, t := range []struct{ label, addr string }{{targetSluice, s.GRPCAddr}, {targetCompare, s.CompareGRPC}} {
		if t.addr == "" {
			continue
		}
		res, err := s.runRLS(ctx, t.label, t.addr, reqs)
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

func (s *Session) runRLS(ctx context.Context, label, addr string, reqs []*rlspb.RateLimitRequest) (Result, error) {
	clients := make([]rlspb.RateLimitServiceClient, grpcConns)
	for i := range clients {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return Result{}, fmt.Errorf("dial %s: %w", addr, err)
		}
		defer conn.Close()
		clients[i] = rlspb.NewRateLimitServiceClient(conn)
	}
	var over atomic.Int64
	res, err := Run(ctx, "check-grpc", label, s.Options, func(worker int) Op {
		return ShouldRateLimit(clients[worker%len(clients)], reqs, &over)(worker)
	})
	per := len(reqs[0].Descriptors)
	res.Note = fmt.Sprintf("%d descriptor(s)/call, over_limit %d", per, over.Load())
	if per > 1 {
		res.Note += fmt.Sprintf(", %.0f checks/s", res.Rate()*float64(per))
	}
	return res, err
}

// redirect makes Session.Links links, then drives GET /{code} over them
// (302 expected), then GETs CompareHTTP with the same load.
func redirect(ctx context.Context, s *Session) ([]Result, error) {
	urls := make([]string, s.Links)
	for i := range urls {
		l, err := s.c.Shorten(ctx, client.LinkRequest{URL: "https://example.com/bench/" + strconv.Itoa(i)})
		if err != nil {
			return nil, fmt.Errorf("create link %d: %w", i, err)
		}
		urls[i] = s.Server + "/" + l.Code
	}
	get := func(seq int64) Request {
		return Request{Method: http.MethodGet, URL: urls[seq%int64(len(urls))]}
	}
	res, err := Run(ctx, "redirect", targetSluice, s.Options, HTTP(s.hc, "", get, ExpectStatus(http.StatusFound)))
	if err != nil {
		return nil, err
	}
	res.Note = strconv.Itoa(len(urls)) + " links"
	out := []Result{res}
	if s.CompareHTTP != "" {
		get := func(int64) Request { return Request{Method: http.MethodGet, URL: s.CompareHTTP} }
		res, err := Run(ctx, "redirect", targetCompare, s.Options, HTTP(s.hc, "", get, ExpectSuccess))
		if err != nil {
			return out, err
		}
		out = append(out, res)
	}
	return out, nil
}
