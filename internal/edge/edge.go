// Package edge is where connections from load balancers come in: a
// listener that reads the PROXY protocol header (v1 or v2, HAProxy's
// send-proxy and send-proxy-v2) from trusted proxies, using
// github.com/pires/go-proxyproto, and the TCP peer a request really came
// over, which that header hides.
//
// With the header, a connection's remote address (and so
// http.Request.RemoteAddr) is the client's, as the proxy wrote it; Peer
// still tells the proxy's. The client's address behind proxies that speak
// HTTP (X-Forwarded-For, Forwarded) is httplimit.Identifier.ClientIP's
// business, which starts from RemoteAddr.
package edge

import (
	"context"
	"net"
	"net/http"
	"net/netip"

	"github.com/pires/go-proxyproto"
)

// Listen wraps ln so that its connections may start with a PROXY protocol
// header naming the client.
//
// With trusted empty, any peer may send the header: the listener is meant
// to be reachable only through the load balancer. Otherwise only a peer in
// trusted may; a connection from any other peer that sends one is closed
// on its first read, so that no client can claim an address (loopback
// above all) by writing the header itself. In both cases the header is
// optional: a connection without one (a health check, a client on the
// same network) is served under its peer's address. So a trusted peer
// must be one that sends the header or speaks HTTP itself (a TCP
// forwarder that does not send it would let its clients write one).
func Listen(ln net.Listener, trusted []netip.Prefix) net.Listener {
	return &proxyproto.Listener{Listener: ln, ConnPolicy: func(o proxyproto.ConnPolicyOptions) (proxyproto.Policy, error) {
		if len(trusted) == 0 {
			return proxyproto.USE, nil
		}
		tcp, ok := o.Upstream.(*net.TCPAddr)
		if !ok {
			return proxyproto.REJECT, nil
		}
		peer := tcp.AddrPort().Addr().Unmap().WithZone("")
		for _, p := range trusted {
			if p.Contains(peer) {
				return proxyproto.USE, nil
			}
		}
		return proxyproto.REJECT, nil
	}}
}

type peerKey struct{}

// ConnContext records c's TCP peer for Peer; set it as
// http.Server.ConnContext of a server on a listener from Listen. It does
// not wait for the PROXY header.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if pc, ok := c.(*proxyproto.Conn); ok {
		return context.WithValue(ctx, peerKey{}, pc.Raw().RemoteAddr().String())
	}
	return ctx
}

// Peer returns the "host:port" of the TCP peer r came over: the load
// balancer's when a PROXY header named the client (then r.RemoteAddr is
// the client's), else r.RemoteAddr.
func Peer(r *http.Request) string {
	if p, ok := r.Context().Value(peerKey{}).(string); ok {
		return p
	}
	return r.RemoteAddr
}
