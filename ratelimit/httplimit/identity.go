package httplimit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// Identity is who a request comes from, in layers: the API key where there
// is one, else the client IP; on login routes also the account the request
// targets.
type Identity struct {
	// APIKey is the key from "Authorization: Bearer" or X-API-Key, or "".
	APIKey string
	// IP is the client's address (see Identifier.ClientIP).
	IP netip.Addr
}

// Key is the identity's rate limit key: "key:" and a hash of the API key
// (the secret itself never reaches the counter store), else "ip:" and the
// client IP.
func (id Identity) Key() string {
	if id.APIKey != "" {
		return "key:" + HashKey(id.APIKey)
	}
	return IPKey(id.IP)
}

// IPKey is the rate limit key of a client IP: "ip:203.0.113.9".
func IPKey(ip netip.Addr) string { return "ip:" + ip.String() }

// HashKey returns the first 128 bits of the SHA-256 of an API key, in hex.
func HashKey(apiKey string) string {
	sum := sha256.Sum256([]byte(apiKey))
	return hex.EncodeToString(sum[:16])
}

// Identifier identifies clients. The zero value trusts no proxy, so the
// client IP is the peer address. It is safe for concurrent use.
type Identifier struct {
	// TrustedProxies are the peers whose X-Forwarded-For and Forwarded
	// headers are believed: a load balancer or CDN in front of this
	// server. Anyone else can write anything in those headers.
	TrustedProxies []netip.Prefix
	// Header is the forwarding header the trusted proxies write, the only
	// one believed: HeaderXForwardedFor or HeaderForwarded. A client
	// behind them may send the other one, with anything in it; it is
	// ignored. If empty (HeaderAny), both are read and must agree, so that
	// a client that adds the header its proxy does not write is
	// identified as the proxy: set Header when the proxies are known.
	Header ProxyHeader
}

// ProxyHeader names the forwarding header trusted proxies write.
type ProxyHeader string

// The forwarding headers an Identifier may believe.
const (
	HeaderAny           ProxyHeader = ""                // both, which must agree
	HeaderXForwardedFor ProxyHeader = "x-forwarded-for" // X-Forwarded-For only
	HeaderForwarded     ProxyHeader = "forwarded"       // Forwarded (RFC 7239) only
)

// Identify returns r's identity.
func (c *Identifier) Identify(r *http.Request) Identity {
	return Identity{APIKey: APIKey(r), IP: c.ClientIP(r)}
}

// APIKey returns the key of "Authorization: Bearer <key>", else of the
// X-API-Key header, else "".
func APIKey(r *http.Request) string {
	if auth := r.Header.Get("Authorization"); len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
		return strings.TrimSpace(auth[7:])
	}
	return strings.TrimSpace(r.Header.Get("X-API-Key"))
}

// DefaultMaxAccountBody bounds how much of a body AccountFromBody reads.
const DefaultMaxAccountBody = 64 << 10

// Unreadable is the account AccountFromBody reports for a body it cannot
// read (too large, not JSON or a form): such requests share one account
// key, so padding a body does not escape the per-account limit.
const Unreadable = "(unreadable)"

// AccountFromBody returns the value of field in r's body (a JSON object,
// or a URL-encoded form), reading at most maxBytes (DefaultMaxAccountBody
// if 0). The body is put back, so the handler or upstream receives it
// unchanged. It returns "" when the body has no such field, and Unreadable
// when it cannot tell.
func AccountFromBody(r *http.Request, field string, maxBytes int64) string {
	if r.Body == nil || r.Body == http.NoBody {
		return ""
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxAccountBody
	}
	buf, err := io.ReadAll(io.LimitReader(r.Body, maxBytes+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(buf), r.Body), r.Body}
	if err != nil || int64(len(buf)) > maxBytes {
		return Unreadable
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "application/x-www-form-urlencoded" {
		vals, err := url.ParseQuery(string(buf))
		if err != nil {
			return Unreadable
		}
		return vals.Get(field)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(buf, &obj); err != nil {
		return Unreadable
	}
	raw, ok := obj[field]
	if !ok {
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return strings.TrimSpace(string(raw)) // a number or other literal
	}
	return s
}
