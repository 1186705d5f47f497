package config

import (
	"testing"
)

// FuzzConfigFile feeds arbitrary YAML through the configuration file's
// decoding and validation, as `sluice serve --config` does: nothing may
// panic, and a file that validates gives usable listeners, proxies and
// link targets.
func FuzzConfigFile(f *testing.F) {
	for _, s := range []string{
		"", "http_addr: 127.0.0.1:9000\n", "{", "[]", "- a\n", "http: {read_timeout: 5s, max_header_bytes: 8192}\n",
		"gateway:\n  listen: 127.0.0.1:8000\n  upstream: http://127.0.0.1:9000\n  tiers: {k: paid}\n  routes:\n    - path: /login\n      policies: []\n      ip_policy: login_ip\n      account_field: username\n      account_policy: login_account\n      require_key: true\n",
		"ratelimit:\n  policies:\n    - {name: free, algorithm: token_bucket, limit: 60, period: 1m}\n",
		"trusted_proxies: [10.0.0.0/8, 192.0.2.1]\nproxy_protocol: true\n",
		"links:\n  allowed_private_targets: [10.1.0.0/16, intranet]\n  code_length: 7\n",
		"notify:\n  retry:\n    critical: {base: 250ms, cap: 5s}\n  webhook: {timeout: 1s}\n",
		"unknown_key: 1\n", "shutdown_timeout: -1s\n", "max_body_bytes: 99999999999999999999\n", "http_addr: !!binary AAAA\n",
		"a: &a [*a, *a]\nb: *a\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg := Default()
		if err := decodeYAML(&cfg, b); err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			if err.Error() == "" {
				t.Fatal("Validate refused with an empty message")
			}
			return
		}
		if _, err := cfg.Proxies(); err != nil {
			t.Fatalf("valid configuration, but its trusted proxies do not parse: %v", err)
		}
		cfg.Links.AllowedTargetPrefixes()
		if cfg.HTTP.ReadTimeout <= 0 || cfg.HTTP.MaxHeaderBytes <= 0 {
			t.Fatalf("valid configuration with listener limits %+v", cfg.HTTP)
		}
		_ = cfg.LinksBaseURL()
		_ = cfg.UIPublicURL()
	})
}
