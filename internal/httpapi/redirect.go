package httpapi

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/breaker"
	"github.com/sluicehq/sluice/internal/shorten"
)

// Header values of every redirect, shared to spare an allocation each.
var (
	noStore = []string{"private, no-store"}
)

// redirect answers GET and HEAD /{code}: it reads the request into a
// shorten.Request, lets the shortener decide (shorten.Service.Redirect),
// and writes the answer: 302 to the target, 404 for an unknown code, 410
// (or 302 to the fallback URL) for an expired or used-up link, 200 with
// botPage for a bot opening a visit-limited link, 429 when the client has
// looked up too many unknown codes, 503 while the store is known down.
func (s *Server) redirect(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Links == nil {
		return shorten.ErrNotFound
	}
	purpose := r.Header.Get("Sec-Purpose")
	if purpose == "" {
		purpose = r.Header.Get("Purpose")
	}
	a, err := s.opts.Links.Redirect(r.Context(), shorten.Request{
		Host: r.Host, Code: r.PathValue("code"), Client: s.clientAddr(r), Head: r.Method == http.MethodHead,
		UserAgent: r.Header.Get("User-Agent"), Purpose: purpose,
		AcceptLanguage: r.Header.Get("Accept-Language"), Referer: r.Header.Get("Referer"),
		RawQuery: r.URL.RawQuery,
	})
	h := w.Header()
	if a.Found {
		h["Cache-Control"] = noStore
	}
	if err != nil {
		if le, ok := errors.AsType[*shorten.LimitedError](err); ok {
			secs := int64((le.RetryAfter + time.Second - 1) / time.Second)
			w.Header().Set("Retry-After", strconv.FormatInt(max(1, secs), 10))
			WriteProblem(w, r, NewProblem(http.StatusTooManyRequests, "quota-exceeded", "", le.Error()))
			return nil
		}
		if oe, ok := errors.AsType[*breaker.OpenError](err); ok {
			writeStoreDown(w, r, oe)
			return nil
		}
		return err
	}
	if a.BotPage {
		writeBotPage(w, r)
		return nil
	}
	h["Location"] = []string{a.Location}
	w.WriteHeader(http.StatusFound)
	return nil
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
