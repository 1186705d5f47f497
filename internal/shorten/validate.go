package shorten

import (
	"net"
	"net/netip"
	"net/url"
	"strings"

	"github.com/sluicehq/sluice/internal/netguard"
)

// MaxURLLength bounds a target URL, in bytes.
const MaxURLLength = 2048

// Slug length bounds.
const (
	MinSlugLength = 3
	MaxSlugLength = 64
)

// reserved are first path segments that Sluice serves itself (or may one
// day), so no link may take them. Compared case-insensitively.
var reserved = map[string]bool{
	"v1": true, "v2": true, "ui": true, "metrics": true, "healthz": true, "readyz": true,
	"livez": true, "openapi.json": true, "openapi": true, "api": true, "admin": true,
	"static": true, "assets": true, "favicon.ico": true, "robots.txt": true,
	"sitemap.xml": true, ".well-known": true, "login": true, "logout": true,
	"docs": true, "health": true, "status": true, "sluice": true, "debug": true,
}

// IsReserved reports whether s is a path segment Sluice keeps for itself.
func IsReserved(s string) bool { return reserved[strings.ToLower(s)] }

// ValidateSlug checks a custom slug: 3 to 64 characters among ASCII
// letters, digits, '-' and '_', not starting with '-' or '_', and not a
// reserved word. The error is the reason, for a field error's detail.
func ValidateSlug(s string) error {
	if len(s) < MinSlugLength || len(s) > MaxSlugLength {
		return errorf("must be %d to %d characters long", MinSlugLength, MaxSlugLength)
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case digit(b) >= 0:
		case b == '-' || b == '_':
			if i == 0 {
				return errorf("must start with a letter or a digit")
			}
		default:
			return errorf("may hold only letters, digits, '-' and '_'")
		}
	}
	if IsReserved(s) {
		return errorf("%q is reserved", s)
	}
	return nil
}

// validCode is the cheap check of the redirect path: could code be a
// stored code or slug at all?
func validCode(code string) bool {
	if len(code) == 0 || len(code) > MaxSlugLength {
		return false
	}
	for i := 0; i < len(code); i++ {
		if b := code[i]; digit(b) < 0 && b != '-' && b != '_' {
			return false
		}
	}
	return true
}

// TargetPolicy says which link targets are acceptable beyond the rules
// every target follows. The zero value refuses private targets and knows
// no own hosts.
type TargetPolicy struct {
	// OwnHosts are this service's host names (lower case, without port);
	// links to them are refused, since they could loop.
	OwnHosts []string
	// AllowPrivate accepts loopback, private, link-local and unspecified
	// address literals (and "localhost") as targets.
	AllowPrivate bool
	// AllowedPrivate lists prefixes (such as 10.1.0.0/16) and host names
	// accepted even though they are private or this service's own.
	AllowedPrivate []netip.Prefix
	AllowedHosts   []string
}

// ValidateTarget checks raw as a link target: an absolute http or https
// URL with a host, at most MaxURLLength bytes, without credentials, not
// pointing at this service or (unless allowed) a private address literal.
// It returns the parsed URL, or an error whose text is the reason.
func (p TargetPolicy) ValidateTarget(raw string) (*url.URL, error) {
	switch {
	case raw == "":
		return nil, errorf("is required")
	case len(raw) > MaxURLLength:
		return nil, errorf("is %d bytes long; at most %d are accepted", len(raw), MaxURLLength)
	case strings.ContainsAny(raw, " \t\r\n\x00"):
		return nil, errorf("must not contain spaces or control characters")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errorf("is not a valid URL")
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	case "":
		return nil, errorf("must be absolute, starting with http:// or https://")
	default:
		return nil, errorf("scheme %q is not supported; use http or https", u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, errorf("must name a host, as in https://example.com/page")
	}
	if u.User != nil {
		return nil, errorf("must not carry a user name or password")
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if host == "" {
		return nil, errorf("must name a host, as in https://example.com/page")
	}
	if port := u.Port(); port != "" && !validPort(port) {
		return nil, errorf("port %q is not valid", port)
	}
	if p.hostAllowed(host) {
		return u, nil
	}
	for _, own := range p.OwnHosts {
		if host == own {
			return nil, errorf("points at this service (%s); links to it could loop", host)
		}
	}
	if !p.AllowPrivate && isPrivateHost(host) {
		return nil, errorf("points at a private or loopback address (%s), which is not allowed", host)
	}
	return u, nil
}

func (p TargetPolicy) hostAllowed(host string) bool {
	for _, h := range p.AllowedHosts {
		if host == h {
			return true
		}
	}
	if len(p.AllowedPrivate) == 0 {
		return false
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	addr = addr.Unmap()
	for _, pfx := range p.AllowedPrivate {
		if pfx.Contains(addr) {
			return true
		}
	}
	return false
}

func validPort(s string) bool {
	if len(s) > 5 {
		return false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n > 0 && n < 65536
}

// isPrivateHost reports address literals that are not globally reachable
// (every such range of the IANA special-purpose registries, and their
// IPv4-mapped and NAT64 forms: netguard.Blocked), and localhost names. Names are not resolved:
// DNS can change after the check, so only literals are judged.
func isPrivateHost(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		// Forms net.ParseIP rejects but browsers accept as IPv4, like
		// "2130706433" or "0x7f.1": refuse them rather than guess.
		return looksNumeric(host)
	}
	_, blocked := netguard.Blocked(addr)
	return blocked
}

// looksNumeric reports host names made only of digits, dots and hex
// markers, which some resolvers read as IPv4 addresses.
func looksNumeric(host string) bool {
	if net.ParseIP(host) != nil {
		return true
	}
	last := host
	if i := strings.LastIndexByte(host, '.'); i >= 0 {
		last = host[i+1:]
	}
	if last == "" {
		return false
	}
	for i := 0; i < len(last); i++ {
		b := last[i]
		if !(b >= '0' && b <= '9' || b == 'x' || b == 'X' || (b|0x20 >= 'a' && b|0x20 <= 'f' && strings.Contains(strings.ToLower(last), "0x"))) {
			return false
		}
	}
	return true
}

// OwnHosts are the host names of a service reached at baseURL and
// listening on listenAddr (host:port), lower case and without port, as
// TargetPolicy.OwnHosts wants them. A wildcard listen address names no
// host.
func OwnHosts(baseURL, listenAddr string) []string {
	var hosts []string
	if u, err := url.Parse(baseURL); err == nil && u.Hostname() != "" {
		hosts = append(hosts, strings.ToLower(u.Hostname()))
	}
	if h, _, err := net.SplitHostPort(listenAddr); err == nil && h != "" && h != "0.0.0.0" && h != "::" {
		hosts = append(hosts, strings.ToLower(h))
	}
	return hosts
}
