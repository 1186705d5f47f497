// Package config is Sluice's one typed configuration. Values come, from
// lowest to highest precedence, from the defaults here, an optional YAML file
// (--config), SLUICE_* environment variables and command-line flags.
//
// Every leaf field carries three tags: `yaml` (its key inside its section),
// `flag` (the command-line name; the environment variable is SLUICE_ plus the
// flag in upper case with dashes as underscores) and `usage`. A struct field
// tagged `backup:"smtp-backup"` holds a backup provider's settings: those of
// its type with the tag in place of each flag's first word (smtp-addr
// becomes smtp-backup-addr), their usage marked as the backup's (or its
// `backupusage` tag); the fields tagged `inherit:"true"` take the primary's
// value when the backup leaves them empty (Inherit). The reference in
// docs/configuration.md is generated from these tags (see Reference).
package config

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"
)

// Config is the whole configuration of a Sluice node. The zero value is not
// useful: start from Default.
type Config struct {
	HTTPAddr        string        `yaml:"http_addr" flag:"http-addr" usage:"HTTP listen address (API, redirects, dashboard, metrics)"`
	GRPCAddr        string        `yaml:"grpc_addr" flag:"grpc-addr" usage:"gRPC listen address (Envoy rate limit service, health)"`
	DataDir         string        `yaml:"data_dir" flag:"data-dir" usage:"directory for the embedded SQLite database and NATS JetStream store"`
	DatabaseURL     string        `yaml:"database_url" flag:"database-url" usage:"PostgreSQL URL (postgres://...); empty uses SQLite in the data dir"`
	RedisURL        string        `yaml:"redis_url" flag:"redis-url" usage:"Redis/Valkey URL (redis://...); empty keeps counters in memory"`
	RedisCAFile     string        `yaml:"redis_ca_file" flag:"redis-ca-file" usage:"PEM file of the certificate authorities a rediss:// server's certificate must chain to; empty trusts the system's"`
	NATSURL         string        `yaml:"nats_url" flag:"nats-url" usage:"NATS JetStream URL (nats://...); empty runs NATS embedded in the process"`
	NATSListen      string        `yaml:"nats_listen" flag:"nats-listen" usage:"TCP address for the embedded NATS server; empty means no listener (in-process only)"`
	NATSReplicas    int           `yaml:"nats_replicas" flag:"nats-replicas" usage:"copies of every JetStream stream (and consumer): 1 with the embedded server, 3 recommended on a cluster; a change is applied to existing streams at start"`
	NATSPrefix      string        `yaml:"nats_stream_prefix" flag:"nats-stream-prefix" usage:"prefix of every JetStream stream and subject, so several deployments can share one NATS"`
	EnvoyConfig     string        `yaml:"envoy_config" flag:"envoy-config" usage:"file or folder of envoyproxy/ratelimit YAML rate limit configuration"`
	EnvoyDetailed   int           `yaml:"envoy_detailed_metric_values" flag:"envoy-detailed-metric-values" usage:"distinct descriptor label values per domain kept by detailed_metric rules; later ones are counted as \"other\""`
	LogFormat       string        `yaml:"log_format" flag:"log-format" usage:"log output: text or json"`
	LogLevel        string        `yaml:"log_level" flag:"log-level" usage:"log level: debug, info, warn or error"`
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout" flag:"shutdown-timeout" usage:"how long shutdown waits for in-flight requests and workers"`
	DrainDelay      time.Duration `yaml:"drain_delay" flag:"drain-delay" usage:"how long a stopping node keeps serving while /readyz answers 503 and gRPC health NOT_SERVING, so load balancers stop sending first (counted before --shutdown-timeout)"`
	GRPCReflection  bool          `yaml:"grpc_reflection" flag:"grpc-reflection" usage:"serve gRPC server reflection on --grpc-addr, so grpcurl and Postman need no proto files"`
	MaxBodyBytes    int64         `yaml:"max_body_bytes" flag:"max-body-bytes" usage:"largest accepted request body; larger ones get 413"`
	AllowPrivate    bool          `yaml:"allow_private_targets" flag:"allow-private-targets" usage:"allow webhook and link targets on loopback or private addresses"`
	HTTP            HTTP          `yaml:"http"` // listener timeouts and header limit (http.go)
	Ratelimit       Ratelimit     `yaml:"ratelimit"`
	RLQS            RLQS          `yaml:"rlqs"`
	Gateway         Gateway       `yaml:"gateway"`

	// DatabaseStatementTimeout is PostgreSQL's statement_timeout on the
	// store's connections (docs/operations.md). SQLite ignores it: its
	// busy_timeout (10s) already bounds the one wait it can have.
	DatabaseStatementTimeout time.Duration `yaml:"database_statement_timeout" flag:"database-statement-timeout" usage:"PostgreSQL only: longest a statement may run (statement_timeout on every pooled connection) before it is cancelled and the request gets 503; a statement_timeout in --database-url wins; migrations and background purges set their own; 0 means none"`

	// TLS on the HTTP and gRPC listeners, client certificates and API
	// keys on gRPC (tls.go, docs/security.md).
	TLSCertFile      string `yaml:"tls_cert_file" flag:"tls-cert-file" usage:"PEM certificate (leaf first, then intermediates) served with TLS 1.2+ on --http-addr and, unless --grpc-tls-cert-file is set, on --grpc-addr; a comma-separated list serves several, picked by the client's SNI (the first when none matches); a replaced file is picked up at the next handshake, no restart; empty serves plain HTTP and gRPC"`
	TLSKeyFile       string `yaml:"tls_key_file" flag:"tls-key-file" usage:"PEM private key of --tls-cert-file (a list pairs with its list, in order)"`
	GRPCTLSCertFile  string `yaml:"grpc_tls_cert_file" flag:"grpc-tls-cert-file" usage:"PEM certificate served on --grpc-addr instead of --tls-cert-file (TLS on gRPC only, or another name); reloaded like it"`
	GRPCTLSKeyFile   string `yaml:"grpc_tls_key_file" flag:"grpc-tls-key-file" usage:"PEM private key of --grpc-tls-cert-file"`
	GRPCClientCAFile string `yaml:"grpc_client_ca_file" flag:"grpc-client-ca-file" usage:"PEM certificate authorities: every gRPC client (health and reflection too) must present a certificate signed by one (mutual TLS); needs TLS on gRPC; reloaded like the certificate"`
	GRPCRequireKey   bool   `yaml:"grpc_require_key" flag:"grpc-require-key" usage:"ShouldRateLimit and the rate limit quota streams need an API key with the ratelimit:check scope in gRPC metadata (authorization: Bearer <key>, or x-api-key): UNAUTHENTICATED without a valid one, PERMISSION_DENIED without the scope; health and reflection stay open"`

	// TrustedProxies and ProxyProtocol say how the client's address comes
	// through load balancers (proxies.go).
	TrustedProxies []string `yaml:"trusted_proxies" flag:"trusted-proxies" usage:"comma-separated addresses or CIDRs of the load balancers in front of Sluice: their X-Forwarded-For and Forwarded headers, and PROXY protocol headers, name the client"`
	ProxyHeader    string   `yaml:"trusted_proxy_header" flag:"trusted-proxy-header" usage:"the forwarding header --trusted-proxies write, the only one believed: x-forwarded-for, forwarded, or any (both read, and a client adding the other makes itself the proxy)"`
	ProxyProtocol  bool     `yaml:"proxy_protocol" flag:"proxy-protocol" usage:"the HTTP and gateway listeners accept a PROXY protocol v1/v2 header (HAProxy send-proxy-v2), from --trusted-proxies only when set"`
	// AllowedHosts are the names a keyless node answers to besides
	// loopback ones (the DNS rebinding guard, docs/security.md).
	AllowedHosts []string `yaml:"allowed_hosts" flag:"allowed-hosts" usage:"comma-separated host names, besides localhost and loopback addresses, that the API answers to while no API key is configured (the Host header; a guard against DNS rebinding)"`
	// AuthFailures (a minute) and MetricsAuth guard the HTTP API
	// (docs/security.md).
	AuthFailures int  `yaml:"auth_failures_per_minute" flag:"auth-failures-per-minute" usage:"failed authentications (unknown or revoked API keys) allowed per client IP (IPv6: per /64) a minute; past it the client's requests with a key get 429, and its ShouldRateLimit calls with --grpc-require-key RESOURCE_EXHAUSTED, counted per gRPC peer address in the same budget (0 disables)"`
	MetricsAuth  bool `yaml:"metrics_auth" flag:"metrics-auth" usage:"GET /metrics requires an API key (any valid key, any scope) instead of being public"`

	// Links configures the URL shortener (links.go).
	Links Links `yaml:"links"`
	// UI configures the dashboard and preference page (ui.go).
	UI UI `yaml:"ui"`
	// Notify configures the notification pipeline (notify.go).
	Notify Notify `yaml:"notify"`
	// Config is the path of the YAML file that was loaded, if any.
	Config string `yaml:"-" flag:"config" usage:"YAML configuration file"`
}

// RLQS configures the Envoy rate limit quota service on --grpc-addr,
// whose buckets take their limits from --envoy-config.
type RLQS struct {
	Unmatched  string `yaml:"unmatched" flag:"rlqs-unmatched" usage:"blanket rule assigned to rate limit quota buckets that no --envoy-config rule matches: allow (ALLOW_ALL) or deny (DENY_ALL)"`
	MaxStreams int    `yaml:"max_streams" flag:"rlqs-max-streams" usage:"rate limit quota streams (Envoys) open at once on this node; more are refused with RESOURCE_EXHAUSTED and reconnect elsewhere"`
	// The bounds of what one client (peer IP address, or API key with
	// --grpc-require-key) may hold; docs/envoy.md, "Bounds".
	MaxStreamsPerClient  int           `yaml:"max_streams_per_client" flag:"rlqs-max-streams-per-client" usage:"rate limit quota streams one client (peer IP, or API key with --grpc-require-key) may hold open on this node; more are refused with RESOURCE_EXHAUSTED"`
	MaxBucketsPerStream  int           `yaml:"max_buckets_per_stream" flag:"rlqs-max-buckets-per-stream" usage:"rate limit quota buckets one stream may report; a report past it ends the stream with RESOURCE_EXHAUSTED"`
	MaxBucketsPerClient  int           `yaml:"max_buckets_per_client" flag:"rlqs-max-buckets-per-client" usage:"rate limit quota buckets one client's streams may report in all on this node; a report past it ends the stream with RESOURCE_EXHAUSTED"`
	MaxBuckets           int           `yaml:"max_buckets" flag:"rlqs-max-buckets" usage:"rate limit quota buckets (one per stream and bucket) this node tracks in all; a report past it ends the stream with RESOURCE_EXHAUSTED"`
	MaxReportsPerSecond  int           `yaml:"max_reports_per_second" flag:"rlqs-max-reports-per-second" usage:"usage reports one rate limit quota stream may send a second (bursts of twice that); past it the stream ends with RESOURCE_EXHAUSTED"`
	MaxRequestsPerSecond int           `yaml:"max_requests_per_second" flag:"rlqs-max-requests-per-second" usage:"most requests one bucket's usage may count per second of its time_elapsed (at least one second); a report past it, or of a count past 2^53, ends the stream with INVALID_ARGUMENT"`
	FirstReportTimeout   time.Duration `yaml:"first_report_timeout" flag:"rlqs-first-report-timeout" usage:"longest a new rate limit quota stream may wait before its first usage report; past it the stream ends with DEADLINE_EXCEEDED"`
}

func defaultRLQS() RLQS {
	return RLQS{Unmatched: "allow", MaxStreams: 10_000, MaxStreamsPerClient: 100, MaxBucketsPerStream: 10_000,
		MaxBucketsPerClient: 10_000, MaxBuckets: 100_000, MaxReportsPerSecond: 50,
		MaxRequestsPerSecond: 10_000_000, FirstReportTimeout: 10 * time.Second}
}

func (r RLQS) validate(bad func(flag, format string, args ...any)) {
	for _, v := range []struct {
		flag string
		n    int
	}{{"rlqs-max-streams-per-client", r.MaxStreamsPerClient}, {"rlqs-max-buckets-per-stream", r.MaxBucketsPerStream},
		{"rlqs-max-buckets-per-client", r.MaxBucketsPerClient}, {"rlqs-max-buckets", r.MaxBuckets},
		{"rlqs-max-reports-per-second", r.MaxReportsPerSecond}, {"rlqs-max-requests-per-second", r.MaxRequestsPerSecond}} {
		if v.n < 1 {
			bad(v.flag, "must be at least 1")
		}
	}
	if r.FirstReportTimeout <= 0 {
		bad("rlqs-first-report-timeout", "must be positive")
	}
}

// Default returns the embedded defaults: everything on this machine, no setup.
func Default() Config {
	return Config{
		HTTPAddr:        "127.0.0.1:8080",
		GRPCAddr:        "127.0.0.1:8081",
		DataDir:         "./sluice-data",
		ProxyHeader:     "x-forwarded-for",
		NATSReplicas:    1,
		LogFormat:       "text",
		LogLevel:        "info",
		ShutdownTimeout: 30 * time.Second,
		GRPCReflection:  true,
		MaxBodyBytes:    1 << 20,
		EnvoyDetailed:   100,
		AuthFailures:    20,
		HTTP:            DefaultHTTP(),
		Ratelimit:       defaultRatelimit(),
		RLQS:            defaultRLQS(),
		Links:           DefaultLinks(),
		UI:              DefaultUI(),
		Notify:          defaultNotify(),

		DatabaseStatementTimeout: 10 * time.Second,
	}
}

// Validate reports every problem at once, each naming its flag.
func (c Config) Validate() error {
	var errs []error
	bad := func(flag, format string, args ...any) {
		errs = append(errs, fmt.Errorf("--%s: %s", flag, fmt.Sprintf(format, args...)))
	}
	for _, a := range []struct{ flag, v string }{{"http-addr", c.HTTPAddr}, {"grpc-addr", c.GRPCAddr}} {
		if _, _, err := net.SplitHostPort(a.v); err != nil {
			bad(a.flag, "%q is not host:port", a.v)
		}
	}
	if c.NATSListen != "" {
		if _, _, err := net.SplitHostPort(c.NATSListen); err != nil {
			bad("nats-listen", "%q is not host:port", c.NATSListen)
		}
	}
	c.HTTP.validate(bad)
	c.validateTLS(bad)
	if c.DataDir == "" && (c.DatabaseURL == "" || c.NATSURL == "") {
		bad("data-dir", "must be set while SQLite or NATS run embedded")
	}
	checkURL := func(flag, v string, schemes ...string) {
		if v == "" {
			return
		}
		u, err := url.Parse(v)
		if err != nil {
			bad(flag, "not a URL: %v", err)
			return
		}
		for _, s := range schemes {
			if u.Scheme == s {
				return
			}
		}
		bad(flag, "scheme %q not supported (want %s)", u.Scheme, strings.Join(schemes, ", "))
	}
	checkURL("database-url", c.DatabaseURL, "postgres", "postgresql", "sqlite", "file")
	checkURL("redis-url", c.RedisURL, "redis", "rediss", "valkey", "valkeys", "unix")
	c.validateRedisCA(bad)
	for u := range strings.SplitSeq(c.NATSURL, ",") { // seeds of one cluster
		checkURL("nats-url", strings.TrimSpace(u), "nats", "tls", "ws", "wss")
	}
	switch {
	case c.NATSReplicas < 1 || c.NATSReplicas > 5:
		bad("nats-replicas", "must be from 1 to 5")
	case c.NATSReplicas > 1 && c.NATSURL == "":
		bad("nats-replicas", "must be 1 with the embedded NATS server (set --nats-url to a cluster for more)")
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		bad("log-format", "%q is not text or json", c.LogFormat)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("log-level", "%q is not debug, info, warn or error", c.LogLevel)
	}
	if c.DatabaseStatementTimeout < 0 {
		bad("database-statement-timeout", "must not be negative")
	} else if c.DatabaseStatementTimeout > 0 && c.DatabaseStatementTimeout < time.Millisecond {
		bad("database-statement-timeout", "must be 0 or at least 1ms (PostgreSQL counts milliseconds)")
	}
	if c.ShutdownTimeout <= 0 {
		bad("shutdown-timeout", "must be positive")
	}
	if c.DrainDelay < 0 {
		bad("drain-delay", "must not be negative")
	}
	if c.MaxBodyBytes < 1024 {
		bad("max-body-bytes", "must be at least 1024")
	}
	if c.AuthFailures < 0 {
		bad("auth-failures-per-minute", "must not be negative")
	}
	if c.EnvoyDetailed < 1 {
		bad("envoy-detailed-metric-values", "must be at least 1")
	}
	if c.RLQS.MaxStreams < 1 {
		bad("rlqs-max-streams", "must be at least 1")
	}
	c.RLQS.validate(bad)
	if c.RLQS.Unmatched != "allow" && c.RLQS.Unmatched != "deny" {
		bad("rlqs-unmatched", "%q is not allow or deny", c.RLQS.Unmatched)
	}
	c.validateProxies(bad)
	c.validateRatelimit(bad)
	c.Links.validate(bad)
	c.UI.validate(bad)
	c.Notify.validate(bad)
	return errors.Join(errs...)
}

// validateRedisCA refuses a CA file that cannot be read or holds no PEM
// certificate, or that comes without a TLS Redis URL.
func (c Config) validateRedisCA(bad func(flag, format string, args ...any)) {
	if c.RedisCAFile == "" {
		return
	}
	if u, err := url.Parse(c.RedisURL); err != nil || (u.Scheme != "rediss" && u.Scheme != "valkeys") {
		bad("redis-ca-file", "needs a rediss:// --redis-url")
	}
	pem, err := os.ReadFile(c.RedisCAFile)
	if err != nil {
		bad("redis-ca-file", "%v", err)
		return
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		bad("redis-ca-file", "%s holds no PEM certificate", c.RedisCAFile)
	}
}
