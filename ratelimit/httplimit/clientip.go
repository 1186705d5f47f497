package httplimit

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ClientIP is the address of the client r comes from: the peer
// (r.RemoteAddr), unless the peer is a trusted proxy. Then the forwarding
// headers, X-Forwarded-For and Forwarded (RFC 7239), are read from the
// right, skipping trusted proxies, and the first address not trusted is
// the client: entries further left were written by the client and prove
// nothing. If every entry is trusted, the leftmost one is the client.
//
// With Identifier.Header set, only that header is read and the other is
// ignored, whatever it holds. Otherwise both are, and:
//
// The peer stands for the client whenever the headers cannot be believed:
// an entry that is not an IP address (garbage, "unknown", an obfuscated
// Forwarded identifier, a Forwarded element without for=), or both
// headers present and naming different clients. A proxy writes one of the
// two; the other came from the client, and believing either could let the
// client choose its address.
func (c *Identifier) ClientIP(r *http.Request) netip.Addr {
	peer := parseAddr(r.RemoteAddr)
	if !peer.IsValid() || !c.trusted(peer) {
		return peer
	}
	var xff, fwdIP netip.Addr
	var hasXFF, hasFwd bool
	if c.Header != HeaderForwarded {
		xff, hasXFF = c.walk(peer, xffEntries(r.Header.Values("X-Forwarded-For")))
	}
	if c.Header != HeaderXForwardedFor {
		fwdIP, hasFwd = c.walk(peer, forwardedFor(r.Header.Values("Forwarded")))
	}
	switch {
	case hasXFF && hasFwd && xff != fwdIP:
		return peer
	case hasXFF:
		return xff
	case hasFwd:
		return fwdIP
	}
	return peer
}

// TrustedPeer reports whether r comes straight from a trusted proxy, whose
// forwarding headers ClientIP reads.
func (c *Identifier) TrustedPeer(r *http.Request) bool {
	peer := parseAddr(r.RemoteAddr)
	return peer.IsValid() && c.trusted(peer)
}

func (c *Identifier) trusted(a netip.Addr) bool {
	for _, p := range c.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// walk reads a chain of forwarding entries sent by the trusted peer, from
// the right. It reports false when there is no entry; an entry that is
// not an address gives the peer.
func (c *Identifier) walk(peer netip.Addr, entries []string) (netip.Addr, bool) {
	if len(entries) == 0 {
		return netip.Addr{}, false
	}
	var client netip.Addr
	for i := len(entries) - 1; i >= 0; i-- {
		client = parseAddr(entries[i])
		if !client.IsValid() {
			return peer, true
		}
		if !c.trusted(client) {
			return client, true
		}
	}
	return client, true
}

// xffEntries splits X-Forwarded-For values into their comma-separated
// entries, in order. Empty or blank header values are no entries; an empty
// entry inside a list is kept, and is no address.
func xffEntries(values []string) []string {
	var out []string
	for _, v := range values {
		if strings.TrimSpace(v) == "" {
			continue
		}
		for e := range strings.SplitSeq(v, ",") {
			out = append(out, strings.TrimSpace(e))
		}
	}
	return out
}

// forwardedFor returns the for= value of every element of Forwarded
// header values (RFC 7239 section 4), in order, unquoted. A value that is
// malformed, or has an element without for=, is one entry "", no
// address: read from the right, a malformed value a client sent left of
// the one its proxy appended is never reached.
func forwardedFor(values []string) []string {
	var out []string
	for _, v := range values {
		if strings.TrimSpace(v) == "" {
			continue
		}
		if fs, ok := forwardedValue(v); ok {
			out = append(out, fs...)
		} else {
			out = append(out, "")
		}
	}
	return out
}

// forwardedValue returns the for= values of one Forwarded field value, or
// false when it is malformed or an element has no for=.
func forwardedValue(v string) ([]string, bool) {
	var out []string
	for {
		var (
			node   string
			hasFor bool
		)
		for { // the element's pairs, separated by ";"
			v = trimOWS(v)
			if v != "" && v[0] != ';' && v[0] != ',' {
				var name, value string
				var ok bool
				name, value, v, ok = forwardedPair(v)
				if !ok || (hasFor && strings.EqualFold(name, "for")) {
					return nil, false
				}
				if strings.EqualFold(name, "for") {
					node, hasFor = value, true
				}
				v = trimOWS(v)
			}
			if v == "" || v[0] != ';' {
				break
			}
			v = v[1:]
		}
		if !hasFor {
			return nil, false
		}
		out = append(out, node)
		if v == "" {
			break
		}
		if v[0] != ',' {
			return nil, false
		}
		v = v[1:]
	}
	return out, true
}

// forwardedPair reads token "=" (token / quoted-string) from the start of
// s and returns the rest.
func forwardedPair(s string) (name, value, rest string, ok bool) {
	i := tokenLen(s)
	if i == 0 || i == len(s) || s[i] != '=' {
		return "", "", "", false
	}
	name, s = s[:i], s[i+1:]
	if s != "" && s[0] == '"' {
		var b strings.Builder
		for j := 1; j < len(s); j++ {
			switch s[j] {
			case '"':
				return name, b.String(), s[j+1:], true
			case '\\':
				if j++; j == len(s) {
					return "", "", "", false
				}
			}
			b.WriteByte(s[j])
		}
		return "", "", "", false // unterminated
	}
	if i = tokenLen(s); i == 0 {
		return "", "", "", false
	}
	return name, s[:i], s[i:], true
}

// tokenLen is the length of the RFC 9110 token at the start of s.
func tokenLen(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return i
		}
	}
	return len(s)
}

func trimOWS(s string) string { return strings.Trim(s, " \t") }

// parseAddr reads "1.2.3.4", "1.2.3.4:5", "[::1]:5", "[::1]" or "::1",
// unmapping IPv4-in-IPv6 and dropping zones.
func parseAddr(s string) netip.Addr {
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	} else if len(s) > 1 && s[0] == '[' && s[len(s)-1] == ']' {
		s = s[1 : len(s)-1]
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap().WithZone("")
}
