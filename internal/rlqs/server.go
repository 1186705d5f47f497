package rlqs

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/envoyrls"
)

// ServiceName is the gRPC service the Server implements.
const ServiceName = "envoy.service.rate_limit_quota.v3.RateLimitQuotaService"

// Defaults of Options.
const (
	DefaultInterval = 10 * time.Second
	// DefaultMaxStreams is Options.MaxStreams's default.
	DefaultMaxStreams = 10_000
	// TTLIntervals is an assignment's time to live in report intervals:
	// a client that misses two reports keeps enforcing its share, and
	// falls back to its expired_assignment_behavior only after a third.
	TTLIntervals = 3
	// ExpiryIntervals is how many report intervals a client's demand
	// lasts without a report before its share is freed.
	ExpiryIntervals = 2
	// growHysteresis: a share that would grow by less than this factor
	// keeps its previous value, so that a steady table does not send a new
	// strategy (which makes Envoy report at once) every interval.
	growHysteresis = 1.05
)

// Log attribute keys.
const (
	logError  = "error"
	logDomain = "domain"
	logSkip   = "unlogged_since_last"
)

// Options configures a Server.
type Options struct {
	// Demand shares every client's demand between the nodes. If nil, a
	// MemoryDemand is used (one node).
	Demand DemandStore
	// DemandTimeout bounds each report's call to Demand; past it the
	// report is answered as when Demand fails. If 0, 250 ms.
	DemandTimeout time.Duration
	// Nodes is how many nodes share Demand. While Demand fails, a node
	// divides limit / Nodes between its own clients (as the rate limiter
	// does while Redis is down). If 0, 1 is used.
	Nodes int
	// DenyUnmatched answers buckets that no rule matches with DENY_ALL.
	// If false (the default), they get ALLOW_ALL.
	DenyUnmatched bool
	// Blocked reports whether an emergency block covers the descriptor
	// entry key=value in domain at now (limits.Rules.EntryBlocked). A
	// bucket with a blocked entry is assigned DENY_ALL until the block
	// ends; every stream re-checks its buckets every BlockCheck. If nil,
	// nothing is blocked.
	Blocked func(domain, key, value string, now time.Time) (until time.Time, blocked bool)
	// BlockCheck is how often a stream re-checks its buckets' blocks. If
	// 0, every second.
	BlockCheck time.Duration
	// DefaultInterval is the report interval assumed for a client until
	// its reports' time_elapsed tell. If 0, DefaultInterval.
	DefaultInterval time.Duration
	// MinFraction of every limit is split evenly among a bucket's
	// clients (see Shares). If 0, DefaultMinFraction.
	MinFraction float64
	// Reauthorize is how often an open stream is authorized again. If 0,
	// 15 seconds.
	Reauthorize time.Duration
	// MaxStreams bounds the streams open at once on this server; more are
	// refused with RESOURCE_EXHAUSTED (Envoy reconnects, through the load
	// balancer to another node). If 0, DefaultMaxStreams.
	MaxStreams int
	// MaxStreamsPerClient bounds the streams one client (ClientID) holds
	// open at once on this server; more are refused with
	// RESOURCE_EXHAUSTED. If 0, DefaultMaxStreamsPerClient.
	MaxStreamsPerClient int
	// MaxBuckets bounds the buckets one stream is tracked for. A report
	// that would pass it (or MaxBucketsPerClient over every stream of the
	// client, or MaxBucketsPerNode over every stream) ends the stream
	// with RESOURCE_EXHAUSTED naming the cap. If 0, DefaultMaxBuckets.
	MaxBuckets int
	// MaxBucketsPerClient: see MaxBuckets. If 0,
	// DefaultMaxBucketsPerClient.
	MaxBucketsPerClient int
	// MaxBucketsPerNode: see MaxBuckets. If 0, DefaultMaxBucketsPerNode.
	MaxBucketsPerNode int
	// MaxReportsPerSecond bounds a stream's usage reports: a token bucket
	// of this rate holding two seconds of it. A report past it ends the
	// stream with RESOURCE_EXHAUSTED. It also bounds the demand store's
	// writes: one per limited bucket of each report. If 0,
	// DefaultMaxReportsPerSecond.
	MaxReportsPerSecond int
	// MaxRequestsPerSecond bounds the counts of one bucket's usage: a
	// report of more requests (allowed and denied) than this times its
	// time_elapsed (at least one second), or of a count past MaxCount,
	// ends the stream with INVALID_ARGUMENT. If 0,
	// DefaultMaxRequestsPerSecond.
	MaxRequestsPerSecond int
	// FirstReportTimeout is how long a new stream may wait before its
	// first usage report; past it the stream ends with DEADLINE_EXCEEDED.
	// If 0, DefaultFirstReportTimeout.
	FirstReportTimeout time.Duration
	// ClientID names the client a stream belongs to, for the per-client
	// caps and for dividing a bucket (a client's streams on a bucket count
	// as one client). If nil, PeerClient (the peer's IP address); Sluice
	// uses KeyClient (the API key) with --grpc-require-key.
	ClientID func(ctx context.Context) string
	// NodeID starts every client name this node makes, so names are
	// unique across nodes. If empty, a random one is used.
	NodeID string
	// Authorize, if set, is asked at the start of every stream and again
	// every Reauthorize while it lasts; an error (a gRPC status) ends the
	// stream with it, so a stream does not outlive a revoked key (while
	// it lasts, only Unauthenticated and PermissionDenied end it: a key
	// store that cannot answer keeps the stream). Sluice
	// hands in the RLS service's API key check (--grpc-require-key).
	Authorize func(ctx context.Context) error
	// Logger receives demand store failures. If nil, nothing is logged.
	Logger *slog.Logger
	// Registerer receives the sluice_rlqs_* metrics. If nil, they are
	// kept but not registered.
	Registerer prometheus.Registerer
	// Now is the clock. If nil, time.Now.
	Now func() time.Time
}

// Server implements envoy.service.rate_limit_quota.v3.RateLimitQuotaService
// on the Envoy rate limit rules (envoyrls.Config). It is safe for
// concurrent use; SetConfig swaps the rules while streams are open, and
// every stream re-evaluates its buckets at once.
type Server struct {
	rlqspb.UnimplementedRateLimitQuotaServiceServer

	opts      Options
	demand    DemandStore
	fallback  MemoryDemand
	divisions shareCache   // each bucket's last division (sharecache.go)
	open      atomic.Int64 // streams open (bounded by Options.MaxStreams)
	caps      caps         // what each client holds (bounds.go)
	ids       idents       // every tracked bucket id, once (bounds.go)
	m         *metrics
	seq       atomic.Uint64

	cfg       atomic.Pointer[envoyrls.Config]
	changedMu sync.Mutex
	changed   chan struct{} // closed and replaced by SetConfig
	done      chan struct{} // closed by Close
	closeOnce sync.Once

	peersMu sync.Mutex
	peers   map[string]map[*stream]struct{} // bucket key: the streams of this node tracking it
	groups  map[string]map[string]*group    // bucket key, client: its streams (group.go)

	lastErrLog  atomic.Int64
	errsSkipped atomic.Int64
}

var _ rlqspb.RateLimitQuotaServiceServer = (*Server)(nil)

// New returns a Server on the rules of cfg (nil: none, every bucket is
// unmatched).
func New(cfg *envoyrls.Config, opts Options) *Server {
	opts.Nodes = max(1, opts.Nodes)
	opts.BlockCheck = cmp.Or(opts.BlockCheck, time.Second)
	opts.DemandTimeout = cmp.Or(opts.DemandTimeout, 250*time.Millisecond)
	opts.DefaultInterval = cmp.Or(opts.DefaultInterval, DefaultInterval)
	opts.MaxBuckets = cmp.Or(opts.MaxBuckets, DefaultMaxBuckets)
	opts.MaxBucketsPerClient = cmp.Or(opts.MaxBucketsPerClient, DefaultMaxBucketsPerClient)
	opts.MaxBucketsPerNode = cmp.Or(opts.MaxBucketsPerNode, DefaultMaxBucketsPerNode)
	opts.MaxStreams = cmp.Or(opts.MaxStreams, DefaultMaxStreams)
	opts.MaxStreamsPerClient = cmp.Or(opts.MaxStreamsPerClient, DefaultMaxStreamsPerClient)
	opts.MaxReportsPerSecond = cmp.Or(opts.MaxReportsPerSecond, DefaultMaxReportsPerSecond)
	opts.MaxRequestsPerSecond = cmp.Or(opts.MaxRequestsPerSecond, DefaultMaxRequestsPerSecond)
	opts.FirstReportTimeout = cmp.Or(opts.FirstReportTimeout, DefaultFirstReportTimeout)
	if opts.ClientID == nil {
		opts.ClientID = PeerClient
	}
	opts.Reauthorize = cmp.Or(opts.Reauthorize, 15*time.Second)
	if opts.MinFraction <= 0 || opts.MinFraction > 1 {
		opts.MinFraction = DefaultMinFraction
	}
	if opts.NodeID == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		opts.NodeID = hex.EncodeToString(b[:])
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{opts: opts, demand: opts.Demand,
		changed: make(chan struct{}), done: make(chan struct{}), peers: map[string]map[*stream]struct{}{},
		groups: map[string]map[string]*group{}}
	s.m = newMetrics(opts.Registerer, s.sizes)
	if s.demand == nil {
		s.demand = &s.fallback
	}
	s.cfg.Store(cfg)
	return s
}

// Register registers s on a gRPC server.
func (s *Server) Register(r grpc.ServiceRegistrar) {
	rlqspb.RegisterRateLimitQuotaServiceServer(r, s)
}

// SetConfig puts cfg in force and has every open stream re-evaluate its
// buckets: a bucket whose rule is gone is abandoned, one whose rule
// changed gets its new assignment.
func (s *Server) SetConfig(cfg *envoyrls.Config) {
	s.cfg.Store(cfg)
	s.changedMu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.changedMu.Unlock()
}

// Close ends every open stream with UNAVAILABLE, and every later one at
// once, so a stopping node's gRPC server can drain: the Envoys reconnect
// to another node and keep their assignments meanwhile.
func (s *Server) Close() { s.closeOnce.Do(func() { close(s.done) }) }

func (s *Server) configChanged() <-chan struct{} {
	s.changedMu.Lock()
	defer s.changedMu.Unlock()
	return s.changed
}

// stream is one Envoy's subscription: its domain and buckets.
type stream struct {
	client   string // unique: the stream's name in metrics
	clientID string // Options.ClientID: whose stream it is
	group    string // the client's name in demand tables (group.go)
	domain   string
	label    string // domain's metric label: "" when not configured
	buckets  map[string]*bucket
	// pokes names buckets to re-evaluate because another stream of this
	// node joined or left them. Never closed; a full channel drops the
	// poke (the next report re-evaluates anyway).
	pokes chan string
}

// bucket is one bucket of a stream.
type bucket struct {
	key    string // the hash of domain and bucket id, the same on every node
	*ident        // the id, held once by the node (bounds.go)

	matched bool
	limit   envoyrls.Limit
	labels  ruleLabels
	blocked bool

	interval       time.Duration // the client's report interval, as its reports show
	learned        bool          // interval comes from a report, not the default
	lastReport     time.Time     // the demand expires ExpiryIntervals after it
	grew           bool          // the last evaluation raised the share
	rate           float64       // demand per rule period
	rated          bool
	pendN          uint64 // requests reported since the rate was last set
	pendE          time.Duration
	allowed        uint64 // the last report's counts (metrics, shadow rules)
	denied         uint64
	allowedElapsed time.Duration // and over how long

	share  float64 // last assigned share (limited rules)
	action *rlqspb.RateLimitQuotaResponse_BucketAction
}

// StreamRateLimitQuotas implements RateLimitQuotaServiceServer: every usage
// report is answered with one action per reported bucket; assignments are
// also pushed when the rules change or a block starts or ends.
func (s *Server) StreamRateLimitQuotas(gs grpc.BidiStreamingServer[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse]) error {
	ctx := gs.Context()
	if s.opts.Authorize != nil {
		if err := s.opts.Authorize(ctx); err != nil {
			return err
		}
	}
	st, err := s.admit(ctx)
	if err != nil {
		return err
	}
	defer s.close(st)

	reports := make(chan *rlqspb.RateLimitQuotaUsageReports)
	recvErr := make(chan error, 1)
	go func() { // owned by this call: it ends when Recv fails, which the stream's end makes it do
		for {
			m, err := gs.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case reports <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	tick := time.NewTicker(s.opts.BlockCheck)
	defer tick.Stop()
	first := time.NewTimer(s.opts.FirstReportTimeout)
	defer first.Stop()
	firstC := first.C // nil once a report came
	reportRate := rate.NewLimiter(rate.Limit(s.opts.MaxReportsPerSecond), 2*s.opts.MaxReportsPerSecond)
	authorized := s.opts.Now()
	for {
		changed := s.configChanged()
		var actions []*rlqspb.RateLimitQuotaResponse_BucketAction
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-s.done:
			return status.Error(codes.Unavailable, "the node is shutting down")
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-firstC:
			s.m.refusedFor(reasonFirstReport)
			return status.Errorf(codes.DeadlineExceeded, "no usage report within %v of the stream's start (rlqs.first_report_timeout)", s.opts.FirstReportTimeout)
		case m := <-reports:
			firstC = nil
			if !reportRate.AllowN(s.opts.Now(), 1) {
				s.m.refusedFor(reasonReportRate)
				return exhausted("more than %d usage reports a second on this stream (rlqs.max_reports_per_second)", s.opts.MaxReportsPerSecond)
			}
			if err := s.check(st, m); err != nil {
				s.m.refusedFor(reasonInvalid)
				return err
			}
			if actions, err = s.report(ctx, st, m); err != nil {
				return err
			}
		case <-changed:
			actions = s.reassess(ctx, st, false)
		case <-tick.C:
			if now := s.opts.Now(); s.opts.Authorize != nil && now.Sub(authorized) >= s.opts.Reauthorize {
				switch err := s.opts.Authorize(ctx); status.Code(err) {
				case codes.OK:
					authorized = now
				case codes.Unauthenticated, codes.PermissionDenied:
					return err // the key was revoked meanwhile
				default: // the key store cannot tell now: keep the stream, ask again next tick
				}
			}
			actions = s.reassess(ctx, st, true)
		case key := <-st.pokes:
			actions = s.reassessBucket(ctx, st, key)
		}
		if len(actions) == 0 {
			continue
		}
		if err := gs.Send(&rlqspb.RateLimitQuotaResponse{BucketAction: actions}); err != nil {
			return err
		}
		s.m.assignments.Add(float64(len(actions)))
	}
}

// admit opens a stream for ctx's client, or refuses it past
// Options.MaxStreams or MaxStreamsPerClient.
func (s *Server) admit(ctx context.Context) (*stream, error) {
	if s.open.Add(1) > int64(s.opts.MaxStreams) {
		s.open.Add(-1)
		s.m.refused.Inc()
		s.m.refusedFor(reasonStreams)
		return nil, exhausted("this node holds %d rate limit quota streams, as many as it may (rlqs.max_streams); reconnect to another", s.opts.MaxStreams)
	}
	client := s.opts.ClientID(ctx)
	if !s.caps.openStream(client, s.opts.MaxStreamsPerClient) {
		s.open.Add(-1)
		s.m.refused.Inc()
		s.m.refusedFor(reasonStreamsPerClient)
		return nil, exhausted("this client holds %d rate limit quota streams on this node, as many as it may (rlqs.max_streams_per_client)", s.opts.MaxStreamsPerClient)
	}
	s.m.streams.Inc()
	return &stream{client: s.opts.NodeID + "-" + hexID(s.seq.Add(1)), clientID: client,
		group: groupName(s.opts.NodeID, client), buckets: map[string]*bucket{}, pokes: make(chan string, 64)}, nil
}

// close forgets every bucket of an ended stream and frees its place.
func (s *Server) close(st *stream) {
	for _, b := range st.buckets {
		s.forget(st, b)
	}
	s.caps.closeStream(st.clientID)
	s.m.streams.Dec()
	s.open.Add(-1)
}

// check refuses a report that does not fit (INVALID_ARGUMENT), and takes
// the domain of a stream's first report.
func (s *Server) check(st *stream, m *rlqspb.RateLimitQuotaUsageReports) error {
	if st.domain == "" {
		switch d := m.GetDomain(); {
		case d == "":
			return status.Error(codes.InvalidArgument, "the first usage report must name the domain")
		case len(d) > MaxDomainBytes:
			return status.Errorf(codes.InvalidArgument, "the domain is %d bytes long, past the bound of %d", len(d), MaxDomainBytes)
		}
	}
	if err := checkReport(m, s.opts.MaxRequestsPerSecond); err != nil {
		return err
	}
	if st.domain == "" {
		st.domain = m.GetDomain()
	}
	return nil
}

// sizes are the tables' sizes, for the metrics.
func (s *Server) sizes() (clients, buckets, ids int) {
	clients, buckets = s.caps.sizes()
	return clients, buckets, s.ids.len()
}

func hexID(n uint64) string {
	const digits = "0123456789abcdef"
	var b [16]byte
	i := len(b)
	for {
		i--
		b[i] = digits[n&15]
		n >>= 4
		if n == 0 {
			return string(b[i:])
		}
	}
}
