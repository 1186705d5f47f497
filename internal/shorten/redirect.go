package shorten

import (
	"context"

	"github.com/sluicehq/sluice/internal/apperr"
)

// Request is one request for a short link, as the HTTP adapter reads it:
// GET or HEAD /{code} on a host.
type Request struct {
	// Host is the request's Host header; Code the path's code.
	Host, Code string
	// Client is the client's IP address (behind trusted proxies, the one
	// they name): the unknown-code limit's key, the rules' geo and split
	// input, the visitor hash's.
	Client string
	// Head is true for a HEAD request, always a bot's hit.
	Head bool
	// UserAgent, Purpose (the Sec-Purpose header, else Purpose),
	// AcceptLanguage and Referer are the request's headers, as sent.
	UserAgent, Purpose, AcceptLanguage, Referer string
	// RawQuery is the short URL's query string, without '?'.
	RawQuery string
}

// Redirect is the answer to a Request that found a link (or a domain's
// fallback URL): a 302 to Location, or, when BotPage is set, a page that
// names no target (200), for a bot opening a visit-limited link.
type Redirect struct {
	Location string
	BotPage  bool
	// Found is set once the host and code resolved, also with an error
	// (ErrExpired, ErrUsedUp, a failure to spend a visit): the answer is
	// about one link and no cache may keep it.
	Found bool
}

// Answers of the redirect path that are errors, shared so that answering
// costs no allocation.
var (
	ErrExpired = apperr.New(apperr.Gone, "this short link has expired")
	ErrUsedUp  = apperr.New(apperr.Gone, "this short link has been used up")
)

// Redirect decides the answer to one request for a short link, in this
// order: resolve the host and code (ResolveHost: ErrNotFound, a
// *LimitedError past the unknown-code limit, a *breaker.OpenError while
// the store is known down); a domain's fallback URL for an unknown code,
// recording nothing; an expired link's fallback, else ErrExpired; the
// target its rules choose (Choose); for a visit-limited link, a bot page
// for a bot (no visit spent) or a visit spent for a human (Visit; its
// fallback, else ErrUsedUp, once used up); a fresh click id on a human's
// target when the link asks for them; and the hit recorded (RecordHit),
// bots' included.
func (s *Service) Redirect(ctx context.Context, r Request) (Redirect, error) {
	t, err := s.ResolveHost(ctx, r.Host, r.Code, r.Client)
	if err != nil {
		return Redirect{}, err
	}
	if t.Unknown { // an unknown code on a domain with a fallback URL
		return Redirect{Location: t.URL, Found: true}, nil
	}
	if t.Expired {
		if t.URL == "" {
			return Redirect{Found: true}, ErrExpired
		}
		return Redirect{Location: t.URL, Found: true}, nil
	}
	if t.Rules != nil {
		t = s.Choose(t, Visit{UserAgent: r.UserAgent, AcceptLanguage: r.AcceptLanguage, RawQuery: r.RawQuery, Client: r.Client})
	}
	hit := Hit{
		LinkID: t.LinkID, Head: r.Head,
		UserAgent: r.UserAgent, Purpose: r.Purpose, Client: r.Client,
		HitDetails: HitDetails{Referer: r.Referer, AcceptLanguage: r.AcceptLanguage},
		Target:     t.Rule, Code: r.Code, Domain: t.Domain,
	}
	// The QR code's URL is the short URL with exactly "?src=qr", so one
	// comparison tells a scan.
	if r.RawQuery == QRMarker {
		hit.Source = SourceQR
	}
	if t.Limited || t.ClickIDs {
		return s.redirectSpecial(ctx, t, hit)
	}
	s.RecordHit(hit)
	return Redirect{Location: t.URL, Found: true}, nil
}

// redirectSpecial finishes a redirect to a link with extras (after the
// expiry check): a visit-limited link spends a visit in the store for a
// human (a bot gets the bot page and spends none: a link-preview fetcher,
// an SMS app drawing a card or a mail scanner, opening a one-time link
// must not use it up, nor see where it leads); a link with click ids gets
// a fresh signed id on a human's target, recorded with the click.
func (s *Service) redirectSpecial(ctx context.Context, t Target, hit Hit) (Redirect, error) {
	bot, _ := ClassifyHit(hit.Head, hit.UserAgent, hit.Purpose)
	if t.Limited && bot {
		s.RecordHit(hit)
		return Redirect{BotPage: true, Found: true}, nil
	}
	if t.Limited {
		var err error
		if t, err = s.Visit(ctx, t); err != nil {
			return Redirect{Found: true}, err
		}
		if t.UsedUp {
			if t.URL == "" {
				return Redirect{Found: true}, ErrUsedUp
			}
			return Redirect{Location: t.URL, Found: true}, nil
		}
	}
	target := t.URL
	if t.ClickIDs && !bot {
		id, err := s.NewClickID(t.LinkID)
		if err != nil {
			return Redirect{Found: true}, err
		}
		hit.ClickID = id
		target = WithClickID(target, id)
	}
	s.RecordHit(hit)
	return Redirect{Location: target, Found: true}, nil
}
