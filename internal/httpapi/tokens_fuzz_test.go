package httpapi

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"
)

// fuzzSigner signs the tokens the fuzz targets below start from.
var fuzzSigner = signer{key: []byte("0123456789abcdef0123456789abcdef")}

// fuzzNow is the fuzz targets' clock: tokens are minted to expire after it.
var fuzzNow = time.Unix(1_800_000_000, 0)

// FuzzInboxToken feeds arbitrary strings to the inbox token parser, seeded
// with real tokens and their mutations: it must never panic, and a token
// it accepts is exactly one the server minted (same user, same
// generation), so no edit of a real token names another user.
func FuzzInboxToken(f *testing.F) {
	exp := fuzzNow.Add(time.Hour)
	for _, user := range []string{"u1", "user-42", "ü.ser", "a.b.c", "x"} {
		tok := fuzzSigner.inboxToken(user, exp, 3)
		f.Add(tok, user, int64(3))
		f.Add(tok+".", user, int64(3))
		f.Add(tok[:len(tok)-1], user, int64(3))
	}
	f.Add("ibx1.dTE.1800003600.AAAA", "u1", int64(0))
	f.Add("ibx2....", "", int64(0))
	f.Fuzz(func(t *testing.T, tok, user string, gen int64) {
		if u, g, ok := fuzzSigner.parseInboxToken(tok, fuzzNow); ok {
			if tok != fuzzSigner.inboxToken(u, time.Unix(tokenExpiry(t, tok), 0), g) {
				t.Fatalf("parseInboxToken(%q) accepted a token the server did not mint for %q/%d", tok, u, g)
			}
		}
		if user == "" || gen < 0 {
			return
		}
		minted := fuzzSigner.inboxToken(user, exp, gen)
		u, g, ok := fuzzSigner.parseInboxToken(minted, fuzzNow)
		if !ok || u != user || g != gen {
			t.Fatalf("parseInboxToken(inboxToken(%q, %d)) = %q, %d, %v", user, gen, u, g, ok)
		}
		if _, _, ok := fuzzSigner.parseInboxToken(minted, exp); ok {
			t.Fatalf("an inbox token for %q was accepted at its expiry", user)
		}
	})
}

// tokenExpiry reads the expiry field of a parsed inbox token.
func tokenExpiry(t *testing.T, tok string) int64 {
	t.Helper()
	var fields []string
	start := len(inboxTokenPrefix)
	for i := start; i <= len(tok); i++ {
		if i == len(tok) || tok[i] == '.' {
			fields = append(fields, tok[start:i])
			start = i + 1
		}
	}
	n, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		t.Fatalf("accepted token %q has expiry %q", tok, fields[1])
	}
	return n
}

// FuzzPreferenceToken: the preference page's signed links accept only
// what the server signed, for the user it signed them for.
func FuzzPreferenceToken(f *testing.F) {
	exp := fuzzNow.Add(time.Hour)
	for _, user := range []string{"u1", "a.b", "ü"} {
		tok := fuzzSigner.preferenceToken(user, exp)
		f.Add(tok, user)
		f.Add(tok+"A", user)
	}
	f.Add("..", "")
	f.Fuzz(func(t *testing.T, tok, user string) {
		if u, e, ok := fuzzSigner.parsePreferenceToken(tok, fuzzNow); ok {
			if tok != fuzzSigner.preferenceToken(u, e) {
				t.Fatalf("parsePreferenceToken(%q) accepted a token the server did not sign for %q", tok, u)
			}
		}
		if user == "" {
			return
		}
		if u, _, ok := fuzzSigner.parsePreferenceToken(fuzzSigner.preferenceToken(user, exp), fuzzNow); !ok || u != user {
			t.Fatalf("preference token round trip for %q = %q, %v", user, u, ok)
		}
	})
}

// FuzzSessionCookie: a dashboard session cookie verifies only as the
// server signed it.
func FuzzSessionCookie(f *testing.F) {
	v, _ := fuzzSigner.newSession("key_1", fuzzNow.Add(time.Hour))
	f.Add(v)
	f.Add(v[:len(v)-2])
	f.Add(sessionPrefix + "....")
	f.Fuzz(func(t *testing.T, v string) {
		ss, ok := fuzzSigner.parseSession(v, fuzzNow)
		if !ok {
			return
		}
		exp := strconv.FormatInt(ss.expires.Unix(), 10)
		want := sessionPrefix + "." + ss.keyID + "." + exp + "." + ss.nonce + "." + fuzzSigner.sign("session", ss.keyID, exp, ss.nonce)
		if v != want {
			t.Fatalf("parseSession(%q) accepted a cookie the server did not sign", v)
		}
	})
}

// FuzzLastEventID: a live stream's resume point from the header or the
// query is a non-negative id or a 400, never a panic.
func FuzzLastEventID(f *testing.F) {
	for _, s := range []string{"", "0", "17", "-1", "9223372036854775807", "9223372036854775808", "1e3", " 1", "0x10"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, header, query string) {
		r := httptest.NewRequest(http.MethodGet, "/v1/links/abc/stats/stream?last_event_id="+url.QueryEscape(query), nil)
		r.Header.Set("Last-Event-ID", header)
		n, err := parseLastEventID(r)
		if err != nil {
			return
		}
		v := header
		if v == "" {
			v = query
		}
		if v == "" {
			if n != 0 {
				t.Fatalf("no Last-Event-ID gave %d", n)
			}
			return
		}
		for _, c := range v {
			if c < '0' || c > '9' {
				t.Fatalf("Last-Event-ID %q accepted as %d", v, n)
			}
		}
		if want, _ := strconv.ParseUint(v, 10, 64); want != n || n >= 1<<63 {
			t.Fatalf("Last-Event-ID %q read as %d", v, n)
		}
	})
}
