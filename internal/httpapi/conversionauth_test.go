package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
)

// wire makes one request to a real listener with a deadline (generous:
// the machine may be loaded) and returns its status and body.
func wire(t *testing.T, method, url, key, body string, header http.Header) (int, http.Header, []byte) {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if h := header.Get("Host"); h != "" {
		req.Host = h // the client writes what it likes
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// TestConversionNeedsTheLinksOwner: tenant A, who cannot read tenant B's
// link, takes a click id from a public redirect of it and reports a sale:
// 404 problem+json (as reads answer), and B's stats show nothing. B's own
// conversions count, once per event name and for at most MaxClickEvents
// names per click id (409 past it). A link made for a notification (no
// owner) takes conversions from an admin key only.
func TestConversionNeedsTheLinksOwner(t *testing.T) {
	t.Parallel()
	b, svc := setupLinks(t)
	admin := b.addKey(t, auth.ScopeAdmin)
	tenantA := b.addKey(t, auth.ScopeLinksWrite)
	tenantB := b.addKey(t, auth.ScopeLinksWrite)
	ts := httptest.NewServer(b.srv)
	t.Cleanup(ts.Close)
	l := createLink(t, b, tenantB, `{"url":"https://example.com/shop","click_ids":true}`)
	if st, _, _ := wire(t, "GET", ts.URL+"/v1/links/"+l.Code, tenantA, "", nil); st != 404 {
		t.Fatalf("A reads B's link: %d, want 404", st)
	}
	clickID := func(code string) string {
		t.Helper()
		_, h, _ := wire(t, "GET", ts.URL+"/"+code, "", "", http.Header{"User-Agent": {browser}})
		loc, err := url.Parse(h.Get("Location"))
		if err != nil || loc.Query().Get("sluice_cid") == "" {
			t.Fatalf("redirect of %s: Location %q has no click id", code, h.Get("Location"))
		}
		return loc.Query().Get("sluice_cid")
	}
	convert := func(key, cid, event string, value float64) (int, Problem) {
		t.Helper()
		st, h, body := wire(t, "POST", ts.URL+"/v1/conversions", key,
			fmt.Sprintf(`{"click_id":%q,"event":%q,"value":%g}`, cid, event, value), nil)
		var p Problem
		if st >= 400 {
			if ct := h.Get("Content-Type"); ct != "application/problem+json" || json.Unmarshal(body, &p) != nil || p.Status != st {
				t.Errorf("conversion answer %d: %s %s, want problem+json", st, ct, body)
			}
		}
		return st, p
	}
	cid := clickID(l.Code)

	if st, p := convert(tenantA, cid, "sale", 1e12); st != 404 {
		t.Errorf("A's conversion on B's click id: %d %+v, want 404", st, p)
	}
	if err := svc.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := getStats(t, b, tenantB, l.Code, "").Totals; got.Conversions != 0 || got.ConversionValue != 0 {
		t.Errorf("B's stats after A's attempt: %+v, want no conversion", got)
	}

	if st, _ := convert(tenantB, cid, "sale", 30); st != 201 {
		t.Errorf("B's conversion: %d, want 201", st)
	}
	if st, _ := convert(tenantB, cid, "sale", 999); st != 200 {
		t.Errorf("B's repeat: %d, want 200", st)
	}
	for i := 1; i < 10; i++ {
		if st, _ := convert(tenantB, cid, fmt.Sprintf("step-%d", i), 1); st != 201 {
			t.Errorf("B's event %d: %d, want 201", i+1, st)
		}
	}
	if st, p := convert(tenantB, cid, "one-too-many", 1); st != 409 {
		t.Errorf("an 11th event name on one click id: %d %+v, want 409", st, p)
	}
	if st, _ := convert(tenantB, cid, "sale", 1); st != 200 {
		t.Errorf("a repeat past the bound: %d, want 200", st)
	}
	if got := getStats(t, b, tenantB, l.Code, "").Totals; got.Conversions != 10 || got.ConversionValue != 39 {
		t.Errorf("B's stats: %+v, want 10 conversions worth 39", got)
	}

	nl, err := svc.ShortenForNotification(t.Context(), "ntf_1", "https://example.com/order")
	if err != nil {
		t.Fatal(err)
	}
	ncid, err := svc.NewClickID(nl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := convert(tenantA, ncid, "sale", 5); st != 404 {
		t.Errorf("links:write on a notification's link: %d, want 404", st)
	}
	if st, _ := convert(admin, ncid, "sale", 5); st != 201 {
		t.Errorf("admin on a notification's link: %d, want 201", st)
	}
}
