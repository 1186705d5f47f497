package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/shorten"
)

// LinkExtras is what per-dimension stats and conversions need beyond
// Links; the shortener (*shorten.Service) has it.
// A Links without it answers 503 on those routes.
type LinkExtras interface {
	Stats(ctx context.Context, caller shorten.Caller, code string, from, to time.Time, by time.Duration, group shorten.Dim) (shorten.LinkStats, error)
	Convert(ctx context.Context, caller shorten.Caller, clickID, event string, value float64) (shorten.Conversion, bool, error)
}

func (s *Server) linkExtras() (LinkExtras, error) {
	x, ok := s.opts.Links.(LinkExtras)
	if !ok {
		return nil, errLinksOff
	}
	return x, nil
}

// linkExtrasRequest are the optional fields of POST /v1/links.
type linkExtrasRequest struct {
	MaxVisits   int64  `json:"max_visits"`
	FallbackURL string `json:"fallback_url"`
	ClickIDs    bool   `json:"click_ids"`
}

func (x linkExtrasRequest) extras() shorten.LinkExtras {
	return shorten.LinkExtras{MaxVisits: x.MaxVisits, FallbackURL: x.FallbackURL, ClickIDs: x.ClickIDs}
}

// linkExtrasResponse are the fields of a link that come with them.
type linkExtrasResponse struct {
	MaxVisits   *int64 `json:"max_visits"`
	Visits      int64  `json:"visits"`
	FallbackURL string `json:"fallback_url,omitempty"`
	ClickIDs    bool   `json:"click_ids"`
	Conversions int64  `json:"conversions"`
}

func toLinkExtras(l shorten.Link) linkExtrasResponse {
	x := linkExtrasResponse{Visits: l.Visits, FallbackURL: l.FallbackURL, ClickIDs: l.ClickIDs, Conversions: l.Conversions}
	if l.MaxVisits > 0 {
		x.MaxVisits = &l.MaxVisits
	}
	return x
}

// botPage is what a bot gets from a visit-limited link: no target, no
// visit spent. A link-preview fetcher (an SMS app drawing a card, a mail
// scanner) opening a one-time link must not use it up, nor see where it
// leads.
const botPage = `<!doctype html><meta name="robots" content="noindex"><title>Link</title><p>Open this link in a browser.</p>`

// writeBotPage answers a bot opening a visit-limited link
// (shorten.Redirect.BotPage): botPage, with no target.
func writeBotPage(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("X-Robots-Tag", "noindex")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write([]byte(botPage))
	}
}
