package rlqs

import (
	"context"
	"math"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/envoyrls"
)

// report accounts a usage report and answers each of its buckets. A
// report that would pass a bucket cap ends the stream (the error), taking
// nothing.
func (s *Server) report(ctx context.Context, st *stream, m *rlqspb.RateLimitQuotaUsageReports) ([]*rlqspb.RateLimitQuotaResponse_BucketAction, error) {
	now := s.opts.Now()
	cfg := s.cfg.Load()
	st.label = ""
	if cfg.HasDomain(st.domain) {
		st.label = st.domain
	}
	usages := m.GetBucketQuotaUsages()
	keys := make([]string, len(usages)) // "": not tracked
	var fresh map[string]bool
	for i, u := range usages {
		if len(u.GetBucketId().GetBucket()) == 0 {
			continue
		}
		key, ok := bucketKey(st.domain, u.GetBucketId())
		if !ok {
			continue
		}
		keys[i] = key
		if st.buckets[key] == nil {
			if fresh == nil {
				fresh = map[string]bool{}
			}
			fresh[key] = true
		}
	}
	if err := s.reserve(st, len(fresh)); err != nil {
		return nil, err
	}
	var answer []*bucket
	seen := make(map[*bucket]bool, len(usages))
	var joined []*bucket
	var untracked []*rlqspb.RateLimitQuotaResponse_BucketAction
	for i, u := range usages {
		id := u.GetBucketId()
		if len(id.GetBucket()) == 0 {
			continue // nothing to answer
		}
		if keys[i] == "" {
			untracked = append(untracked, assign(id, s.oversized(cfg, st.domain, id), TTLIntervals*s.opts.DefaultInterval))
			s.m.reported.WithLabelValues(st.label, "", "allowed").Add(float64(u.NumRequestsAllowed))
			s.m.reported.WithLabelValues(st.label, "", "denied").Add(float64(u.NumRequestsDenied))
			continue
		}
		b := st.buckets[keys[i]]
		if b == nil {
			b = &bucket{key: keys[i], ident: s.ids.take(keys[i], id), interval: s.opts.DefaultInterval}
			st.buckets[b.key] = b
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
	return append(actions, untracked...), nil
}

// reserve takes n more buckets for st, or refuses past a cap.
func (s *Server) reserve(st *stream, n int) error {
	if n == 0 {
		return nil
	}
	if len(st.buckets)+n > s.opts.MaxBuckets {
		s.m.refusedFor(reasonBucketsPerStream)
		return exhausted("this stream would track %d rate limit quota buckets, past rlqs.max_buckets_per_stream (%d)", len(st.buckets)+n, s.opts.MaxBuckets)
	}
	switch reason, limit := s.caps.reserve(st.clientID, n, s.opts.MaxBucketsPerClient, s.opts.MaxBucketsPerNode); reason {
	case reasonBucketsPerClient:
		s.m.refusedFor(reason)
		return exhausted("this client's streams would track more than %d rate limit quota buckets on this node (rlqs.max_buckets_per_client)", limit)
	case reasonBuckets:
		s.m.refusedFor(reason)
		return exhausted("this node tracks %d rate limit quota buckets, as many as it may (rlqs.max_buckets); reconnect to another", limit)
	}
	return nil
}

// oversized is the strategy of a bucket id over the bounds, which is not
// tracked: DENY_ALL when a limited rule matches it, so that a long value
// does not escape its limit; the rule's own blanket rule when it has one;
// the unmatched rule when none matches.
func (s *Server) oversized(cfg *envoyrls.Config, domain string, id *rlqspb.BucketId) *typev3.RateLimitStrategy {
	l, ok := cfg.Lookup(domain, entriesOf(id))
	switch {
	case !ok:
		return s.unmatched()
	case l.Unlimited || l.Shadow:
		return blanket(typev3.RateLimitStrategy_ALLOW_ALL)
	}
	return blanket(typev3.RateLimitStrategy_DENY_ALL)
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
	// The counts were checked (checkReport): each at most 2^53, so the
	// sums saturate only after many reports that never settled.
	b.pendN = addSat(b.pendN, u.NumRequestsAllowed+u.NumRequestsDenied)
	b.pendE = min(b.pendE+e, time.Duration(math.MaxInt64/2))
	b.allowed = addSat(b.allowed, u.NumRequestsAllowed)
	b.denied = addSat(b.denied, u.NumRequestsDenied)
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
	type groupOf struct {
		rate float64
		live int
		self bool
	}
	groups := make([]groupOf, len(idx))
	for j, i := range idx {
		b := bs[i]
		if fresh {
			b.settle(b.limit.Period)
		}
		// The client's streams of b on this node are one row (group.go).
		expires := b.lastReport.Add(ExpiryIntervals * b.interval) // a re-evaluation does not extend it
		rate, exp, live, self := s.groupDemand(st, b, expires, now)
		groups[j] = groupOf{rate, live, self}
		cached[j], hit[j] = s.divisions.lookup(b.key, st.group, float64(b.limit.RequestsPerUnit), rate, b.interval, now)
		updates[j] = Update{Bucket: b.key, Demand: Demand{Client: st.group, Rate: rate, Expires: exp}, WriteOnly: hit[j]}
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
			share = shares[st.group]
			if divide == 1 { // a division of the shared table, for the node's other clients
				s.divisions.store(b.key, limit, shares, tables[j], now)
			}
		}
		g := groups[j]
		share = splitShare(share, b.rate, g.rate, g.live, g.self, s.opts.MinFraction)
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
				// float64, never through an integer: a count past 2^63
				// must not turn negative (a counter panics on that).
				if over := math.Floor(float64(b.allowed) - allowance); over >= 1 && !math.IsInf(over, 0) {
					s.m.shadowDenied.WithLabelValues(b.labels.domain, b.labels.rule).Add(over)
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

// forget drops b from st: its metrics, its demand (when st was the last
// of its client's streams on b), its place and its hold on the id.
func (s *Server) forget(st *stream, b *bucket) {
	delete(st.buckets, b.key)
	defer s.part(st, b) // after the demand is gone, so the peers see it gone
	defer s.ids.put(b.key)
	defer s.caps.release(st.clientID, 1)
	if b.action != nil {
		s.m.unsubscribe(b.labels, b.key, st.client, b.share)
	}
	b.share = 0
	if s.leaveGroup(st, b.key) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = s.demand.Leave(ctx, b.key, st.group) // best effort: it expires anyway
		_ = s.fallback.Leave(ctx, b.key, st.group)
	}
	s.divisions.forget(b.key) // the others' next reports divide it without the client
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
