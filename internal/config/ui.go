package config

import (
	"net/url"
	"strings"
	"time"
)

// UI configures the web dashboard and the end-user preference page.
type UI struct {
	Secret        string        `yaml:"secret" flag:"ui-secret" usage:"key signing dashboard sessions and preference links (at least 32 characters); empty: generated once and kept in the database, so every node shares it. Changing it signs everyone out and voids every preference link"`
	SessionTTL    time.Duration `yaml:"session_ttl" flag:"ui-session-ttl" usage:"how long a dashboard sign-in lasts"`
	SecureCookies bool          `yaml:"secure_cookies" flag:"ui-secure-cookies" usage:"mark session cookies Secure even on plain HTTP (set it behind a TLS-terminating proxy; cookies are always Secure on TLS connections)"`
	PublicURL     string        `yaml:"public_url" flag:"ui-public-url" usage:"public root URL of this service in preference links and as the server of /openapi.json, e.g. https://notify.example.com; empty: links.base_url, else http://<http-addr> (/openapi.json: the URL each request used)"`
	PreferenceTTL time.Duration `yaml:"preference_link_ttl" flag:"ui-preference-link-ttl" usage:"default lifetime of a preference link"`
}

// DefaultUI returns the dashboard's defaults.
func DefaultUI() UI {
	return UI{SessionTTL: 12 * time.Hour, PreferenceTTL: 30 * 24 * time.Hour}
}

// UIPublicURL returns ui.public_url, or the links base URL when it is empty.
func (c Config) UIPublicURL() string {
	if c.UI.PublicURL != "" {
		return strings.TrimRight(c.UI.PublicURL, "/")
	}
	return c.LinksBaseURL()
}

func (u UI) validate(bad func(flag, format string, args ...any)) {
	if u.Secret != "" && len(u.Secret) < 32 {
		bad("ui-secret", "must be at least 32 characters (or empty to generate one)")
	}
	if u.SessionTTL < time.Minute {
		bad("ui-session-ttl", "must be at least one minute")
	}
	if u.PreferenceTTL < time.Minute {
		bad("ui-preference-link-ttl", "must be at least one minute")
	}
	if u.PublicURL != "" {
		p, err := url.Parse(u.PublicURL)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			bad("ui-public-url", "%q is not an absolute http(s) URL", u.PublicURL)
		}
	}
}
