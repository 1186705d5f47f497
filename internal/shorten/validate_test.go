package shorten

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestValidateTarget(t *testing.T) {
	t.Parallel()
	policy := TargetPolicy{OwnHosts: []string{"sho.rt", "127.0.0.1"}}
	tests := []struct {
		name   string
		policy TargetPolicy
		url    string
		want   string // "" accepted, else a substring of the reason
	}{
		{"https", policy, "https://example.com/page?q=1#top", ""},
		{"http with port", policy, "http://example.com:8443/", ""},
		{"upper-case scheme", policy, "HTTPS://Example.com", ""},
		{"unicode path", policy, "https://example.com/ünïcode", ""},
		{"empty", policy, "", "required"},
		{"too long", policy, "https://example.com/" + strings.Repeat("a", MaxURLLength), "at most 2048"},
		{"relative", policy, "/page", "absolute"},
		{"no scheme", policy, "example.com/page", "absolute"},
		{"ftp", policy, "ftp://example.com/f", `scheme "ftp"`},
		{"javascript", policy, "javascript:alert(1)", `scheme "javascript"`},
		{"mailto", policy, "mailto:a@example.com", `scheme "mailto"`},
		{"no host", policy, "https:///path", "host"},
		{"opaque", policy, "https:example.com", "host"},
		{"credentials", policy, "https://user:pw@example.com/", "user name"},
		{"space", policy, "https://example.com/a b", "spaces"},
		{"newline", policy, "https://example.com/\r\nSet-Cookie: x", "spaces"},
		{"bad port", policy, "https://example.com:99999/", "port"},
		{"own host", policy, "https://sho.rt/abc", "this service"},
		{"own host trailing dot", policy, "https://SHO.RT./abc", "this service"},
		{"loopback v4", policy, "http://127.0.0.2/", "private"},
		{"loopback v6", policy, "http://[::1]:8080/", "private"},
		{"mapped loopback", policy, "http://[::ffff:127.0.0.1]/", "private"},
		{"private 10/8", policy, "http://10.1.2.3/", "private"},
		{"private 192.168", policy, "http://192.168.0.1/admin", "private"},
		{"link-local metadata", policy, "http://169.254.169.254/latest/meta-data", "private"},
		{"unspecified", policy, "http://0.0.0.0/", "private"},
		{"localhost", policy, "http://localhost:3000/", "private"},
		{"decimal ip", policy, "http://2130706433/", "private"},
		{"hex ip", policy, "http://0x7f.1/", "private"},
		{"unique local v6", policy, "http://[fd00::1]/", "private"},
		{"nat64 of private", policy, "http://[64:ff9b::10.0.0.1]/", "private"},
		{"6to4", policy, "http://[2002:c0a8:101::1]/", "private"},
		{"benchmarking", policy, "http://198.18.0.1/", "private"},
		{"reserved 240/4", policy, "http://240.0.0.1/", "private"},
		{"documentation v6", policy, "http://[2001:db8::1]/", "private"},
		{"nat64 of public", policy, "http://[64:ff9b::93.184.216.34]/", ""},
		{"public ip", policy, "http://93.184.215.14/", ""},
		{"private allowed", TargetPolicy{AllowPrivate: true}, "http://10.0.0.1/", ""},
		{"prefix allowed", TargetPolicy{AllowedPrivate: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}}, "http://10.1.9.9/", ""},
		{"prefix elsewhere", TargetPolicy{AllowedPrivate: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}}, "http://10.2.0.1/", "private"},
		{"host allowed", TargetPolicy{OwnHosts: []string{"sho.rt"}, AllowedHosts: []string{"sho.rt"}}, "https://sho.rt/x", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tt.policy.ValidateTarget(tt.url)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("ValidateTarget(%q) = %v, want accepted", tt.url, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("ValidateTarget(%q) = %v, want an error mentioning %q", tt.url, err, tt.want)
			}
		})
	}
}

func TestValidateSlug(t *testing.T) {
	t.Parallel()
	tests := []struct {
		slug string
		want string
	}{
		{"spring-sale", ""}, {"Q3_report", ""}, {"abc", ""}, {strings.Repeat("a", 64), ""},
		{"ab", "3 to 64"}, {strings.Repeat("a", 65), "3 to 64"}, {"-abc", "start"}, {"_abc", "start"},
		{"a b", "only letters"}, {"a/b", "only letters"}, {"a.b", "only letters"}, {"ünï", "only letters"},
		{"v1x", ""}, {"healthz", "reserved"}, {"Metrics", "reserved"}, {"readyz", "reserved"}, {"admin", "reserved"},
	}
	for _, tt := range tests {
		err := ValidateSlug(tt.slug)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("ValidateSlug(%q) = %v, want accepted", tt.slug, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("ValidateSlug(%q) = %v, want an error mentioning %q", tt.slug, err, tt.want)
		}
	}
	for _, w := range []string{"v1", "ui", "metrics", "healthz", "readyz", "openapi.json"} {
		if !IsReserved(w) {
			t.Errorf("IsReserved(%q) = false", w)
		}
	}
}

func FuzzValidateTarget(f *testing.F) {
	for _, s := range []string{"https://example.com", "http://127.0.0.1", "javascript:x", "http://[::1]", "https://a@b", "http://0x7f.1"} {
		f.Add(s)
	}
	p := TargetPolicy{OwnHosts: []string{"sho.rt"}}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := p.ValidateTarget(raw)
		if err != nil {
			return
		}
		if len(raw) > MaxURLLength || (u.Scheme != "http" && u.Scheme != "https" && !strings.EqualFold(u.Scheme, "http") && !strings.EqualFold(u.Scheme, "https")) {
			t.Fatalf("accepted %q: scheme %q, %d bytes", raw, u.Scheme, len(raw))
		}
		if u.Host == "" || u.User != nil || strings.ContainsAny(raw, " \r\n\t") {
			t.Fatalf("accepted %q without a host, with credentials or spaces", raw)
		}
		if isPrivateHost(strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))) {
			t.Fatalf("accepted private target %q", raw)
		}
	})
}

func FuzzValidateSlug(f *testing.F) {
	for _, s := range []string{"spring-sale", "v1", "a", "-x", "ok_1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ValidateSlug(s) != nil {
			return
		}
		if !validCode(s) || IsReserved(s) || len(s) < MinSlugLength {
			t.Fatalf("accepted slug %q that the redirect path would refuse or that is reserved", s)
		}
	})
}

func TestOwnHosts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, base, listen string
		want               []string
	}{
		{"base and listen host", "https://Sho.RT/", "127.0.0.1:8080", []string{"sho.rt", "127.0.0.1"}},
		{"wildcard listen", "https://sho.rt", "0.0.0.0:8080", []string{"sho.rt"}},
		{"ipv6 wildcard", "https://sho.rt", "[::]:8080", []string{"sho.rt"}},
		{"no host in listen", "http://localhost:8080", ":8080", []string{"localhost"}},
		{"bad base", "::bad", "Example.com:80", []string{"example.com"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := OwnHosts(tt.base, tt.listen); !slices.Equal(got, tt.want) {
				t.Errorf("OwnHosts(%q, %q) = %q, want %q", tt.base, tt.listen, got, tt.want)
			}
		})
	}
}
