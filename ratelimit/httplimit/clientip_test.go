package httplimit_test

import (
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/sluicehq/sluice/ratelimit/httplimit"
)

var proxies = httplimit.Identifier{TrustedProxies: []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("fd00::/8"),
}}

func TestClientIP(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, remote string
		xff, fwd     []string
		want         string
	}{
		{name: "no proxy", remote: "203.0.113.9:5000", want: "203.0.113.9"},
		{name: "untrusted peer's X-Forwarded-For is ignored", remote: "203.0.113.9:5000", xff: []string{"1.2.3.4"}, want: "203.0.113.9"},
		{name: "untrusted peer's Forwarded is ignored", remote: "203.0.113.9:5000", fwd: []string{"for=1.2.3.4"}, want: "203.0.113.9"},
		{name: "untrusted loopback peer claims nothing", remote: "127.0.0.1:5000", xff: []string{"198.51.100.7"}, want: "127.0.0.1"},
		{name: "trusted peer", remote: "10.0.0.2:80", xff: []string{"198.51.100.7"}, want: "198.51.100.7"},
		{name: "trusted hops skipped", remote: "10.0.0.2:80", xff: []string{"198.51.100.7, 10.1.1.1", "10.2.2.2"}, want: "198.51.100.7"},
		{name: "multiple headers read in order", remote: "10.0.0.2:80", xff: []string{"6.6.6.6", "198.51.100.7,10.1.1.1"}, want: "198.51.100.7"},
		{name: "spoofed left part is skipped", remote: "10.0.0.2:80", xff: []string{"6.6.6.6, 198.51.100.7"}, want: "198.51.100.7"},
		{name: "client claims a trusted address", remote: "10.0.0.2:80", xff: []string{"10.3.3.3, 198.51.100.7"}, want: "198.51.100.7"},
		{name: "all trusted: the leftmost", remote: "10.0.0.2:80", xff: []string{"10.9.9.9, 10.8.8.8"}, want: "10.9.9.9"},
		{name: "entry with a port", remote: "10.0.0.2:80", xff: []string{"198.51.100.7:4711"}, want: "198.51.100.7"},
		{name: "bracketed ipv6 entry", remote: "10.0.0.2:80", xff: []string{"[2001:db8::7]:4711"}, want: "2001:db8::7"},
		{name: "ipv6 peer", remote: "[::1]:80", xff: []string{"2001:db8::1"}, want: "2001:db8::1"},
		{name: "mapped ipv4", remote: "[::ffff:203.0.113.9]:1", want: "203.0.113.9"},
		{name: "mapped ipv4 entry", remote: "10.0.0.2:80", xff: []string{"::ffff:198.51.100.7"}, want: "198.51.100.7"},
		{name: "blank header is no header", remote: "10.0.0.2:80", xff: []string{" "}, want: "10.0.0.2"},
		{name: "garbage falls back to the peer", remote: "10.0.0.2:80", xff: []string{"nonsense"}, want: "10.0.0.2"},
		{name: "garbage behind a valid entry", remote: "10.0.0.2:80", xff: []string{"198.51.100.7, nonsense"}, want: "10.0.0.2"},
		{name: "garbage left of the client is never read", remote: "10.0.0.2:80", xff: []string{"nonsense, 198.51.100.7"}, want: "198.51.100.7"},
		{name: "garbage among trusted hops", remote: "10.0.0.2:80", xff: []string{"nonsense, 10.1.1.1"}, want: "10.0.0.2"},
		{name: "empty entry", remote: "10.0.0.2:80", xff: []string{"198.51.100.7,,10.1.1.1"}, want: "10.0.0.2"},
		{name: "unparsable peer", remote: "somewhere", xff: []string{"198.51.100.7"}, want: "invalid IP"},

		{name: "forwarded", remote: "10.0.0.2:80", fwd: []string{"for=198.51.100.7"}, want: "198.51.100.7"},
		{name: "forwarded with other pairs", remote: "10.0.0.2:80", fwd: []string{"for=198.51.100.7;proto=https;by=10.0.0.2"}, want: "198.51.100.7"},
		{name: "forwarded case-insensitive name", remote: "10.0.0.2:80", fwd: []string{"proto=http; For=198.51.100.7"}, want: "198.51.100.7"},
		{name: "forwarded quoted ipv4 with port", remote: "10.0.0.2:80", fwd: []string{`for="198.51.100.7:47011"`}, want: "198.51.100.7"},
		{name: "forwarded quoted ipv6", remote: "10.0.0.2:80", fwd: []string{`for="[2001:db8:cafe::17]"`}, want: "2001:db8:cafe::17"},
		{name: "forwarded quoted ipv6 with port", remote: "10.0.0.2:80", fwd: []string{`for="[2001:db8:cafe::17]:4711"`}, want: "2001:db8:cafe::17"},
		{name: "forwarded chain, trusted hops skipped", remote: "10.0.0.2:80", fwd: []string{`for=6.6.6.6, for=198.51.100.7`, `for="[fd00::1]";proto=https`}, want: "198.51.100.7"},
		{name: "forwarded quoted comma and escape", remote: "10.0.0.2:80", fwd: []string{`for=198.51.100.7;ext="a,b\"c", for=10.1.1.1`}, want: "198.51.100.7"},
		{name: "forwarded empty pairs", remote: "10.0.0.2:80", fwd: []string{`;for=198.51.100.7;;`}, want: "198.51.100.7"},
		{name: "forwarded unknown", remote: "10.0.0.2:80", fwd: []string{"for=unknown"}, want: "10.0.0.2"},
		{name: "forwarded obfuscated", remote: "10.0.0.2:80", fwd: []string{"for=_hidden, for=10.1.1.1"}, want: "10.0.0.2"},
		{name: "forwarded unknown left of the client is never read", remote: "10.0.0.2:80", fwd: []string{"for=unknown, for=198.51.100.7"}, want: "198.51.100.7"},
		{name: "forwarded element without for", remote: "10.0.0.2:80", fwd: []string{"for=198.51.100.7, proto=https"}, want: "10.0.0.2"},
		{name: "forwarded for twice", remote: "10.0.0.2:80", fwd: []string{"for=198.51.100.7;for=6.6.6.6"}, want: "10.0.0.2"},
		{name: "forwarded unterminated quote", remote: "10.0.0.2:80", fwd: []string{`for="198.51.100.7`}, want: "10.0.0.2"},
		{name: "forwarded unquoted ipv6 is not a token", remote: "10.0.0.2:80", fwd: []string{"for=[2001:db8::1]"}, want: "10.0.0.2"},
		{name: "forwarded no value", remote: "10.0.0.2:80", fwd: []string{"for="}, want: "10.0.0.2"},
		{name: "forwarded garbage", remote: "10.0.0.2:80", fwd: []string{"198.51.100.7"}, want: "10.0.0.2"},
		{name: "forwarded junk after element", remote: "10.0.0.2:80", fwd: []string{`for="198.51.100.7" x`}, want: "10.0.0.2"},

		{name: "both headers agree", remote: "10.0.0.2:80", xff: []string{"198.51.100.7"}, fwd: []string{"for=198.51.100.7"}, want: "198.51.100.7"},
		{name: "both headers disagree", remote: "10.0.0.2:80", xff: []string{"198.51.100.7"}, fwd: []string{"for=6.6.6.6"}, want: "10.0.0.2"},
		{name: "x-forwarded-for fine, forwarded garbage", remote: "10.0.0.2:80", xff: []string{"198.51.100.7"}, fwd: []string{"nonsense"}, want: "10.0.0.2"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tt.remote
		for _, v := range tt.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		for _, v := range tt.fwd {
			r.Header.Add("Forwarded", v)
		}
		if got := proxies.ClientIP(r); got.String() != tt.want {
			t.Errorf("%s: ClientIP(peer %s, X-Forwarded-For %q, Forwarded %q) = %s, want %s", tt.name, tt.remote, tt.xff, tt.fwd, got, tt.want)
		}
	}
}

func TestNoTrustedProxiesIgnoresHeaders(t *testing.T) {
	t.Parallel()
	var id httplimit.Identifier
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.2:80"
	r.Header.Set("X-Forwarded-For", "198.51.100.7")
	r.Header.Set("Forwarded", "for=198.51.100.7")
	if got := id.ClientIP(r); got.String() != "10.0.0.2" || id.TrustedPeer(r) {
		t.Errorf("zero Identifier: ClientIP = %s, TrustedPeer = %v; want the peer 10.0.0.2, untrusted", got, id.TrustedPeer(r))
	}
}

// FuzzClientIP feeds forwarding headers of a trusted peer, each ending in
// the entry a proxy would append for a real client, 198.51.100.7. Whatever
// the client wrote before it, the answer is that client or, for headers
// that cannot be read, the peer: never an address the client chose.
func FuzzClientIP(f *testing.F) {
	for _, seed := range [][2]string{
		{"", ""}, {"6.6.6.6", ""}, {"", "for=6.6.6.6"}, {"nonsense,", `for="[::1`},
		{"[::1]:80, 10.0.0.1", `for="[2001:db8::1]:4711";proto=https, for=unknown`},
		{`"`, `for="a\"b"`}, {",,,", ";;;"}, {"::ffff:10.0.0.1", "for=_x;by=_y"},
	} {
		f.Add(seed[0], seed[1])
	}
	peer := netip.MustParseAddr("10.0.0.2")
	client := netip.MustParseAddr("198.51.100.7")
	f.Fuzz(func(t *testing.T, xff, fwd string) {
		for _, header := range []string{"X-Forwarded-For", "Forwarded"} {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "10.0.0.2:1234"
			r.Header["X-Forwarded-For"] = []string{xff}
			r.Header["Forwarded"] = []string{fwd}
			if header == "X-Forwarded-For" {
				r.Header.Add(header, client.String())
				delete(r.Header, "Forwarded")
			} else {
				r.Header.Add(header, "for="+client.String())
				delete(r.Header, "X-Forwarded-For")
			}
			if got := proxies.ClientIP(r); got != client && got != peer {
				t.Errorf("%s %q: ClientIP = %s, want %s or the peer %s", header, r.Header.Values(header), got, client, peer)
			}
			r.RemoteAddr = "203.0.113.9:1"
			if got := proxies.ClientIP(r); got.String() != "203.0.113.9" {
				t.Errorf("untrusted peer with %s %q: ClientIP = %s, want the peer", header, r.Header.Values(header), got)
			}
		}
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "10.0.0.2:1234"
		r.Header["X-Forwarded-For"] = []string{xff}
		r.Header["Forwarded"] = []string{fwd}
		if got := proxies.ClientIP(r); !got.IsValid() {
			t.Errorf("X-Forwarded-For %q, Forwarded %q: ClientIP invalid, want an address", xff, fwd)
		}
	})
}

// Behind proxies known to write one header, a client that sends the
// other one, well-formed, disagreeing or garbage, is still itself: never
// the proxy, never an address it chose.
func TestClientIPTrustsOnlyTheProxysHeader(t *testing.T) {
	t.Parallel()
	xffOnly := httplimit.Identifier{TrustedProxies: proxies.TrustedProxies, Header: httplimit.HeaderXForwardedFor}
	fwdOnly := httplimit.Identifier{TrustedProxies: proxies.TrustedProxies, Header: httplimit.HeaderForwarded}
	tests := []struct {
		name     string
		id       httplimit.Identifier
		xff, fwd []string
		want     string
	}{
		{"client adds Forwarded", xffOnly, []string{"198.51.100.7"}, []string{"for=6.6.6.6"}, "198.51.100.7"},
		{"client adds garbage Forwarded", xffOnly, []string{"198.51.100.7"}, []string{`for="[::1`}, "198.51.100.7"},
		{"client adds Forwarded naming the proxy", xffOnly, []string{"198.51.100.7"}, []string{"for=10.0.0.2"}, "198.51.100.7"},
		{"no X-Forwarded-For: the peer", xffOnly, nil, []string{"for=6.6.6.6"}, "10.0.0.2"},
		{"client adds X-Forwarded-For", fwdOnly, []string{"6.6.6.6"}, []string{"for=198.51.100.7"}, "198.51.100.7"},
		{"client adds garbage X-Forwarded-For", fwdOnly, []string{"nonsense,,"}, []string{"for=198.51.100.7"}, "198.51.100.7"},
		{"client's malformed Forwarded left of the proxy's", fwdOnly, nil, []string{`for="6.6.6.6`, "for=198.51.100.7"}, "198.51.100.7"},
		{"any: client's malformed Forwarded left of the proxy's", proxies, nil, []string{"nonsense", "for=198.51.100.7"}, "198.51.100.7"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "10.0.0.2:80"
		for _, v := range tt.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		for _, v := range tt.fwd {
			r.Header.Add("Forwarded", v)
		}
		if got := tt.id.ClientIP(r); got.String() != tt.want {
			t.Errorf("%s: ClientIP(X-Forwarded-For %q, Forwarded %q) = %s, want %s", tt.name, tt.xff, tt.fwd, got, tt.want)
		}
	}
}

// FuzzClientIPOneHeader: behind proxies writing only X-Forwarded-For (or
// only Forwarded), whatever the client puts in the other header and left
// of its proxy's entry, the client is the address the proxy appended.
func FuzzClientIPOneHeader(f *testing.F) {
	for _, seed := range [][2]string{{"", ""}, {"6.6.6.6", "for=6.6.6.6"}, {"nonsense,", `for="[::1`}, {`"`, ";;;,"}, {"10.0.0.2", "for=10.0.0.2"}} {
		f.Add(seed[0], seed[1])
	}
	client := netip.MustParseAddr("198.51.100.7")
	f.Fuzz(func(t *testing.T, xff, fwd string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "10.0.0.2:1234"
		r.Header["X-Forwarded-For"] = []string{xff, client.String()}
		r.Header["Forwarded"] = []string{fwd}
		id := httplimit.Identifier{TrustedProxies: proxies.TrustedProxies, Header: httplimit.HeaderXForwardedFor}
		if got := id.ClientIP(r); got != client {
			t.Errorf("X-Forwarded-For %q, Forwarded %q: ClientIP = %s, want %s", r.Header["X-Forwarded-For"], fwd, got, client)
		}
		r.Header["X-Forwarded-For"] = []string{xff}
		r.Header["Forwarded"] = []string{fwd, "for=" + client.String()}
		id.Header = httplimit.HeaderForwarded
		if got := id.ClientIP(r); got != client {
			t.Errorf("Forwarded %q, X-Forwarded-For %q: ClientIP = %s, want %s", r.Header["Forwarded"], xff, got, client)
		}
	})
}
