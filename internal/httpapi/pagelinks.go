package httpapi

import (
	"cmp"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/sluicehq/sluice/internal/apperr"
)

// pageBase returns the origin the signed links to the UI's pages
// (preference links, inbox links) are built on: ui.public_url when set.
// Without it, the request's Host names the server only on a development
// node: a loopback listener with no API key ever created (where keyless
// mode has already refused a Host that is not loopback or allowed). In
// production (a listener on another address, or keys) a Host is whatever
// the client wrote, and a link built on it would send the user, with a
// valid token, to the attacker's site; so the Host serves only when it is
// a loopback name or one of Options.AllowedHosts (hostAllowed), and
// otherwise the link is refused with 503 and a log line saying to set
// ui.public_url.
func (s *Server) pageBase(r *http.Request) (string, error) {
	if base := cmp.Or(s.opts.UI.PublicURL, s.opts.PublicURL); base != "" {
		return strings.TrimRight(base, "/"), nil
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	production, err := s.production(r)
	if err != nil {
		return "", err
	}
	if !production || hostAllowed(r, s.opts.AllowedHosts) {
		return scheme + "://" + r.Host, nil
	}
	s.log.Warn("refused to build a signed page link: ui.public_url is not set, and the request's Host is not in --allowed-hosts",
		slog.String("host", truncate(r.Host, maxHostInDetail)))
	return "", apperr.New(apperr.Unavailable, "this server has no ui.public_url, so it will not build a link from the request's Host header "+
		"(which any client chooses); set ui.public_url to the address users reach it at, or list this host in --allowed-hosts")
}

// production reports whether r reached a node that is not a development
// one: a listener on a non-loopback address, or an API key ever created.
func (s *Server) production(r *http.Request) (bool, error) {
	if addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && !isLoopback(addr.String()) {
		return true, nil
	}
	ever, err := s.auth.keysConfigured(r.Context())
	if err != nil {
		return false, apperr.Wrap(apperr.Unavailable, err, "checking API keys failed")
	}
	return ever, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
