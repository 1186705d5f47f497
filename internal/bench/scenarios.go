package bench

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

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
	out, err := s.sideBySide(ctx, "check-http",
		HTTP(s.hc, s.APIKey, req(s.Server+"/v1/ratelimit/check"), ExpectDecision(&refused)),
		HTTP(s.hc, "", req(s.CompareHTTP), ExpectSuccess))
	if len(out) > 0 {
		out[0].Note = "refused " + strconv.FormatInt(refused.Load(), 10) + out[0].Note
	}
	return out, err
}

// sideBySide runs sluice, then compare when CompareHTTP is set, Rounds
// times alternating (so both sides see the same machine, which matters on
// a shared one), and returns one row per target: the rounds added up. The
// Sluice row's note ends with its rate as a share of compare's.
func (s *Session) sideBySide(ctx context.Context, scenario string, sluice, compare func(worker int) Op) ([]Result, error) {
	var rows []Result
	targets := []func(worker int) Op{sluice}
	if s.CompareHTTP != "" {
		targets = append(targets, compare)
	}
	for round := range max(1, s.Rounds) {
		for i, op := range targets {
			label := targetSluice
			if i > 0 {
				label = targetCompare
			}
			res, err := Run(ctx, scenario, label, s.Options, op)
			if round == 0 {
				rows = append(rows, res)
			} else {
				rows[i] = addResults(rows[i], res)
			}
			if err != nil {
				return rows, err
			}
		}
	}
	if len(rows) == 2 && rows[1].Rate() > 0 {
		rows[0].Note += fmt.Sprintf(", %.0f%% of compare", 100*rows[0].Rate()/rows[1].Rate())
	}
	return rows, nil
}

// addResults adds b, a later run on the same target, to a.
func addResults(a, b Result) Result {
	a.OK += b.OK
	a.Errors += b.Errors
	a.Elapsed += b.Elapsed
	a.Latency.Merge(b.Latency)
	if a.FirstError == "" {
		a.FirstError = b.FirstError
	}
	return a
}

// checkGRPC drives ShouldRateLimit on Sluice's gRPC listener, then the
// same requests at CompareGRPC.
func checkGRPC(ctx context.Context, s *Session) ([]Result, error) {
	if s.GRPCAddr == "" {
		return nil, errors.New("--grpc-server is needed with --server")
	}
	reqs := RLSRequests(s.Domain, s.Descriptor, s.Keys, s.PerCall)
	var out []Result
	for _, t := range []struct {
		label, addr, key string
		tls              *tls.Config
	}{{targetSluice, s.GRPCAddr, s.APIKey, s.GRPCTLS}, {targetCompare, s.CompareGRPC, "", s.CompareGRPCTLS}} {
		if t.addr == "" {
			continue
		}
		res, err := s.runRLS(ctx, t.label, t.addr, t.key, t.tls, reqs)
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

// runRLS drives ShouldRateLimit at addr over grpcConns connections, TLS
// ones when tc is not nil, with key as a Bearer token when not empty. One
// call made first must succeed, so a wrong address, transport or key
// fails the scenario with the reason instead of a run of errors.
func (s *Session) runRLS(ctx context.Context, label, addr, key string, tc *tls.Config, reqs []*rlspb.RateLimitRequest) (Result, error) {
	creds := insecure.NewCredentials()
	if tc != nil {
		creds = credentials.NewTLS(tc)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if key != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{"Bearer " + key}))
	}
	clients := make([]rlspb.RateLimitServiceClient, grpcConns)
	for i := range clients {
		conn, err := grpc.NewClient(addr, opts...)
		if err != nil {
			return Result{}, fmt.Errorf("dial %s: %w", addr, err)
		}
		defer conn.Close()
		clients[i] = rlspb.NewRateLimitServiceClient(conn)
	}
	tlsFlag := "--grpc-tls"
	if label == targetCompare {
		tlsFlag = "--compare-tls"
	}
	if err := firstCall(ctx, clients[0], addr, key, tlsFlag, tc, reqs[0]); err != nil {
		return Result{}, err
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

// firstCall makes one ShouldRateLimit call, bounded by 10 s, and explains
// its failure: the likely flag to give for a refused handshake or key
// (tlsFlag is the one that turns TLS on).
func firstCall(ctx context.Context, c rlspb.RateLimitServiceClient, addr, key, tlsFlag string, tc *tls.Config, req *rlspb.RateLimitRequest) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := c.ShouldRateLimit(ctx, req)
	if err == nil {
		return nil
	}
	hint := ""
	switch st, _ := status.FromError(err); st.Code() {
	case codes.Unauthenticated, codes.PermissionDenied:
		if key == "" {
			hint = " (the server wants an API key: --api-key with the ratelimit:check scope)"
		} else {
			hint = " (--api-key needs the ratelimit:check or admin scope)"
		}
	case codes.Unavailable, codes.DeadlineExceeded:
		var unknownCA x509.UnknownAuthorityError
		var badName x509.HostnameError
		switch msg := err.Error(); {
		case errors.As(err, &unknownCA), strings.Contains(msg, "x509: certificate signed by unknown authority"):
			hint = " (--grpc-ca-file for a private CA)"
		case errors.As(err, &badName), strings.Contains(msg, "x509: certificate is valid for"):
			hint = " (--grpc-server-name for the name the certificate holds)"
		case tc == nil:
			hint = " (a TLS listener? " + tlsFlag + ", with --grpc-ca-file for a private CA)"
		case tc.Certificates == nil:
			hint = " (a server that wants a client certificate? --grpc-cert-file and --grpc-key-file)"
		}
	}
	return fmt.Errorf("first ShouldRateLimit call to %s: %w%s", addr, err, hint)
}

// bearer sends a key as "authorization" metadata on every call. It does
// not require TLS: a node reached in plaintext gets the key in clear text,
// as it warns when it requires one.
type bearer struct{ value string }

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": b.value}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

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
	ua := cmp.Or(s.UserAgent, BrowserUserAgent)
	get := func(url func(seq int64) string) func(int64) Request {
		return func(seq int64) Request { return Request{Method: http.MethodGet, URL: url(seq), UserAgent: ua} }
	}
	codes := func(seq int64) string { return urls[seq%int64(len(urls))] }
	out, err := s.sideBySide(ctx, "redirect",
		HTTP(s.hc, "", get(codes), ExpectStatus(http.StatusFound)),
		HTTP(s.hc, "", get(func(int64) string { return s.CompareHTTP }), ExpectSuccess))
	if err != nil || len(out) == 0 {
		return out, err
	}
	recorded, err := s.awaitHits(ctx, codes, out[0].OK)
	if err != nil {
		return out, err
	}
	// Requests cut short by the end of a run may be answered and recorded
	// too, so more hits than OK redirects is normal.
	out[0].Note = fmt.Sprintf("%d links, %d hits recorded for %d redirects%s", len(urls), recorded, out[0].OK, out[0].Note)
	if recorded < out[0].OK {
		return out, fmt.Errorf("%d redirects answered but %d hits recorded", out[0].OK, recorded)
	}
	return out, nil
}

// BrowserUserAgent is the User-Agent redirect sends by default: a browser's,
// so hits count as human clicks (a tool's is recorded as a bot hit).
const BrowserUserAgent = "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0"

// awaitHits polls the links' counts until they add up to want (clicks
// and bot hits: every redirect answered is recorded, after the flusher's
// next run) or 15 s pass, and returns the last total. Links the
// benchmark did not make may hold earlier hits, so only its own are read.
func (s *Session) awaitHits(ctx context.Context, url func(seq int64) string, want int64) (int64, error) {
	var codes []string
	for i := int64(0); i < int64(s.Links); i++ {
		codes = append(codes, strings.TrimPrefix(url(i), s.Server+"/"))
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		var total int64
		for _, code := range codes {
			l, err := s.c.Link(ctx, code)
			if err != nil {
				return total, fmt.Errorf("count the hits of %s: %w", code, err)
			}
			total += l.Clicks + l.BotHits
		}
		if total >= want || time.Now().After(deadline) {
			return total, nil
		}
		select {
		case <-ctx.Done():
			return total, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
