package config

import (
	"net/http"
	"time"
)

// HTTP bounds how long a client may hold a connection of the HTTP
// listeners (API, redirects, dashboard and gateway), against slow clients
// (slowloris): the headers, the whole request, the response and an idle
// keep-alive connection each have a deadline, and headers a size limit.
type HTTP struct {
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout" flag:"http-read-header-timeout" usage:"longest a client may take to send a request's headers"`
	ReadTimeout       time.Duration `yaml:"read_timeout" flag:"http-read-timeout" usage:"longest a client may take to send a whole request, body included"`
	WriteTimeout      time.Duration `yaml:"write_timeout" flag:"http-write-timeout" usage:"longest from the end of a request's headers to the end of its response (gateway routes with streaming: true are exempt)"`
	IdleTimeout       time.Duration `yaml:"idle_timeout" flag:"http-idle-timeout" usage:"how long a keep-alive connection may wait for its next request"`
	MaxHeaderBytes    int           `yaml:"max_header_bytes" flag:"http-max-header-bytes" usage:"largest accepted request header block, in bytes (431 beyond)"`
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
}
