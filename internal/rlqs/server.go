package rlqs

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/envoyrls"
)

// ServiceName is the gRPC service the Server implements.
const ServiceName = "envoy.service.rate_limit_quota.v3.RateLimitQuotaService"

// Defaults of Options.
const (
	DefaultInterval   = 10 * time.Second
	DefaultMaxBuckets = 10_000
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
	// Bounds of a bucket id: larger ones are answered by the unmatched
	// rule and not tracked.
	maxEntries  = 32
	maxEntryLen = 1024
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
	// MaxBuckets bounds the buckets one stream is tracked for; later ones
	// are answered by the unmatched rule. If 0, DefaultMaxBuckets.
	MaxBuckets int
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
	m         *metrics
	seq       atomic.Uint64

	cfg       atomic.Pointer[envoyrls.Config]
	changedMu sync.Mutex
	changed   chan struct{} // closed and replaced by SetConfig
	done      chan struct{} // closed by Close
	closeOnce sync.Once

	peersMu sync.Mutex
	peers   map[string]map[*stream]struct{} // bucket key: the streams of this node tracking it

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
	opts.MaxStreams = cmp.Or(opts.MaxStreams, DefaultMaxStreams)
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
	s := &Server{opts: opts, demand: opts.Demand, m: newMetrics(opts.Registerer),
		changed: make(chan struct{}), done: make(chan struct{}), peers: map[string]map[*stream]struct{}{}}
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
	client  string
	domain  string
	label   string // domain's metric label: "" when not configured
	buckets map[string]*bucket
	// pokes names buckets to re-evaluate because another stream of this
	// node joined or left them. Never closed; a full channel drops the
	// poke (the next report re-evaluates anyway).
	pokes chan string
}

// bucket is one bucket of a stream.
type bucket struct {
	key     string           // domain and bucket id, the same on every node
	id      *rlqspb.BucketId // as the client named it
	entries []*commonpb.RateLimitDescriptor_Entry

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
	if s.open.Add(1) > int64(s.opts.MaxStreams) {
		s.open.Add(-1)
		s.m.refused.Inc()
		return status.Errorf(codes.ResourceExhausted, "this node holds %d rate limit quota streams, as many as it may; reconnect to another", s.opts.MaxStreams)
	}
	defer s.open.Add(-1)
	st := &stream{client: s.opts.NodeID + "-" + hexID(s.seq.Add(1)), buckets: map[string]*bucket{},
		pokes: make(chan string, 64)}
	s.m.streams.Inc()
	defer s.m.streams.Dec()
	defer s.leave(st)

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
		case m := <-reports:
			if st.domain == "" {
				if m.GetDomain() == "" {
					return status.Error(codes.InvalidArgument, "the first usage report must name the domain")
				}
				st.domain = m.Domain
			}
			actions = s.report(ctx, st, m)
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

// report accounts a usage report and answers each of its buckets.
func (s *Server) report(ctx context.Context, st *stream, m *rlqspb.RateLimitQuotaUsageReports) []*rlqspb.RateLimitQuotaResponse_BucketAction {
	now := s.opts.Now()
	cfg := s.cfg.Load()
	st.label = ""
	if cfg.HasDomain(st.domain) {
		st.label = st.domain
	}
	var answer []*bucket
	seen := make(map[*bucket]bool, len(m.GetBucketQuotaUsages()))
	var joined []*bucket
	var untracked []*rlqspb.RateLimitQuotaResponse_BucketAction
	for _, u := range m.GetBucketQuotaUsages() {
		id := u.GetBucketId()
		if len(id.GetBucket()) == 0 {
			continue // nothing to answer
		}
		key, entries, ok := bucketKey(st.domain, id)
		b := st.buckets[key]
		if b == nil {
			if !ok || len(st.buckets) >= s.opts.MaxBuckets {
				untracked = append(untracked, assign(id, s.unmatched(), TTLIntervals*s.opts.DefaultInterval))
				s.m.reported.WithLabelValues(st.label, "", "allowed").Add(float64(u.NumRequestsAllowed))
				s.m.reported.WithLabelValues(st.label, "", "denied").Add(float64(u.NumRequestsDenied))
				continue
			}
			b = &bucket{key: key, id: id, entries: entries, interval: s.opts.DefaultInterval}
			st.buckets[key] = b
			joined = append(joined, b)
		}
		b.account(u, now)
		if !seen[b] { // a bucket reported twice is answered once
			seen[b] = true
			answer = append(answer, b)
		}
	}
	actions := s.evaluate(ctx, st, answer, now, true)
	for _, b := range joined {
		if st.buckets[b.key] == b {
			s.join(st, b)
		}
	}
	for _, b := range answer {
		if b.grew && st.buckets[b.key] == b { // (a bucket that joined had no share to grow from)
			s.poke(st, b.key)
		}
		b.grew = false
	}
	return append(actions, untracked...)
}

// account takes one usage report of b: its counts, and its time_elapsed
// as the client's report interval (the first one of at least 100 ms sets
// it; later ones raise it at once and lower it by an eighth at most).
// The demand rate is updated once at least half an interval of counts has
// gathered, so the quick reports Envoy sends when an assignment changes do
// not make it jump.
func (b *bucket) account(u *rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage, now time.Time) {
	b.lastReport = now
	e := u.GetTimeElapsed().AsDuration()
	if u.GetTimeElapsed() == nil || e < 0 {
		e = 0
	}
	if e >= 100*time.Millisecond {
		iv := e
		if b.learned {
			iv = max(e, b.interval-b.interval/8) // a quick report (after a new assignment) shrinks it only a little
		}
		b.interval, b.learned = min(iv, time.Hour), true
	}
	n := u.NumRequestsAllowed + u.NumRequestsDenied
	b.pendN += n
	b.pendE += e
	b.allowed += u.NumRequestsAllowed
	b.denied += u.NumRequestsDenied
	b.allowedElapsed = max(b.allowedElapsed, e)
}

// settle turns the gathered counts into the demand rate per period.
func (b *bucket) settle(period time.Duration) {
	if b.rated && b.pendE < b.interval/2 {
		return
	}
	if b.pendE > 0 {
		b.rate = float64(b.pendN) * float64(period) / float64(b.pendE)
		b.rated = true
	} else if !b.rated {
		b.rate = float64(b.pendN) // a first report without elapsed time
	}
	b.pendN, b.pendE = 0, 0
}

// reassess evaluates st's buckets after a rule change (all of them) or on
// the block tick (those whose block started or ended), and returns the
// actions that differ from the last ones sent.
func (s *Server) reassess(ctx context.Context, st *stream, blocksOnly bool) []*rlqspb.RateLimitQuotaResponse_BucketAction {
	if len(st.buckets) == 0 {
		return nil
	}
	now := s.opts.Now()
	var bs []*bucket
	for _, b := range st.buckets {
		if !blocksOnly || s.isBlocked(st.domain, b.entries, now) != b.blocked {
			bs = append(bs, b)
		}
	}
	if len(bs) == 0 {
		return nil
	}
	prev := make(map[*bucket]*rlqspb.RateLimitQuotaResponse_BucketAction, len(bs))
	for _, b := range bs {
		prev[b] = b.action
	}
	var out []*rlqspb.RateLimitQuotaResponse_BucketAction
	for i, a := range s.evaluate(ctx, st, bs, now, false) {
		if p := prev[bs[i]]; p == nil || !proto.Equal(p, a) || a.GetAbandonAction() != nil {
			out = append(out, a)
		}
	}
	return out
}

// evaluate decides the action of each of bs, in order, and records it.
// A bucket whose rule is gone is abandoned and forgotten. When fresh, the
// buckets' pending counts are settled into demand rates first.
func (s *Server) evaluate(ctx context.Context, st *stream, bs []*bucket, now time.Time, fresh bool) []*rlqspb.RateLimitQuotaResponse_BucketAction {
	cfg := s.cfg.Load()
	out := make([]*rlqspb.RateLimitQuotaResponse_BucketAction, len(bs))
	var shared []int // indexes of bs whose share comes from the demand table
	for i, b := range bs {
		l, ok := cfg.Lookup(st.domain, b.entries)
		if !ok && b.matched {
			out[i] = abandon(b.id)
			s.m.abandoned.WithLabelValues(b.labels.domain).Inc()
			s.forget(st, b)
			continue
		}
		labels := ruleLabels{domain: st.label}
		if ok {
			labels.rule = l.Name
		}
		if b.action == nil || labels != b.labels {
			if b.action != nil {
				s.m.unsubscribe(b.labels, b.key, st.client, b.share)
			}
			s.m.subscribe(labels, b.key, st.client)
			b.labels, b.share = labels, 0
		}
		if b.matched && ok && l != b.limit {
			s.setShare(b, 0) // a new rule: no hysteresis from the old one's share
			if l.Period != b.limit.Period && b.limit.Period > 0 {
				b.rate *= float64(l.Period) / float64(b.limit.Period)
			}
		}
		b.matched, b.limit = ok, l
		if fresh {
			s.m.reported.WithLabelValues(labels.domain, labels.rule, "allowed").Add(float64(b.allowed))
			s.m.reported.WithLabelValues(labels.domain, labels.rule, "denied").Add(float64(b.denied))
		}
		b.blocked = s.isBlocked(st.domain, b.entries, now)
		ttl := TTLIntervals * b.interval
		switch {
		case b.blocked:
			s.m.blocked.WithLabelValues(labels.domain).Inc()
			out[i] = assign(b.id, blanket(typev3.RateLimitStrategy_DENY_ALL), ttl)
		case !ok:
			out[i] = assign(b.id, s.unmatched(), ttl)
		case l.Unlimited:
			out[i] = assign(b.id, blanket(typev3.RateLimitStrategy_ALLOW_ALL), ttl)
		case l.RequestsPerUnit == 0:
			if l.Shadow {
				if fresh {
					s.m.shadowDenied.WithLabelValues(labels.domain, labels.rule).Add(float64(b.allowed))
				}
				out[i] = assign(b.id, blanket(typev3.RateLimitStrategy_ALLOW_ALL), ttl)
			} else {
				out[i] = assign(b.id, blanket(typev3.RateLimitStrategy_DENY_ALL), ttl)
			}
		default:
			shared = append(shared, i)
			continue
		}
		s.setShare(b, 0)
	}
	if len(shared) > 0 {
		s.assignShares(ctx, st, bs, shared, out, now, fresh)
	}
	for i, b := range bs {
		if out[i].GetAbandonAction() == nil {
			b.action = out[i]
		}
		b.allowed, b.denied, b.allowedElapsed = 0, 0, 0
	}
	return out
}

// assignShares computes the share of each limited bucket of bs (their
// indexes in idx) from the shared demand table, and its assignment.
func (s *Server) assignShares(ctx context.Context, st *stream, bs []*bucket, idx []int, out []*rlqspb.RateLimitQuotaResponse_BucketAction, now time.Time, fresh bool) {
	updates := make([]Update, len(idx))
	cached := make([]float64, len(idx))
	hit := make([]bool, len(idx))
	for j, i := range idx {
		b := bs[i]
		if fresh {
			b.settle(b.limit.Period)
		}
		cached[j], hit[j] = s.divisions.lookup(b.key, st.client, float64(b.limit.RequestsPerUnit), b.rate, b.interval, now)
		updates[j] = Update{Bucket: b.key, Demand: Demand{Client: st.client, Rate: b.rate,
			Expires: b.lastReport.Add(ExpiryIntervals * b.interval)}, // a re-evaluation does not extend it
			WriteOnly: hit[j]}
	}
	dctx, cancel := context.WithTimeout(ctx, s.opts.DemandTimeout)
	tables, err := s.demand.Report(dctx, now, updates)
	cancel()
	divide := 1.0
	if err != nil {
		s.m.demandErrors.Inc()
		s.logDemandError(st.domain, err)
		for j := range updates { // every bucket divided on this node's table
			updates[j].WriteOnly, hit[j] = false, false
		}
		tables, _ = s.fallback.Report(ctx, now, updates)
		divide = float64(s.opts.Nodes)
	}
	for j, i := range idx {
		b := bs[i]
		l := b.limit
		limit := float64(l.RequestsPerUnit) / divide
		share := cached[j]
		if !hit[j] {
			shares := Shares(limit, tables[j], now, s.opts.MinFraction)
			share = shares[st.client]
			if divide == 1 { // a division of the shared table, for the node's other clients
				s.divisions.store(b.key, limit, shares, tables[j], now)
			}
		}
		if b.share > 0 && share >= b.share && share < b.share*growHysteresis {
			share = b.share
		}
		if share > b.share && b.share > 0 {
			b.grew = true // it took from the others: report pokes them
		}
		s.setShare(b, share)
		ttl := TTLIntervals * b.interval
		if l.Shadow {
			if fresh && b.allowedElapsed > 0 {
				allowance := share * float64(b.allowedElapsed) / float64(l.Period)
				if over := float64(b.allowed) - allowance; over >= 1 {
					s.m.shadowDenied.WithLabelValues(b.labels.domain, b.labels.rule).Add(float64(int64(over)))
				}
			}
			out[i] = assign(b.id, blanket(typev3.RateLimitStrategy_ALLOW_ALL), ttl)
			continue
		}
		if share <= 0 {
			// Only a client silent for ExpiryIntervals, re-evaluated on a
			// reload or a block: its share went to the others.
			out[i] = assign(b.id, blanket(typev3.RateLimitStrategy_DENY_ALL), ttl)
			continue
		}
		out[i] = assign(b.id, limited(l, share), ttl)
	}
}

// setShare records b's share and its change in the assigned total.
func (s *Server) setShare(b *bucket, share float64) {
	if d := share - b.share; d != 0 {
		s.m.share.WithLabelValues(b.labels.domain, b.labels.rule).Add(d)
	}
	b.share = share
}

// unmatched is the strategy of buckets no rule matches.
func (s *Server) unmatched() *typev3.RateLimitStrategy {
	if s.opts.DenyUnmatched {
		return blanket(typev3.RateLimitStrategy_DENY_ALL)
	}
	return blanket(typev3.RateLimitStrategy_ALLOW_ALL)
}

// isBlocked reports whether an emergency block covers one of entries.
func (s *Server) isBlocked(domain string, entries []*commonpb.RateLimitDescriptor_Entry, now time.Time) bool {
	if s.opts.Blocked == nil {
		return false
	}
	for _, e := range entries {
		if until, ok := s.opts.Blocked(domain, e.Key, e.Value, now); ok && until.After(now) {
			return true
		}
	}
	return false
}

// forget drops b from st: its metrics and its demand.
func (s *Server) forget(st *stream, b *bucket) {
	delete(st.buckets, b.key)
	defer s.part(st, b) // after the demand is gone, so the peers see it gone
	if b.action != nil {
		s.m.unsubscribe(b.labels, b.key, st.client, b.share)
	}
	b.share = 0
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.demand.Leave(ctx, b.key, st.client) // best effort: it expires anyway
	_ = s.fallback.Leave(ctx, b.key, st.client)
	s.divisions.forget(b.key) // the others' next reports divide it without the client
}

// leave forgets every bucket of an ended stream.
func (s *Server) leave(st *stream) {
	for _, b := range st.buckets {
		s.forget(st, b)
	}
}

// logDemandError logs a demand store failure at most once a second.
func (s *Server) logDemandError(domain string, err error) {
	now := time.Now().UnixNano()
	last := s.lastErrLog.Load()
	if now-last < int64(time.Second) || !s.lastErrLog.CompareAndSwap(last, now) {
		s.errsSkipped.Add(1)
		return
	}
	s.opts.Logger.Error("rate limit quota demand store failed; shares come from this node's clients, of limit / nodes",
		logDomain, domain, logError, err, logSkip, s.errsSkipped.Swap(0))
}

// bucketKey names a bucket across nodes (its domain and id, keys sorted)
// and returns the id's entries in key order, the descriptor its rule is
// matched with. ok is false when the id is over the bounds.
func bucketKey(domain string, id *rlqspb.BucketId) (key string, entries []*commonpb.RateLimitDescriptor_Entry, ok bool) {
	m := id.GetBucket()
	if len(m) > maxEntries {
		return "", nil, false
	}
	v := make(url.Values, len(m))
	for k, val := range m {
		if len(k) > maxEntryLen || len(val) > maxEntryLen || k == "" {
			return "", nil, false
		}
		v.Set(k, val)
	}
	enc := v.Encode() // sorted by key
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	entries = make([]*commonpb.RateLimitDescriptor_Entry, len(keys))
	for i, k := range keys {
		entries[i] = &commonpb.RateLimitDescriptor_Entry{Key: k, Value: m[k]}
	}
	return url.QueryEscape(domain) + "?" + enc, entries, true
}

// join registers st as tracking b and asks the node's other streams of b
// to re-evaluate it: a new client's share comes from theirs, and they get
// the smaller share at once instead of at their next report (on this
// node; other nodes' clients get theirs at their next report). A report
// that raises a client's share pokes the others the same way.
func (s *Server) join(st *stream, b *bucket) {
	s.peersMu.Lock()
	set := s.peers[b.key]
	if set == nil {
		set = map[*stream]struct{}{}
		s.peers[b.key] = set
	}
	set[st] = struct{}{}
	s.peersMu.Unlock()
	s.poke(st, b.key)
}

// part undoes join, and lets the other streams of b take the freed share.
func (s *Server) part(st *stream, b *bucket) {
	s.peersMu.Lock()
	set, ok := s.peers[b.key]
	if ok {
		delete(set, st)
		if len(set) == 0 {
			delete(s.peers, b.key)
		}
	}
	s.peersMu.Unlock()
	if ok {
		s.poke(st, b.key)
	}
}

// poke asks every stream of bucket key but from to re-evaluate it.
func (s *Server) poke(from *stream, key string) {
	s.peersMu.Lock()
	defer s.peersMu.Unlock()
	for p := range s.peers[key] {
		if p == from {
			continue
		}
		select {
		case p.pokes <- key:
		default:
		}
	}
}

// reassessBucket re-evaluates one bucket of st after a peer joined or
// left it, and returns its action if it changed.
func (s *Server) reassessBucket(ctx context.Context, st *stream, key string) []*rlqspb.RateLimitQuotaResponse_BucketAction {
	b := st.buckets[key]
	if b == nil || !b.matched {
		return nil
	}
	prev := b.action
	a := s.evaluate(ctx, st, []*bucket{b}, s.opts.Now(), false)[0]
	b.grew = false // pokes do not poke back: the table did not change
	if prev != nil && proto.Equal(prev, a) && a.GetAbandonAction() == nil {
		return nil
	}
	return []*rlqspb.RateLimitQuotaResponse_BucketAction{a}
}
