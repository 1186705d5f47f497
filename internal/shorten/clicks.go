package shorten

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"sync"
	"time"
)

// Hit is one request that reached a live link, as Service.Redirect saw
// it. Classification and hashing happen later, in the flusher, so the
// redirect path only appends.
type Hit struct {
	LinkID int64
	// Head is true for HEAD requests, which are never human clicks.
	Head bool
	// UserAgent, Purpose (the Sec-Purpose or Purpose header) and Client
	// (the client's address) feed ClassifyHit and the visitor hash.
	UserAgent, Purpose, Client string
	HitDetails
	// Code is the code the link was reached by, and Domain its custom
	// domain ("" for none), passed on in Click.Code and Click.Domain.
	Code, Domain string
	// Target is the rule that picked the target (Target.Rule).
	Target string
}

type bufferedHit struct {
	Hit
	at int64 // Unix microseconds
}

// clickBuffer holds hits between flushes. Add never blocks: when the
// buffer is full the hit is counted as dropped. It is safe for concurrent
// use; one goroutine (Service.Run) flushes it.
type clickBuffer struct {
	mu      sync.Mutex
	hits    []bufferedHit
	spare   []bufferedHit // the other half of a double buffer, reused
	max     int
	kickAt  int
	kick    chan struct{} // cap 1: "a batch is ready"
	retry   []Click       // a batch the store refused, tried again next flush
	metrics *Metrics
}

func newClickBuffer(size int, m *Metrics) *clickBuffer {
	return &clickBuffer{
		hits:    make([]bufferedHit, 0, min(size, 4096)),
		max:     size,
		kickAt:  max(1, min(size/2, 4096)),
		kick:    make(chan struct{}, 1),
		metrics: m,
	}
}

// add appends h; it reports false (and counts a drop) when full.
func (b *clickBuffer) add(h Hit, at int64) bool {
	b.mu.Lock()
	if len(b.hits) >= b.max {
		b.mu.Unlock()
		b.metrics.BufferFull()
		return false
	}
	b.hits = append(b.hits, bufferedHit{Hit: h, at: at})
	n := len(b.hits)
	b.mu.Unlock()
	if n == b.kickAt {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
	return true
}

// take swaps the buffer out, with the batch left to retry.
func (b *clickBuffer) take() ([]bufferedHit, []Click) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out, retry := b.hits, b.retry
	b.hits, b.spare, b.retry = b.spare[:0], nil, nil
	return out, retry
}

// giveBack returns a drained slice for reuse.
func (b *clickBuffer) giveBack(s []bufferedHit) {
	clear(s) // drop references to user agents
	b.mu.Lock()
	if b.spare == nil && cap(s) <= 4*b.kickAt {
		b.spare = s[:0]
	}
	b.mu.Unlock()
}

func (b *clickBuffer) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.hits) + len(b.retry)
}

// visitorHash is the stored visitor: an HMAC of client and user agent
// under a key derived from the code key, so addresses cannot be recovered
// by hashing every IPv4 address.
func visitorHash(key []byte, client, ua string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(client))
	m.Write([]byte{0})
	m.Write([]byte(ua))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// Flush writes the buffered hits now, as one batch, and reports the
// store's error (the batch is then kept and tried again at the next flush,
// as far as the buffer's size allows). Service.Run calls it on a timer;
// tests call it directly.
func (s *Service) Flush(ctx context.Context) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	b := s.clicks
	hits, clicks := b.take()
	// A batch holds few distinct clients and user agents (a hot link is
	// clicked by the same browsers over and over), so each is classified
	// and hashed once per batch.
	type verdict struct {
		bot    bool
		reason string
	}
	verdicts := map[[3]string]verdict{}
	visitors := map[[2]string]string{}
	dims := newDimCache(s.opts.Country)
	for _, h := range hits {
		vk := [3]string{h.UserAgent, h.Purpose, ""}
		if h.Head {
			vk[2] = "head"
		}
		v, ok := verdicts[vk]
		if !ok {
			v.bot, v.reason = ClassifyHit(h.Head, h.UserAgent, h.Purpose)
			verdicts[vk] = v
		}
		hk := [2]string{h.Client, h.UserAgent}
		visitor, ok := visitors[hk]
		if !ok {
			visitor = visitorHash(s.visitorKey, h.Client, h.UserAgent)
			visitors[hk] = visitor
		}
		clicks = append(clicks, Click{
			LinkID: h.LinkID, At: time.UnixMicro(h.at).UTC(), Bot: v.bot, Reason: v.reason, Visitor: visitor,
			Dimensions: dims.of(h.Hit, v.bot),
			Code:       h.Code,
			Domain:     h.Domain,
		})
	}
	b.giveBack(hits)
	if len(clicks) == 0 {
		return nil
	}
	if err := s.store.RecordClicks(ctx, clicks); err != nil {
		keep := min(len(clicks), b.max)
		s.metrics.StoreError(len(clicks) - keep)
		b.mu.Lock()
		b.retry = clicks[:keep]
		b.mu.Unlock()
		s.log.Warn("recording link clicks failed; will retry", slog.Int("clicks", keep), slog.Any("error", err))
		return err
	}
	bots := 0
	for _, c := range clicks {
		if c.Bot {
			bots++
		}
	}
	s.metrics.Recorded(len(clicks)-bots, bots)
	if s.opts.OnRecorded != nil {
		s.opts.OnRecorded(clicks)
	}
	if s.opts.OnClicks != nil && bots < len(clicks) {
		s.opts.OnClicks(ctx, clicks)
	}
	return nil
}

// ClickStore is the record store's side of the click flusher (Flush);
// every Store is one.
type ClickStore interface {
	// RecordClicks stores clicks and updates each link's counters once,
	// in one transaction. Clicks of links that no longer exist are dropped.
	RecordClicks(ctx context.Context, clicks []Click) error
}

// ClickRetentionStore is the record store's side of the click retention
// (Options.ClickRetention); *store.DB implements it.
type ClickRetentionStore interface {
	// PurgeClicks deletes raw clicks older than before of the links with
	// ids from from on, in id order, about limit of them at most (clicks
	// at the same instant go together), in one transaction. It returns how
	// many went and the id to start from next time, 0 once every link was
	// seen. Rollups, conversions and link counters are kept.
	PurgeClicks(ctx context.Context, before time.Time, from int64, limit int) (deleted int, next int64, err error)
}

// clickPurgeBatch bounds the clicks one click retention transaction
// deletes, so the purge never holds the write lock for long.
const clickPurgeBatch = 1000

// PurgeClicks deletes the raw clicks older than ClickRetention, in bounded
// transactions, and returns how many went; with no retention, or a store
// without ClickRetentionStore, it does nothing. Run calls it every
// PurgeInterval on every node: nodes sharing PostgreSQL may run it at the
// same time (each deletes what the other has not yet).
func (s *Service) PurgeClicks(ctx context.Context) (int, error) {
	st, ok := s.store.(ClickRetentionStore)
	if s.opts.ClickRetention <= 0 || !ok {
		return 0, nil
	}
	before := s.now().Add(-s.opts.ClickRetention)
	total := 0
	for from := int64(0); ; {
		n, next, err := st.PurgeClicks(ctx, before, from, clickPurgeBatch)
		total += n
		s.metrics.ClicksPurged(n)
		if err != nil || next == 0 {
			return total, err
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
		from = next
	}
}
