package rlqs

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// What one client may hold. Every table a stream fills has a cap per
// stream, per client (ClientID) and per node; past a cap the stream ends
// with RESOURCE_EXHAUSTED naming it, and nothing is added.
const (
	// MaxDomainBytes bounds a report's domain; a longer one ends the
	// stream with INVALID_ARGUMENT.
	MaxDomainBytes = 256
	// MaxBucketIDBytes bounds a bucket id: the sum of its keys' and
	// values' lengths. A larger id (or one of more than 32 entries, or an
	// entry over 1 KiB) is not tracked: it is answered DENY_ALL when a rule
	// matches it (so an oversized id never escapes its limit) and by the
	// unmatched rule otherwise.
	MaxBucketIDBytes = 4096
	// MaxCount bounds a bucket's num_requests_allowed and
	// num_requests_denied: 2^53, the largest count a float64 holds
	// exactly. A report past it ends the stream with INVALID_ARGUMENT.
	MaxCount = 1 << 53

	maxEntries  = 32
	maxEntryLen = 1024
)

// Defaults of the caps in Options.
const (
	DefaultMaxStreamsPerClient  = 100
	DefaultMaxBuckets           = 10_000 // per stream
	DefaultMaxBucketsPerClient  = 10_000
	DefaultMaxBucketsPerNode    = 100_000
	DefaultMaxReportsPerSecond  = 50
	DefaultMaxRequestsPerSecond = 10_000_000
	DefaultFirstReportTimeout   = 10 * time.Second
)

// Refusal reasons: the label of sluice_rlqs_refused_total.
const (
	reasonStreams          = "streams"
	reasonStreamsPerClient = "streams_per_client"
	reasonBuckets          = "buckets"
	reasonBucketsPerClient = "buckets_per_client"
	reasonBucketsPerStream = "buckets_per_stream"
	reasonReportRate       = "reports_per_second"
	reasonFirstReport      = "first_report_timeout"
	reasonInvalid          = "invalid_report"
)

// PeerClient names the client of a call by its peer's address: its IPv4
// address, or its IPv6 /64 (one host's addresses), as the Envoy rate limit
// service charges failed keys. It is the default Options.ClientID.
func PeerClient(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return "ip:"
	}
	var ip netip.Addr
	if tcp, ok := p.Addr.(*net.TCPAddr); ok {
		ip = tcp.AddrPort().Addr().Unmap().WithZone("")
	} else if ap, err := netip.ParseAddrPort(p.Addr.String()); err == nil {
		ip = ap.Addr().Unmap().WithZone("")
	}
	switch {
	case !ip.IsValid():
		return "ip:" + p.Addr.Network()
	case ip.Is6():
		return "ip:" + netip.PrefixFrom(ip, 64).Masked().String()
	}
	return "ip:" + ip.String()
}

// KeyClient names the client of a call by the API key its metadata
// carries (authorization: Bearer <key>, else x-api-key): "key:" and 128
// bits of the key's SHA-256, so the secret is never kept. A call without
// a key is named by PeerClient. Sluice uses it with --grpc-require-key,
// where every stream's key has been checked first.
func KeyClient(ctx context.Context) string {
	secret := ""
	if v := metadata.ValueFromIncomingContext(ctx, "authorization"); len(v) > 0 {
		if scheme, token, ok := strings.Cut(v[0], " "); ok && strings.EqualFold(scheme, "Bearer") {
			secret = strings.TrimSpace(token)
		}
	}
	if v := metadata.ValueFromIncomingContext(ctx, "x-api-key"); secret == "" && len(v) > 0 {
		secret = strings.TrimSpace(v[0])
	}
	if secret == "" {
		return PeerClient(ctx)
	}
	sum := sha256.Sum256([]byte(secret))
	return "key:" + hex.EncodeToString(sum[:16])
}

// usage is what one client holds on this node.
type usage struct{ streams, buckets int }

// caps counts what every client holds, under one lock. The zero value
// is ready.
type caps struct {
	mu      sync.Mutex
	clients map[string]*usage
	buckets int // stream buckets on the node
}

// openStream takes one of client's streams; false past maxPerClient.
func (c *caps) openStream(client string, maxPerClient int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.clients[client]
	if u == nil {
		if c.clients == nil {
			c.clients = map[string]*usage{}
		}
		u = &usage{}
		c.clients[client] = u
	}
	if u.streams >= maxPerClient {
		c.drop(client, u)
		return false
	}
	u.streams++
	return true
}

// closeStream gives back a stream of client (its buckets first, by
// release).
func (c *caps) closeStream(client string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if u := c.clients[client]; u != nil {
		u.streams--
		c.drop(client, u)
	}
}

func (c *caps) drop(client string, u *usage) {
	if u.streams <= 0 && u.buckets <= 0 {
		delete(c.clients, client)
	}
}

// reserve takes n buckets for client, or returns the reason and cap it
// would pass, taking nothing.
func (c *caps) reserve(client string, n, perClient, perNode int) (reason string, limit int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.clients[client]
	switch {
	case u == nil: // (a stream holds its client's entry while it runs)
		return reasonBucketsPerClient, perClient
	case u.buckets+n > perClient:
		return reasonBucketsPerClient, perClient
	case c.buckets+n > perNode:
		return reasonBuckets, perNode
	}
	u.buckets += n
	c.buckets += n
	return "", 0
}

// release gives back n buckets of client.
func (c *caps) release(client string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buckets -= n
	if u := c.clients[client]; u != nil {
		u.buckets -= n
		c.drop(client, u)
	}
}

// sizes returns the clients holding something and the node's buckets.
func (c *caps) sizes() (clients, buckets int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.clients), c.buckets
}

// ident is a bucket id as the node keeps it: once, however many streams
// report it, with its entries in key order (the descriptor its rule is
// matched with; their strings are the id's own).
type ident struct {
	id      *rlqspb.BucketId
	entries []*commonpb.RateLimitDescriptor_Entry
	refs    int
}

// idents holds every tracked bucket id once, by key.
type idents struct {
	mu sync.Mutex
	m  map[string]*ident
}

// take returns the ident of key, made from id when no stream holds it.
func (t *idents) take(key string, id *rlqspb.BucketId) *ident {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]*ident{}
	}
	x := t.m[key]
	if x == nil {
		x = &ident{id: id, entries: entriesOf(id)}
		t.m[key] = x
	}
	x.refs++
	return x
}

// put gives back a stream's hold on key.
func (t *idents) put(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if x := t.m[key]; x != nil {
		if x.refs--; x.refs <= 0 {
			delete(t.m, key)
		}
	}
}

func (t *idents) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// bucketKey names a bucket across nodes: 128 bits of the SHA-256 of its
// domain and its id's entries in key order (each length-prefixed, so no
// two ids share an encoding), in hex. ok is false when the id is over the
// bounds (MaxBucketIDBytes, 32 entries, 1 KiB an entry, an empty key).
func bucketKey(domain string, id *rlqspb.BucketId) (key string, ok bool) {
	m := id.GetBucket()
	if len(m) > maxEntries {
		return "", false
	}
	total := 0
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if len(k) > maxEntryLen || len(v) > maxEntryLen || k == "" {
			return "", false
		}
		total += len(k) + len(v)
		keys = append(keys, k)
	}
	if total > MaxBucketIDBytes {
		return "", false
	}
	slices.Sort(keys)
	h := sha256.New()
	var n [8]byte
	put := func(s string) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	put(domain)
	for _, k := range keys {
		put(k)
		put(m[k])
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:16]), true
}

// entriesOf returns id's entries in key order.
func entriesOf(id *rlqspb.BucketId) []*commonpb.RateLimitDescriptor_Entry {
	m := id.GetBucket()
	out := make([]*commonpb.RateLimitDescriptor_Entry, 0, len(m))
	for k, v := range m {
		out = append(out, &commonpb.RateLimitDescriptor_Entry{Key: k, Value: v})
	}
	slices.SortFunc(out, func(a, b *commonpb.RateLimitDescriptor_Entry) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// checkReport refuses, with INVALID_ARGUMENT, a report whose counts do
// not fit: a count past MaxCount, or a bucket's allowed and denied
// requests past perSecond times its time_elapsed (at least one second),
// or a time_elapsed that is negative or not a duration. Nothing of a
// refused report is taken.
func checkReport(m *rlqspb.RateLimitQuotaUsageReports, perSecond int) error {
	for i, u := range m.GetBucketQuotaUsages() {
		a, d := u.GetNumRequestsAllowed(), u.GetNumRequestsDenied()
		if a > MaxCount || d > MaxCount {
			return status.Errorf(codes.InvalidArgument, "bucket_quota_usages[%d]: num_requests_allowed %d, num_requests_denied %d: a count must be at most 2^53", i, a, d)
		}
		var e time.Duration
		if te := u.GetTimeElapsed(); te != nil {
			if err := te.CheckValid(); err != nil || te.AsDuration() < 0 {
				return status.Errorf(codes.InvalidArgument, "bucket_quota_usages[%d]: time_elapsed %ds %dns is not a duration of at least 0", i, te.GetSeconds(), te.GetNanos())
			}
			e = te.AsDuration()
		}
		bound := float64(perSecond) * max(e.Seconds(), 1)
		if n := float64(a) + float64(d); n > bound {
			return status.Errorf(codes.InvalidArgument, "bucket_quota_usages[%d]: %d requests in a time_elapsed of %v is past the bound of %.0f (rlqs.max_requests_per_second %d times time_elapsed, at least one second)", i, a+d, e, bound, perSecond)
		}
	}
	return nil
}

// addSat is a+b, or the largest uint64 when it would wrap.
func addSat(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// exhausted is the refusal of a stream past a cap.
func exhausted(format string, args ...any) error {
	return status.Error(codes.ResourceExhausted, fmt.Sprintf(format, args...))
}
