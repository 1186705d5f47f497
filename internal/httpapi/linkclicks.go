package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/shorten"
)

// LinkStats is what the link statistics routes need beyond Links: the
// top links (GET /v1/stats/links), a link's clicks over time (GET
// /v1/links/{code}/clicks) and its stats from the rollups (GET
// /v1/links/{code}/stats, linkstats.go); the shortener (*shorten.Service)
// has both. A Links without it answers 503 there.
type LinkStats interface {
	TopLinks(ctx context.Context, caller shorten.Caller, domain *string, limit int) ([]shorten.Link, error)
	Clicks(ctx context.Context, caller shorten.Caller, code string, since time.Time, bucket time.Duration) (shorten.ClickSeries, error)
	Stats(ctx context.Context, caller shorten.Caller, code string, from, to time.Time, by time.Duration, group shorten.Dim) (shorten.LinkStats, error)
}

func (s *Server) registerLinkClicks() {
	s.Handle("GET /v1/links/{code}/clicks", auth.ScopeLinksWrite, s.linkClicks)
}

func (s *Server) linkStats() (LinkStats, error) {
	ls, ok := s.opts.Links.(LinkStats)
	if !ok {
		return nil, errLinksOff
	}
	return ls, nil
}

type clickBucketJSON struct {
	Start time.Time `json:"start"`
	Human int64     `json:"human"`
	Bot   int64     `json:"bot"`
}

// linkClicks answers a link's hits over time: ?since= (a duration back
// from now, default 24h) in ?bucket= steps (default 1h). Buckets without
// hits are left out.
func (s *Server) linkClicks(w http.ResponseWriter, r *http.Request) error {
	ls, err := s.linkStats()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	span, err := durationParam(q.Get("since"), "since", 24*time.Hour)
	if err != nil {
		return err
	}
	bucket, err := durationParam(q.Get("bucket"), "bucket", time.Hour)
	if err != nil {
		return err
	}
	series, err := ls.Clicks(r.Context(), linkCaller(r), linkKey(r), s.opts.Now().Add(-span), bucket)
	if err != nil {
		return err
	}
	out := struct {
		Code       string            `json:"code"`
		Since      time.Time         `json:"since"`
		Until      time.Time         `json:"until"`
		BucketS    int64             `json:"bucket_seconds"`
		Buckets    []clickBucketJSON `json:"buckets"`
		BotReasons map[string]int64  `json:"bot_reasons"`
	}{Code: r.PathValue("code"), Since: series.Since.UTC(), Until: series.Until.UTC(), BucketS: int64(series.Bucket / time.Second),
		Buckets: make([]clickBucketJSON, len(series.Buckets)), BotReasons: series.BotReasons}
	for i, b := range series.Buckets {
		out.Buckets[i] = clickBucketJSON{Start: b.Start.UTC(), Human: b.Human, Bot: b.Bot}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func durationParam(v, field string, def time.Duration) (time.Duration, error) {
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fieldErrors(apperr.Invalid, field, "must be a positive duration such as 30m, 24h")
	}
	return d, nil
}
