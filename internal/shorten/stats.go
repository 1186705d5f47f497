package shorten

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// ClickBucket counts the hits on a link in one time bucket.
type ClickBucket struct {
	Start time.Time
	Human int64
	Bot   int64
}

// ClickSeries is a link's hits over time: buckets in time order (only
// those with hits), and the bot hits of the whole span by reason.
type ClickSeries struct {
	Since, Until time.Time
	Bucket       time.Duration
	Buckets      []ClickBucket
	BotReasons   map[string]int64
}

// StatsStore is the record store's side of the link statistics: the
// links' counters (TopLinks), their raw clicks over time (LinkClicks) and
// the hourly rollups the click flusher keeps (LinkStats). It is separate
// from Store so that a store without it still shortens links; the store's
// conformance suite pins it. *store.DB is one.
type StatsStore interface {
	// TopLinks returns up to limit links ordered by human clicks, then bot
	// hits, then id, both descending; only owner's unless all is set,
	// and only those on *domain when domain is not nil ("" for links
	// without a domain).
	TopLinks(ctx context.Context, owner string, all bool, domain *string, limit int) ([]Link, error)
	// LinkClicks returns the hits on linkID with since <= at < until,
	// counted per bucket (aligned to multiples of bucket since the Unix
	// epoch), and the bot hits by reason.
	LinkClicks(ctx context.Context, linkID int64, since, until time.Time, bucket time.Duration) ([]ClickBucket, map[string]int64, error)
	// LinkStats returns the link's buckets of bucketHours hours over the
	// hours [fromHour, toHour) (Unix hours; a bucket starts at a multiple
	// of bucketHours), with conversions, oldest first and only those with
	// something in them, and the hits by value of dim over the span, most
	// human clicks first, at most limit values.
	LinkStats(ctx context.Context, linkID, fromHour, toHour, bucketHours int64, dim Dim, limit int) ([]StatsBucket, []GroupCount, error)
}

// MaxClickBuckets bounds the buckets one ClickSeries may span.
const MaxClickBuckets = 1000

var errNoStats = apperr.New(apperr.Unavailable, "this store keeps no link statistics")

// TopLinks returns the caller's most clicked links (every link for an
// admin), at most limit; only those on *domain when domain is not nil.
func (s *Service) TopLinks(ctx context.Context, caller Caller, domain *string, limit int) ([]Link, error) {
	st, ok := s.store.(StatsStore)
	if !ok {
		return nil, errNoStats
	}
	if domain != nil && *domain != "" {
		norm, err := NormalizeDomain(*domain)
		if err != nil {
			return nil, &apperr.Error{Code: apperr.Invalid, Message: "the domain is not a host name",
				Fields: []apperr.FieldError{{Field: "domain", Detail: err.Error()}}}
		}
		domain = &norm
	}
	return st.TopLinks(ctx, caller.ID, caller.Admin, domain, limit)
}

// Clicks returns the hits on the link with code over [since, now), in
// buckets of bucket. The caller must own the link. Spans of more than
// MaxClickBuckets buckets are refused.
func (s *Service) Clicks(ctx context.Context, caller Caller, code string, since time.Time, bucket time.Duration) (ClickSeries, error) {
	st, ok := s.store.(StatsStore)
	if !ok {
		return ClickSeries{}, errNoStats
	}
	now := s.now()
	if bucket < time.Second {
		return ClickSeries{}, apperr.New(apperr.Invalid, "the bucket must be at least one second")
	}
	if !since.Before(now) || now.Sub(since)/bucket > MaxClickBuckets {
		return ClickSeries{}, apperr.New(apperr.Invalid, "the span must be in the past and hold at most %d buckets", MaxClickBuckets)
	}
	l, err := s.Get(ctx, caller, code)
	if err != nil {
		return ClickSeries{}, err
	}
	until := now
	if bucket%time.Hour == 0 {
		// No click is recorded after now, so the current hour may be read
		// whole: from its rollup rather than its raw clicks.
		until = now.Truncate(time.Hour).Add(time.Hour)
	}
	buckets, reasons, err := st.LinkClicks(ctx, l.ID, since, until, bucket)
	if err != nil {
		return ClickSeries{}, err
	}
	return ClickSeries{Since: since, Until: now, Bucket: bucket, Buckets: buckets, BotReasons: reasons}, nil
}
