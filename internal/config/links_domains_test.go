package config

import (
	"slices"
	"strings"
	"testing"
)

func TestOwnHosts(t *testing.T) {
	t.Parallel()
	c := Default()
	c.Links.BaseURL = "https://Sho.RT:8443"
	c.UI.PublicURL = "https://admin.example.com./"
	c.Notify.Providers.CallbackBaseURL = "https://hooks.example.com/base"
	c.AllowedHosts = []string{"API.example.com", "sho.rt", "10.0.0.1", "[::1]:80"}
	c.Gateway.Listen = "gw.example.com:8081"
	got := c.OwnHosts()
	want := []string{"sho.rt", "admin.example.com", "hooks.example.com", "api.example.com", "gw.example.com"}
	if !slices.Equal(got, want) {
		t.Errorf("OwnHosts() = %q, want %q", got, want)
	}
	c.Gateway.Listen = ":8081"
	if got := c.OwnHosts(); slices.Contains(got, "") {
		t.Errorf("OwnHosts() with a gateway on every interface = %q, want no empty host", got)
	}
}

func TestLinksDomainsValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		set  func(*LinksDomains)
		flag string
	}{
		{"verify", func(d *LinksDomains) { d.Verify = "txt" }, "links-domains-verify"},
		{"resolver", func(d *LinksDomains) { d.Resolver = "1.1.1.1" }, "links-domains-resolver"},
		{"interval", func(d *LinksDomains) { d.VerifyInterval = 0 }, "links-domains-verify-interval"},
		{"per owner", func(d *LinksDomains) { d.MaxPerOwner = 0 }, "links-domains-max-per-owner"},
		{"max", func(d *LinksDomains) { d.Max = 10_001 }, "links-domains-max"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := defaultLinksDomains()
			var got []string
			d.validate(func(flag, format string, args ...any) { got = append(got, flag) })
			if len(got) != 0 {
				t.Fatalf("defaults: %v", got)
			}
			c.set(&d)
			d.validate(func(flag, format string, args ...any) { got = append(got, flag) })
			if strings.Join(got, ",") != c.flag {
				t.Errorf("validate = %v, want %s", got, c.flag)
			}
		})
	}
	d := defaultLinksDomains()
	d.Verify, d.Resolver = DomainsVerifyDNS, "127.0.0.1:53"
	d.validate(func(flag, format string, args ...any) { t.Errorf("dns with a resolver: %s", flag) })
}
