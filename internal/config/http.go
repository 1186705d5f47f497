package config

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// HTTP bounds how long a client may hold a connection of the HTTP
// listeners (API, redirects, dashboard and gateway), against slow clients
// (slowloris): the headers, the whole request, the response and an idle
// keep-alive connection each have a deadline, and headers a size limit.
// CORSOrigins are the origins of the web pages that may call the API from
// a browser (httpapi.Options.CORSOrigins).
type HTTP struct {
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout" flag:"http-read-header-timeout" usage:"longest a client may take to send a request's headers"`
	ReadTimeout       time.Duration `yaml:"read_timeout" flag:"http-read-timeout" usage:"longest a client may take to send a whole request, body included"`
	WriteTimeout      time.Duration `yaml:"write_timeout" flag:"http-write-timeout" usage:"longest from the end of a request's headers to the end of its response (gateway routes with streaming: true are exempt)"`
	IdleTimeout       time.Duration `yaml:"idle_timeout" flag:"http-idle-timeout" usage:"how long a keep-alive connection may wait for its next request"`
	MaxHeaderBytes    int           `yaml:"max_header_bytes" flag:"http-max-header-bytes" usage:"largest accepted request header block, in bytes (431 beyond)"`
	CORSOrigins       []string      `yaml:"cors_origins" flag:"cors-origins" usage:"comma-separated origins (scheme://host[:port], as browsers send them) whose web pages may call the API from the browser, with an inbox token or API key, never the dashboard's cookie; * allows every origin; empty: none"`
}

// DefaultHTTP is the listeners' defaults.
func DefaultHTTP() HTTP {
	return HTTP{ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
}

// Apply sets h's limits on hs; zero fields take DefaultHTTP's.
func (h HTTP) Apply(hs *http.Server) {
	d := DefaultHTTP()
	hs.ReadHeaderTimeout = positive(h.ReadHeaderTimeout, d.ReadHeaderTimeout)
	hs.ReadTimeout = positive(h.ReadTimeout, d.ReadTimeout)
	hs.WriteTimeout = positive(h.WriteTimeout, d.WriteTimeout)
	hs.IdleTimeout = positive(h.IdleTimeout, d.IdleTimeout)
	hs.MaxHeaderBytes = positive(h.MaxHeaderBytes, d.MaxHeaderBytes)
}

func positive[T time.Duration | int](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// validate adds the listeners' problems to bad.
func (h HTTP) validate(bad func(flag, format string, args ...any)) {
	for _, t := range []struct {
		flag string
		v    time.Duration
	}{{"http-read-header-timeout", h.ReadHeaderTimeout}, {"http-read-timeout", h.ReadTimeout},
		{"http-write-timeout", h.WriteTimeout}, {"http-idle-timeout", h.IdleTimeout}} {
		if t.v < 100*time.Millisecond || t.v > 24*time.Hour {
			bad(t.flag, "must be between 100ms and 24h")
		}
	}
	if h.ReadHeaderTimeout > h.ReadTimeout {
		bad("http-read-header-timeout", "must not exceed --http-read-timeout")
	}
	if h.MaxHeaderBytes < 4<<10 || h.MaxHeaderBytes > 16<<20 {
		bad("http-max-header-bytes", "must be between 4096 and 16777216")
	}
	h.validateCORSOrigins(bad)
}

// validateCORSOrigins adds a problem for every origin that no browser
// would send: an Origin header is scheme://host[:port] exactly, lowercase,
// without the scheme's default port, a path or a trailing slash, so an
// entry of any other form would never match and silently allow nothing.
func (h HTTP) validateCORSOrigins(bad func(flag, format string, args ...any)) {
	for _, o := range h.CORSOrigins {
		if o == "*" {
			if len(h.CORSOrigins) > 1 {
				bad("cors-origins", "* allows every origin: list it alone")
			}
			continue
		}
		if why := badOrigin(o); why != "" {
			bad("cors-origins", "%q %s", o, why)
		}
	}
}

// badOrigin says why o is not an origin as browsers send it, or "".
func badOrigin(o string) string {
	const form = "is not an origin like https://app.example.com (scheme://host[:port])"
	if o == "null" {
		return "would admit sandboxed frames and local files: name the pages' real origin"
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return form
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "must start with http:// or https://"
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return form
	case u.Path != "":
		return "has a path: an origin ends after the host and port (no trailing slash)"
	case strings.ToLower(o) != o:
		return "must be lowercase, as browsers send it"
	case strings.ContainsFunc(u.Hostname(), func(r rune) bool { return r > 0x7f }):
		return "must name an international host in its ASCII (xn--) form, as browsers send it"
	case strings.Contains(u.Hostname(), "*"):
		return "has a wildcard: list each origin, or * alone for every one"
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		switch {
		case err != nil || n < 1 || n > 65535:
			return fmt.Sprintf("has a bad port %q", p)
		case u.Scheme == "http" && n == 80, u.Scheme == "https" && n == 443:
			return fmt.Sprintf("names the default port %d, which browsers leave out: drop it", n)
		}
	}
	return ""
}
