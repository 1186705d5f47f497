package config

import (
	"fmt"
	"net/netip"
	"slices"
)

// Proxies returns the trusted proxies: --trusted-proxies and, for
// configurations written before it, the deprecated
// gateway.trusted_proxies. Every part that needs the client's address
// (the API's access log and keyless loopback check, the shortener's
// unknown-code limit, the gateway and its login routes) uses this one
// list. It fails on an entry that is not an address or CIDR; Validate
// reports the same.
func (c Config) Proxies() ([]netip.Prefix, error) {
	return ParsePrefixes(slices.Concat(c.TrustedProxies, c.Gateway.TrustedProxies))
}

// ProxyHeaders are the values of --trusted-proxy-header; "any" is read
// as httplimit.HeaderAny.
var ProxyHeaders = []string{"x-forwarded-for", "forwarded", "any"}

func (c Config) validateProxies(bad func(flag, format string, args ...any)) {
	if !slices.Contains(ProxyHeaders, c.ProxyHeader) {
		bad("trusted-proxy-header", "must be one of %v", ProxyHeaders)
	}
	if _, err := ParsePrefixes(c.TrustedProxies); err != nil {
		bad("trusted-proxies", "%v", err)
	}
	if _, err := ParsePrefixes(c.Gateway.TrustedProxies); err != nil {
		bad("gateway-trusted-proxies", "%v", err)
	}
}

// ParsePrefixes reads addresses ("10.0.0.1") and CIDRs ("10.0.0.0/8").
// IPv4-mapped IPv6 entries are unmapped, as client addresses are.
func ParsePrefixes(ss []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(ss))
	for _, s := range ss {
		if p, err := netip.ParsePrefix(s); err == nil {
			if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
				p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not an address or CIDR", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}
