package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"image/png"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/shorten"
	"github.com/sluicehq/sluice/internal/shorten/rediscache"
	"github.com/sluicehq/sluice/internal/store"
)

// linkNode is one node of the shortener: its own store connections,
// service and server, on a database other nodes may share.
func linkNode(t *testing.T, db *store.DB, shared shorten.SharedCache) (*bundle, *shorten.Service) {
	t.Helper()
	svc := newLinks(t, shorten.Options{Store: db, Shared: shared, Targets: ownHost})
	b := &bundle{t: t, db: db, srv: New(Options{Logger: slog.New(slog.DiscardHandler), Keys: db, Links: svc})}
	return b, svc
}

func createLink(t *testing.T, b *bundle, key, body string) linkResponse {
	t.Helper()
	resp := b.do(call{method: "POST", path: "/v1/links", key: key, body: body})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/links %s = %d: %+v", body, resp.StatusCode, decodeProblem(t, resp))
	}
	return decodeLink(t, resp)
}

func TestOneTimeLinkIsNotSpentByBots(t *testing.T) {
	t.Parallel()
	b, _ := setupLinks(t)
	key := b.addKey(t, auth.ScopeLinksWrite)
	l := createLink(t, b, key, `{"url":"https://example.com/reset?t=1","max_visits":1}`)
	if l.MaxVisits == nil || *l.MaxVisits != 1 || l.Visits != 0 {
		t.Fatalf("created %+v, want max_visits 1, visits 0", l)
	}
	// An SMS app's preview fetcher, a mail scanner and a HEAD come first.
	for _, c := range []call{
		{method: "GET", path: "/" + l.Code, userAgent: "WhatsApp/2.23.20.0"},
		{method: "GET", path: "/" + l.Code, userAgent: "Mozilla/5.0 (compatible; proofpoint)"},
		{method: "HEAD", path: "/" + l.Code, userAgent: browser},
	} {
		r := b.do(c)
		body, _ := io.ReadAll(r.Body)
		if r.StatusCode != http.StatusOK || r.Header.Get("Location") != "" || strings.Contains(string(body), "example.com") {
			t.Errorf("%s by %q = %d, Location %q: want 200 without the target", c.method, c.userAgent, r.StatusCode, r.Header.Get("Location"))
		}
	}
	r := b.do(call{method: "GET", path: "/" + l.Code, userAgent: browser})
	if r.StatusCode != http.StatusFound || r.Header.Get("Location") != "https://example.com/reset?t=1" {
		t.Fatalf("first human GET = %d, Location %q; want 302 to the target", r.StatusCode, r.Header.Get("Location"))
	}
	if r := b.do(call{method: "GET", path: "/" + l.Code, userAgent: browser}); r.StatusCode != http.StatusGone {
		t.Errorf("second human GET = %d, want 410", r.StatusCode)
	} else if p := decodeProblem(t, r); !strings.Contains(p.Detail, "used up") {
		t.Errorf("410 detail = %q", p.Detail)
	}
	got := decodeLink(t, b.do(call{method: "GET", path: "/v1/links/" + l.Code, key: key}))
	if got.Visits != 1 {
		t.Errorf("visits = %d, want 1", got.Visits)
	}

	fb := createLink(t, b, key, `{"url":"https://example.com/offer","max_visits":2,"fallback_url":"https://example.com/sold-out"}`)
	var locs []string
	for range 3 {
		locs = append(locs, b.do(call{method: "GET", path: "/" + fb.Code, userAgent: browser}).Header.Get("Location"))
	}
	want := []string{"https://example.com/offer", "https://example.com/offer", "https://example.com/sold-out"}
	if strings.Join(locs, " ") != strings.Join(want, " ") {
		t.Errorf("three visits of max_visits 2 with a fallback went to %q, want %q", locs, want)
	}
	if l := createLink(t, b, key, `{"url":"https://example.com/","max_visits":0}`); l.MaxVisits != nil {
		t.Errorf("max_visits 0 gave %v, want no limit", *l.MaxVisits)
	}
	for _, body := range []string{`{"url":"https://example.com/","max_visits":2000000000}`,
		`{"url":"https://example.com/","fallback_url":"ftp://x"}`} {
		if r := b.do(call{method: "POST", path: "/v1/links", key: key, body: body}); r.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("POST %s = %d, want 422", body, r.StatusCode)
		}
	}
}

// TestVisitLimitIsExactAcrossNodes runs two nodes (each its own pool of
// connections, service and cache) on one PostgreSQL database and one Redis
// shared cache, and sends visitors at both at once: exactly max_visits of
// them are redirected.
func TestVisitLimitIsExactAcrossNodes(t *testing.T) {
	t.Parallel()
	url := enginetest.PostgresSchema(t, enginetest.PostgresURL(t))
	open := func() *store.DB {
		db, err := store.Open(t.Context(), store.Options{URL: url, MaxOpenConns: 8, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	db1 := open()
	if _, err := db1.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	rc := enginetest.RedisClient(t, enginetest.RedisURL(t), enginetest.NoClientCache)
	var tag [6]byte
	_, _ = rand.Read(tag[:])
	prefix := "sluice_test:" + hex.EncodeToString(tag[:]) + ":link:" // this test's keys only
	n1, _ := linkNode(t, db1, rediscache.New(rc, prefix))
	n2, _ := linkNode(t, open(), rediscache.New(rc, prefix))
	key := n1.addKey(t, auth.ScopeLinksWrite)
	const maxVisits, visitors = 7, 60
	l := createLink(t, n1, key, `{"url":"https://example.com/drop","max_visits":7}`)
	// Both nodes cache the link before the rush, as they would under load.
	for _, n := range []*bundle{n1, n2} {
		n.do(call{method: "GET", path: "/" + l.Code, userAgent: "Slackbot-LinkExpanding 1.0"})
	}
	var redirected, gone atomic.Int64
	var wg sync.WaitGroup
	for i := range visitors {
		n := []*bundle{n1, n2}[i%2]
		wg.Go(func() {
			r := n.do(call{method: "GET", path: "/" + l.Code, userAgent: browser})
			switch r.StatusCode {
			case http.StatusFound:
				redirected.Add(1)
			case http.StatusGone:
				gone.Add(1)
			default:
				t.Errorf("GET = %d", r.StatusCode)
			}
		})
	}
	wg.Wait()
	if n, err := rc.Do(t.Context(), rc.B().Exists().Key(prefix+l.Code).Build()).AsInt64(); err != nil || n != 0 {
		t.Errorf("the limited link is in the shared cache (%d, %v): a node could answer it without the database", n, err)
	}
	plain := createLink(t, n1, key, `{"url":"https://example.com/plain"}`)
	if n, err := rc.Do(t.Context(), rc.B().Exists().Key(prefix+plain.Code).Build()).AsInt64(); err != nil || n != 1 {
		t.Errorf("a plain link is not in the shared cache (%d, %v): the check above proves nothing", n, err)
	}
	if redirected.Load() != maxVisits || gone.Load() != visitors-maxVisits {
		t.Errorf("%d visitors over two nodes for max_visits %d: %d redirected, %d gone; want exactly %d and %d",
			visitors, maxVisits, redirected.Load(), gone.Load(), maxVisits, visitors-maxVisits)
	}
}

func TestLinkQRCode(t *testing.T) {
	t.Parallel()
	b, svc := setupLinks(t)
	key := b.addKey(t, auth.ScopeLinksWrite)
	other := b.addKey(t, auth.ScopeLinksWrite)
	l := createLink(t, b, key, `{"url":"https://example.com/menu"}`)
	r := b.do(call{method: "GET", path: "/v1/links/" + l.Code + "/qr?size=300", key: key})
	if r.StatusCode != http.StatusOK || r.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("GET qr = %d %q", r.StatusCode, r.Header.Get("Content-Type"))
	}
	img, err := png.Decode(r.Body)
	if err != nil || img.Bounds().Dx() != 300 {
		t.Fatalf("PNG: %v, %v", err, img)
	}
	want, _ := shorten.QRModules("https://sho.rt/" + l.Code + "?src=qr")
	n := len(want)
	scale, margin := 300/n, (300-300/n*n)/2
	for y := range n {
		for x := range n {
			rr, _, _, _ := img.At(margin+x*scale+scale/2, margin+y*scale+scale/2).RGBA()
			if (rr < 0x8000) != want[y][x] {
				t.Fatalf("module (%d,%d) differs from the QR code of the short URL with ?src=qr", x, y)
			}
		}
	}
	r = b.do(call{method: "GET", path: "/v1/links/" + l.Code + "/qr?format=svg", key: key})
	if body, _ := io.ReadAll(r.Body); r.StatusCode != http.StatusOK || r.Header.Get("Content-Type") != "image/svg+xml" ||
		!strings.HasPrefix(string(body), "<svg") || !strings.Contains(string(body), `width="256"`) {
		t.Errorf("GET qr svg = %d %q %.80s", r.StatusCode, r.Header.Get("Content-Type"), body)
	}
	for _, q := range []string{"size=10", "size=5000", "format=gif", "size=x"} {
		if r := b.do(call{method: "GET", path: "/v1/links/" + l.Code + "/qr?" + q, key: key}); r.StatusCode != http.StatusBadRequest {
			t.Errorf("GET qr?%s = %d, want 400", q, r.StatusCode)
		}
	}
	if r := b.do(call{method: "GET", path: "/v1/links/" + l.Code + "/qr", key: other}); r.StatusCode != http.StatusNotFound {
		t.Errorf("GET qr of another key's link = %d, want 404", r.StatusCode)
	}
	// A scan and a click, counted apart.
	b.do(call{method: "GET", path: "/" + l.Code + "?src=qr", userAgent: browser})
	b.do(call{method: "GET", path: "/" + l.Code, userAgent: browser})
	if err := svc.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	st := getStats(t, b, key, l.Code, "group=source")
	if len(st.Groups) != 2 || st.Groups[0].Humans != 1 || st.Groups[1].Humans != 1 ||
		!(st.Groups[0].Value == "qr" || st.Groups[1].Value == "qr") {
		t.Errorf("by source = %+v, want one link and one qr", st.Groups)
	}
}

type statsOut struct {
	Series []statsBucketJSON `json:"series"`
	Groups []groupJSON       `json:"groups"`
	Totals statsBucketJSON   `json:"totals"`
	By     string            `json:"by"`
}

func getStats(t *testing.T, b *bundle, key, code, query string) statsOut {
	t.Helper()
	r := b.do(call{method: "GET", path: "/v1/links/" + code + "/stats?" + query, key: key})
	if r.StatusCode != http.StatusOK {
		t.Fatalf("GET stats?%s = %d: %+v", query, r.StatusCode, decodeProblem(t, r))
	}
	var st statsOut
	if err := json.NewDecoder(r.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestLinkStatsAndConversions(t *testing.T) {
	t.Parallel()
	b, svc := setupLinks(t)
	key := b.addKey(t, auth.ScopeLinksWrite)
	l := createLink(t, b, key, `{"url":"https://example.com/shop?item=9","click_ids":true}`)
	iphone := "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148 Safari/604.1"
	r := b.do(call{method: "GET", path: "/" + l.Code, userAgent: iphone,
		header: http.Header{"Accept-Language": {"fr-CH, fr;q=0.9"}, "Referer": {"https://News.Example/a?b"}}})
	loc, err := url.Parse(r.Header.Get("Location"))
	if r.StatusCode != http.StatusFound || err != nil || loc.Query().Get("item") != "9" {
		t.Fatalf("GET = %d, Location %q", r.StatusCode, r.Header.Get("Location"))
	}
	cid := loc.Query().Get("sluice_cid")
	if len(cid) != shorten.ClickIDLen {
		t.Fatalf("click id %q, want %d characters", cid, shorten.ClickIDLen)
	}
	r2 := b.do(call{method: "GET", path: "/" + l.Code, userAgent: browser})
	if cid2, _ := url.Parse(r2.Header.Get("Location")); cid2.Query().Get("sluice_cid") == cid {
		t.Errorf("two clicks got the same click id")
	}
	if r := b.do(call{method: "GET", path: "/" + l.Code, userAgent: "Slackbot-LinkExpanding 1.0"}); strings.Contains(r.Header.Get("Location"), "sluice_cid") {
		t.Errorf("a bot got a click id: %q", r.Header.Get("Location"))
	}
	if err := svc.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}

	post := func(body string) *http.Response {
		return b.do(call{method: "POST", path: "/v1/conversions", key: key, body: body})
	}
	if r := post(`{"click_id":"` + cid + `","event":"sale","value":30}`); r.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/conversions = %d: %+v", r.StatusCode, decodeProblem(t, r))
	}
	r = post(`{"click_id":"` + cid + `","event":"sale","value":999}`)
	var c conversionResponse
	if err := json.NewDecoder(r.Body).Decode(&c); err != nil || r.StatusCode != http.StatusOK || c.Value != 30 {
		t.Errorf("repeat POST = %d %+v, want 200 with the first value (idempotent)", r.StatusCode, c)
	}
	forged := []byte(cid)
	forged[5] ^= 1
	for _, body := range []string{`{"click_id":"` + string(forged) + `","event":"sale"}`, `{"click_id":"nope","event":"sale"}`,
		`{"click_id":"` + cid + `","event":"Sale!"}`, `{"click_id":"` + cid + `","event":"sale","value":-1}`} {
		if r := post(body); r.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("POST %s = %d, want 422", body, r.StatusCode)
		}
	}
	if r := b.do(call{method: "POST", path: "/v1/conversions", key: b.addKey(t, auth.ScopeNotifyRead), body: `{"click_id":"x","event":"y"}`}); r.StatusCode != http.StatusForbidden {
		t.Errorf("POST /v1/conversions with notify:read = %d, want 403", r.StatusCode)
	}

	now := time.Now().UTC()
	q := "by=hour&from=" + now.Add(-2*time.Hour).Format(time.RFC3339) + "&to=" + now.Format(time.RFC3339)
	st := getStats(t, b, key, l.Code, q+"&group=language")
	if st.Totals.Humans != 2 || st.Totals.Bots != 1 || st.Totals.Conversions != 1 || st.Totals.ConversionValue != 30 || st.By != "hour" {
		t.Errorf("totals = %+v, want 2 humans, 1 bot, 1 conversion worth 30", st.Totals)
	}
	if len(st.Groups) == 0 || st.Groups[0].Value != "fr" && st.Groups[1].Value != "fr" {
		t.Errorf("by language = %+v, want fr among them", st.Groups)
	}
	for group, want := range map[string]string{"device": "mobile", "os": "ios", "referrer": "news.example", "country": ""} {
		st := getStats(t, b, key, l.Code, q+"&group="+group)
		found := false
		for _, g := range st.Groups {
			found = found || g.Value == want
		}
		if !found {
			t.Errorf("by %s = %+v, want %q among them", group, st.Groups, want)
		}
	}
	if got := decodeLink(t, b.do(call{method: "GET", path: "/v1/links/" + l.Code, key: key})); got.Conversions != 1 || !got.ClickIDs {
		t.Errorf("link = %+v, want click_ids and 1 conversion", got)
	}
	for _, bad := range []string{"by=week", "group=planet", "from=yesterday", "from=2026-01-01T00:00:00Z&to=2025-01-01T00:00:00Z", "by=hour&from=2020-01-01T00:00:00Z"} {
		r := b.do(call{method: "GET", path: "/v1/links/" + l.Code + "/stats?" + bad, key: key})
		if r.StatusCode != http.StatusBadRequest && r.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("GET stats?%s = %d, want 400 or 422", bad, r.StatusCode)
		}
	}
}

// TestLinkClicksHostileSpans: whatever since and bucket a caller sends,
// GET /v1/links/{code}/clicks answers the link's hits or a problem, never a
// server error; a span reaching back before 1970 in one huge bucket (which
// would have grouped every raw click of the link) counts the link's hits
// from the rollups like any other.
func TestLinkClicksHostileSpans(t *testing.T) {
	t.Parallel()
	b, svc := setupLinks(t)
	key := b.addKey(t, auth.ScopeLinksWrite)
	l := createLink(t, b, key, `{"url":"https://example.com/hostile"}`)
	b.do(call{method: "GET", path: "/" + l.Code, userAgent: browser})
	b.do(call{method: "GET", path: "/" + l.Code, userAgent: "Slackbot-LinkExpanding 1.0"})
	if err := svc.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	for query, want := range map[string]int{
		"since=2000000h&bucket=2000000h": http.StatusOK,
		"since=2562047h&bucket=2562047h": http.StatusOK,
		"since=24h&bucket=1h":            http.StatusOK,
		"since=1000h&bucket=1s":          http.StatusUnprocessableEntity,
		"since=24h&bucket=1ns":           http.StatusUnprocessableEntity,
		"since=-24h":                     http.StatusUnprocessableEntity,
		"since=24h&bucket=9999999999h":   http.StatusUnprocessableEntity,
		"since=%00&bucket=1h":            http.StatusUnprocessableEntity,
	} {
		r := b.do(call{method: "GET", path: "/v1/links/" + l.Code + "/clicks?" + query, key: key})
		if r.StatusCode != want && !(want != http.StatusOK && r.StatusCode == http.StatusBadRequest) {
			t.Errorf("GET clicks?%s = %d, want %d", query, r.StatusCode, want)
			continue
		}
		if r.StatusCode != http.StatusOK {
			if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("GET clicks?%s: Content-Type %q, want problem+json", query, ct)
			}
			continue
		}
		var series struct {
			Buckets []struct{ Human, Bot int64 } `json:"buckets"`
		}
		if err := json.NewDecoder(r.Body).Decode(&series); err != nil {
			t.Fatalf("GET clicks?%s: %v", query, err)
		}
		var human, bot int64
		for _, bk := range series.Buckets {
			human, bot = human+bk.Human, bot+bk.Bot
		}
		if human != 1 || bot != 1 {
			t.Errorf("GET clicks?%s = %d human, %d bot; want 1 and 1", query, human, bot)
		}
	}
}
