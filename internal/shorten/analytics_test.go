package shorten

import (
	"bytes"
	"net/url"
	"strings"
	"testing"
)

func TestFirstLanguage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"fr-CH, fr;q=0.9, en;q=0.8", "fr"}, {"EN-us", "en"}, {"de", "de"}, {"", ""}, {"*", ""},
		{"zh-Hant-TW", "zh"}, {"x-klingon", ""}, {"12", ""}, {" es ;q=1", "es"}, {"ü1", ""},
	} {
		if got := firstLanguage(tc.in); got != tc.want {
			t.Errorf("firstLanguage(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestReferrerHost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"https://News.Example.com/a?b=c", "news.example.com"}, {"http://[2001:db8::1]:8080/x", "2001:db8::1"},
		{"", ""}, {"android-app://com.google.android.gm/", "com.google.android.gm"}, {"not a url", ""},
		{"https://" + strings.Repeat("a", 300) + ".com/", strings.Repeat("a", maxReferrer)},
	} {
		if got := referrerHost(tc.in); got != tc.want {
			t.Errorf("referrerHost(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestClassifyAgent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ua         string
		bot        bool
		device, os string
	}{
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148", false, DeviceMobile, "ios"},
		{"Mozilla/5.0 (iPad; CPU OS 17_0 like Mac OS X) AppleWebKit/605.1.15", false, DeviceTablet, "ios"},
		{"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 Chrome/126.0 Mobile Safari/537.36", false, DeviceMobile, "android"},
		{"Mozilla/5.0 (Linux; Android 13; SM-X700) AppleWebKit/537.36 Chrome/126.0 Safari/537.36", false, DeviceTablet, "android"},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/126.0", false, DeviceDesktop, "windows"},
		{"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 Version/17.5 Safari/605.1.15", false, DeviceDesktop, "macos"},
		{"Mozilla/5.0 (X11; CrOS x86_64 15633.69.0) AppleWebKit/537.36", false, DeviceDesktop, "chromeos"},
		{"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/126.0", false, DeviceDesktop, "linux"},
		{"WhatsApp/2.23.20.0 A", true, DeviceBot, "other"},
		{"", false, DeviceOther, "other"},
	} {
		d, os := classifyAgent(tc.ua, tc.bot)
		if d != tc.device || os != tc.os {
			t.Errorf("classifyAgent(%q, %v) = %s, %s; want %s, %s", tc.ua, tc.bot, d, os, tc.device, tc.os)
		}
	}
}

func TestClickIDs(t *testing.T) {
	t.Parallel()
	s := &Service{clickKey: clickKey([]byte("k")), opts: Options{Rand: bytes.NewReader(bytes.Repeat([]byte{7}, 64))}}
	id, err := s.NewClickID(42)
	if err != nil || len(id) != ClickIDLen {
		t.Fatalf("NewClickID = %q, %v; want %d characters", id, err, ClickIDLen)
	}
	if link, err := s.verifyClickID(id); err != nil || link != 42 {
		t.Errorf("verifyClickID(own id) = %d, %v; want 42", link, err)
	}
	other := &Service{clickKey: clickKey([]byte("another key"))}
	if _, err := other.verifyClickID(id); err == nil {
		t.Errorf("an id verified under another server's key")
	}
	for i := range id {
		b := []byte(id)
		b[i] ^= 0x01
		if _, err := s.verifyClickID(string(b)); err == nil && string(b) != id {
			t.Errorf("id with character %d changed verified", i)
		}
	}
	// The last character carries 2 bits of the id and 4 spare ones: a
	// spelling with a spare bit set must not verify, or one click id would
	// have 16 spellings, each its own (click id, event) conversion.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, id[len(id)-1])
	if alt := id[:len(id)-1] + string(alphabet[last|1]); alt != id {
		if _, err := s.verifyClickID(alt); err == nil {
			t.Errorf("%q, another spelling of %q, verified", alt, id)
		}
	}
	for _, tc := range []struct{ target, want string }{
		{"https://example.com/shop?item=9", "https://example.com/shop?item=9&sluice_cid=" + id},
		{"https://example.com/", "https://example.com/?sluice_cid=" + id},
		{"https://example.com/p?sluice_cid=planted#top", "https://example.com/p?sluice_cid=" + id + "#top"},
	} {
		got := WithClickID(tc.target, id)
		if u, _ := url.Parse(got); got != tc.want || u.Query().Get(ClickIDParam) != id {
			t.Errorf("WithClickID(%q) = %q, want %q", tc.target, got, tc.want)
		}
	}
}

// FuzzVerifyClickID: a click id comes from anyone who posts a conversion;
// verifying must never panic, and only ids this server made verify.
func FuzzVerifyClickID(f *testing.F) {
	// Deterministic, so that every fuzzing process makes the same good id.
	s := &Service{clickKey: clickKey([]byte("k")), opts: Options{Rand: bytes.NewReader(make([]byte, 8))}}
	good, _ := s.NewClickID(7)
	f.Add(good)
	f.Add("")
	f.Add(strings.Repeat("A", ClickIDLen))
	f.Fuzz(func(t *testing.T, id string) {
		link, err := s.verifyClickID(id)
		if err == nil && (id != good || link != 7) {
			t.Fatalf("verifyClickID(%q) = %d: a forged id verified", id, link)
		}
	})
}

// FuzzHitDimensions: Referer, Accept-Language and User-Agent are the
// client's; deriving dimensions from them must never panic and stays
// bounded.
func FuzzHitDimensions(f *testing.F) {
	f.Add("https://example.com/", "fr-CH, fr;q=0.9", "Mozilla/5.0 (iPhone)")
	f.Add("%zz://", "-,;", "")
	f.Fuzz(func(t *testing.T, ref, lang, ua string) {
		d := newDimCache(func(string) string { return "fr" }).of(Hit{UserAgent: ua, HitDetails: HitDetails{Referer: ref, AcceptLanguage: lang}}, false)
		if len(d.Referrer) > maxReferrer || (d.Language != "" && len(d.Language) != 2) || d.Country != "FR" || d.Device == "" || d.OS == "" {
			t.Fatalf("dimensions %+v out of bounds", d)
		}
	})
}
