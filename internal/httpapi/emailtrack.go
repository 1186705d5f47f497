package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/breaker"
	"github.com/sluicehq/sluice/internal/notify"
)

// emailTracker records hits on email tracked links and open pixels.
type emailTracker interface {
	EmailHit(ctx context.Context, token string, h notify.EmailHit) (notify.EmailLink, error)
}

// pixelGIF is a transparent 1x1 GIF.
var pixelGIF = []byte("GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\x00\x00\x00!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;")

// pixelCache keeps every load of the open pixel coming to us: browsers,
// mail clients and proxies must not keep it.
var pixelCache = []string{"no-store, no-cache, must-revalidate, private, max-age=0"}

// emailHit serves GET /e/{token}: a tracked email link answers 302 to its
// URL, an open pixel a 1x1 GIF. A hit the store could not record still
// answers: the reader's click must never fail on our bookkeeping. Unknown
// tokens are limited per client (Options.UnknownEmailLinks): each costs a
// store lookup, and a client over the limit is answered 429 without one.
func (s *Server) emailHit(svc emailTracker, w http.ResponseWriter, r *http.Request) error {
	purpose := r.Header.Get("Sec-Purpose")
	if purpose == "" {
		purpose = r.Header.Get("Purpose")
	}
	if err := s.unknownEmailLinks.check(r); err != nil {
		return err
	}
	client, _ := netip.ParseAddr(s.clientAddr(r))
	var l notify.EmailLink
	// While the store is known down, tokens are answered 503 without
	// it, one probe at a time excepted (emailGate).
	err := s.emailGate.Call(func() error {
		var err error
		l, err = svc.EmailHit(r.Context(), r.PathValue("token"), notify.EmailHit{
			Head: r.Method == http.MethodHead, UserAgent: r.Header.Get("User-Agent"), Purpose: purpose, Client: client,
		})
		return err
	})
	if err != nil {
		if l.Token == "" {
			switch {
			case apperr.Is(err, apperr.NotFound):
				return s.unknownEmailLinks.failed(r, "no such token", err)
			case apperr.IsTransient(err):
				// Whether the token exists is unknown: it counts as an
				// unknown token, or a store outage would lift the limit.
				err = s.unknownEmailLinks.failed(r, "store unavailable", err)
				if oe, ok := errors.AsType[*breaker.OpenError](err); ok {
					writeStoreDown(w, r, oe)
					return nil
				}
			}
			return err
		}
		s.log.Warn("could not record an email link hit", slog.String("notification_id", l.NotificationID), slog.Any("error", err))
	}
	h := w.Header()
	if l.Pixel() {
		h["Cache-Control"] = pixelCache
		h["Pragma"] = []string{"no-cache"}
		h["Expires"] = []string{"0"}
		h["Content-Type"] = []string{"image/gif"}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(pixelGIF)
		return nil
	}
	h["Cache-Control"] = noStore
	h["Referrer-Policy"] = []string{"no-referrer"}
	h["Location"] = []string{l.URL}
	w.WriteHeader(http.StatusFound)
	return nil
}
