package main

import (
	"context"
	"net"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/shorten"
)

// domainOptions is how the shortener treats custom domains: never one of
// this server's own hosts, proved over DNS with links.domains.verify dns,
// capped per key and in all.
func (n *node) domainOptions() shorten.DomainOptions {
	d := n.cfg.Links.Domains
	return shorten.DomainOptions{
		OwnHosts:       n.cfg.OwnHosts(),
		Verify:         d.Verify == config.DomainsVerifyDNS,
		LookupTXT:      lookupTXTVia(d.Resolver),
		VerifyInterval: d.VerifyInterval,
		MaxPerOwner:    d.MaxPerOwner,
		Max:            d.Max,
	}
}

// lookupTXTVia looks TXT records up on the DNS server at addr (host:port),
// over UDP and, for a truncated answer, TCP; with addr empty, on the
// system resolver.
func lookupTXTVia(addr string) func(ctx context.Context, name string) ([]string, error) {
	if addr == "" {
		return net.DefaultResolver.LookupTXT
	}
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	return r.LookupTXT
}
