package httpapi

import (
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/internal/apperr"
)

// The DNS rebinding guard: see the package doc, "The DNS rebinding guard".

// maxHostInDetail bounds how much of a refused Host the problem repeats.
const maxHostInDetail = 100

// hostAllowed reports whether r's Host names this server as a keyless
// one may be named: a loopback address or "localhost" (any case, a
// trailing dot allowed), or one of allowed (compared without the port,
// case-insensitively). An empty or malformed Host is refused.
func hostAllowed(r *http.Request, allowed []string) bool {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	if a, err := netip.ParseAddr(host); err == nil && a.Unmap().IsLoopback() {
		return true
	}
	return slices.ContainsFunc(allowed, func(name string) bool {
		return strings.EqualFold(strings.TrimSuffix(name, "."), host)
	})
}

// errForeignHost is the refusal of a keyless request naming another host.
func errForeignHost(r *http.Request) error {
	h := r.Host
	if len(h) > maxHostInDetail {
		h = h[:maxHostInDetail] + "…"
	}
	return apperr.New(apperr.Forbidden, "Host %q is neither a loopback name nor in --allowed-hosts: while no API key is configured, only requests naming this host as localhost are served (a guard against DNS rebinding); add the name to --allowed-hosts or create a key with `sluice keys create`", h)
}
