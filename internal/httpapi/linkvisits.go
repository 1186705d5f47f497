package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/shorten"
)

// LinkExtras is what visit limits, click ids, per-dimension stats and
// conversions need beyond Links; the shortener (*shorten.Service) has it.
// A Links without it answers 503 on those routes.
type LinkExtras interface {
	Visit(ctx context.Context, t shorten.Target) (shorten.Target, error)
	NewClickID(linkID int64) (string, error)
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

// hitDetails reads what a hit's dimensions come from. The QR code's URL
// is the short URL with exactly "?src=qr", so one comparison tells a scan.
func hitDetails(r *http.Request) shorten.HitDetails {
	d := shorten.HitDetails{Referer: r.Header.Get("Referer"), AcceptLanguage: r.Header.Get("Accept-Language")}
	if r.URL.RawQuery == shorten.QRMarker {
		d.Source = shorten.SourceQR
	}
	return d
}

// botPage is what a bot gets from a visit-limited link: no target, no
// visit spent. A link-preview fetcher (an SMS app drawing a card, a mail
// scanner) opening a one-time link must not use it up, nor see where it
// leads.
const botPage = `<!doctype html><meta name="robots" content="noindex"><title>Link</title><p>Open this link in a browser.</p>`

// redirectSpecial finishes a redirect to a link with extras (after the
// expiry check): a visit-limited link spends a visit in the store for a
// human (bots get botPage and spend none); a link with click ids gets a
// fresh signed id on the target for a human, recorded with the click.
func (s *Server) redirectSpecial(w http.ResponseWriter, r *http.Request, t shorten.Target, hit shorten.Hit) error {
	x, err := s.linkExtras()
	if err != nil {
		return err
	}
	bot, _ := shorten.ClassifyHit(hit.Head, hit.UserAgent, hit.Purpose)
	h := w.Header()
	if t.Limited && bot {
		s.opts.Links.RecordHit(hit)
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("X-Robots-Tag", "noindex")
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			_, _ = w.Write([]byte(botPage))
		}
		return nil
	}
	if t.Limited {
		if t, err = x.Visit(r.Context(), t); err != nil {
			return err
		}
		if t.UsedUp {
			if t.URL == "" {
				return apperr.New(apperr.Gone, "this short link has been used up")
			}
			h["Location"] = []string{t.URL}
			w.WriteHeader(http.StatusFound)
			return nil
		}
	}
	target := t.URL
	if t.ClickIDs && !bot {
		id, err := x.NewClickID(t.LinkID)
		if err != nil {
			return err
		}
		hit.ClickID = id
		target = shorten.WithClickID(target, id)
	}
	s.opts.Links.RecordHit(hit)
	h["Location"] = []string{target}
	w.WriteHeader(http.StatusFound)
	return nil
}
