package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/client"
)

// DefaultPolicy is the policy check-http creates when Session.Policy is
// empty, and DefaultDomain the Envoy domain EnvoyConfig describes.
const (
	DefaultPolicy = "sluice-bench"
	DefaultDomain = "sluice-bench"
	// LocalDomain is the same rule with sync: local, decided from the
	// node's share and synced with the store every 50 ms.
	LocalDomain = "sluice-bench-local"
	// Limit is high enough that a benchmark measures admitted checks.
	Limit = 1_000_000_000
)

// EnvoyConfig returns Envoy rate limit configuration files, by name, that
// give check-grpc DefaultDomain and LocalDomain with a limit never reached,
// for a node started for a benchmark.
func EnvoyConfig() map[string][]byte {
	return map[string][]byte{
		"bench.yaml": fmt.Appendf(nil, "domain: %s\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: second, requests_per_unit: %d}\n",
			DefaultDomain, Limit),
		"bench-local.yaml": fmt.Appendf(nil, "domain: %s\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: second, requests_per_unit: %d, sync: local}\n",
			LocalDomain, Limit),
	}
}

// Session is one benchmark's settings and targets: the load, the Sluice
// server it drives and, optionally, another implementation it compares
// with. Fill it in, then call Run. A Session runs one scenario at a time
// and is not safe for concurrent use.
type Session struct {
	// Options bound each run of each scenario on each target.
	Options Options
	// Server is Sluice's HTTP base URL, without a trailing slash.
	Server string
	// GRPCAddr is Sluice's gRPC address (host:port); check-grpc fails
	// when it is empty.
	GRPCAddr string
	// APIKey is sent to Server; with the admin scope check-http can create
	// its policy and redirect its links. check-grpc sends it to GRPCAddr
	// too, as "authorization: Bearer" metadata, when it is set.
	APIKey string
	// TLS is how an https:// Server is dialed. If nil, Go's defaults (the
	// system's certificate authorities).
	TLS *tls.Config
	// GRPCTLS, when not nil, dials GRPCAddr over TLS with it (a client
	// certificate in its Certificates); nil dials plaintext HTTP/2.
	GRPCTLS *tls.Config
	// Keys is how many rate limit keys the checks spread over.
	Keys int
	// Policy is check-http's policy; if empty, DefaultPolicy is created.
	Policy string
	// Domain and Descriptor are check-grpc's Envoy domain and descriptor
	// key.
	Domain, Descriptor string
	// PerCall is how many descriptors each ShouldRateLimit call carries.
	PerCall int
	// Links is how many links redirect creates and spreads its GETs over.
	Links int
	// UserAgent is what redirect sends; if empty, BrowserUserAgent.
	UserAgent string
	// Rounds is how many times check-http and redirect run on each target,
	// alternating Sluice and the compared one; their rows add the rounds
	// up. Zero means one.
	Rounds int
	// Campaign is how many users the campaign scenario notifies.
	Campaign int
	// NotifyMix is the channels of the notify scenario: "all" (email, sms
	// and push each) or "seeds" (1.75 deliveries per notification).
	NotifyMix string
	// DrainTimeout bounds the wait for notifications to be delivered, and
	// for workflow runs to reach their waits and ends.
	DrainTimeout time.Duration
	// Workflows sizes the workflow scenarios.
	Workflows WorkflowOptions
	// CompareHTTP and CompareGRPC are another implementation's HTTP
	// endpoint and Envoy RLS address; empty ones are not driven.
	CompareHTTP, CompareGRPC string
	// CompareGRPCTLS is GRPCTLS for CompareGRPC; nil dials plaintext.
	CompareGRPCTLS *tls.Config
	// Log receives a line as each scenario starts. If nil, lines are
	// discarded.
	Log io.Writer

	hc *http.Client
	c  *client.Client
}

// Scenario is one load a Session can drive. Its run returns a row per
// target it drove (Sluice, then the compared implementation when it
// applies).
type Scenario struct {
	// Name is what the command line and the table's rows call it
	// ("check-http"); Summary is a line for the usage text.
	Name, Summary string
	run           func(ctx context.Context, s *Session) ([]Result, error)
	// notDefault scenarios run only when named.
	notDefault bool
}

// scenarios in the order they run and print.
var scenarios = []Scenario{
	{Name: "check-http", Summary: "POST /v1/ratelimit/check, one key per request spread over --keys keys", run: checkHTTP},
	{Name: "check-grpc", Summary: "Envoy RLS ShouldRateLimit through the generated client", run: checkGRPC},
	{Name: "redirect", Summary: "GET /{code} over --links links made first", run: redirect},
	{Name: "notify", Summary: "POST /v1/notifications (accept rate), then the time until all are sent to the outbox", run: notify},
	{Name: "campaign", Summary: "--campaign marketing notifications in batches while an OTP is sent every 10ms: OTP latency", run: campaign},
	{Name: "events", Summary: "POST /v1/events, each starting a run of one send: accept rate, then the runs' drain", run: events, notDefault: true},
	{Name: "workflow-resume", Summary: "--waiting-runs runs wait for an event; events at --resume-rate resume them: resume and deadline lateness", run: resume, notDefault: true},
	{Name: "cart", Summary: "--cart-users users through the 5-step abandoned cart, half ordering: first event to last run ended", run: cart, notDefault: true},
}

// Scenarios returns every scenario, in the order they run and print.
func Scenarios() []Scenario { return slices.Clone(scenarios) }

// PickScenarios returns the named scenarios in the order named, or the
// default ones when names is empty.
func PickScenarios(names []string) ([]Scenario, error) {
	if len(names) == 0 {
		var out []Scenario
		for _, s := range scenarios {
			if !s.notDefault {
				out = append(out, s)
			}
		}
		return out, nil
	}
	var out []Scenario
	for _, n := range names {
		i := slices.IndexFunc(scenarios, func(s Scenario) bool { return s.Name == n })
		if i < 0 {
			return nil, fmt.Errorf("unknown scenario %q", n)
		}
		out = append(out, scenarios[i])
	}
	return out, nil
}

// SetCompare reads a comparison target: "bare" starts StartBare's servers
// (stop stops them), an http:// or https:// URL sets CompareHTTP, and
// anything else is taken as a gRPC address for CompareGRPC.
func (s *Session) SetCompare(target string) (stop func(), err error) {
	switch {
	case target == "bare":
		b, err := StartBare()
		if err != nil {
			return nil, err
		}
		s.CompareHTTP, s.CompareGRPC = b.HTTPURL, b.GRPCAddr
		return b.Stop, nil
	case strings.HasPrefix(target, "http://"), strings.HasPrefix(target, "https://"):
		s.CompareHTTP = target
	default:
		s.CompareGRPC = target
	}
	return func() {}, nil
}

// Run drives scenarios in order and writes one table of every row to w.
// It stops at the first scenario that fails, after writing the rows so
// far, and after the scenario running when ctx is done.
func (s *Session) Run(ctx context.Context, w io.Writer, scenarios []Scenario) error {
	log := s.Log
	if log == nil {
		log = io.Discard
	}
	s.hc = NewHTTPClient(s.Options.Workers, 10*time.Second)
	if s.TLS != nil {
		s.hc.Transport.(*http.Transport).TLSClientConfig = s.TLS
	}
	s.c = &client.Client{BaseURL: s.Server, APIKey: s.APIKey, HTTPClient: s.hc}
	var results []Result
	for _, sc := range scenarios {
		fmt.Fprintf(log, "bench: %s...\n", sc.Name)
		rs, err := sc.run(ctx, s)
		results = append(results, rs...)
		if err != nil {
			_ = WriteTable(w, results)
			return fmt.Errorf("%s: %w", sc.Name, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return WriteTable(w, results)
}
