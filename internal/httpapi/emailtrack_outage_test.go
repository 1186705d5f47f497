package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify"
	notifyoutbox "github.com/sluicehq/sluice/internal/notify/outbox"
	"github.com/sluicehq/sluice/ratelimit"
)

// jobQueue keeps the jobs published, for the test to process.
type jobQueue struct {
	mu   sync.Mutex
	jobs []notify.Job
}

func (q *jobQueue) Publish(_ context.Context, j notify.Job) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.jobs = append(q.jobs, j)
	return nil
}

func (q *jobQueue) take() []notify.Job {
	q.mu.Lock()
	defer q.mu.Unlock()
	jobs := q.jobs
	q.jobs = nil
	return jobs
}

// TestUnknownEmailTokenLimitHoldsDuringAStoreOutage cuts the email
// tracking store's PostgreSQL under a server on a real listener, as
// TestUnknownCodeLimitHoldsDuringAStoreOutage does for short links. One
// client sending 40 random tokens, limited to 5 unknown tokens a minute,
// gets at most 5 answers that are not 429 (each a 503 with Retry-After),
// then 429s; 40 clients with a random token each get 503 with
// Retry-After; the store is dialled a bounded number of times for the 80
// lookups (the breaker lets one probe at a time through, not one dial per
// token); once the database is back a tracked link sent before the
// outage redirects again. Without the breaker every token dials the
// database; without charging store failures to the limit, an outage
// lifts it.
func TestUnknownEmailTokenLimitHoldsDuringAStoreOutage(t *testing.T) {
	t.Parallel()
	db, proxy := cutStore(t)
	log := slog.New(slog.DiscardHandler)
	q := &jobQueue{}
	ob := &notifyoutbox.Provider{}
	ns := notify.NewService(notify.Options{Store: db, Queue: q, Logger: log,
		Providers: map[notify.Channel]notify.Provider{notify.Email: ob},
		Email:     notify.EmailTracking{Store: db, BaseURL: "https://sho.rt", TrackLinks: true}})
	lim, err := ratelimit.NewPolicyLimiter(ratelimit.NewMemoryStore(ratelimit.MemoryOptions{}),
		ratelimit.Policy{Name: "e", Algorithm: ratelimit.TokenBucket, Limit: 5, Period: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Options{Logger: log, Keys: db, Notify: ns, UnknownEmailLinks: lim,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)

	// One email with a tracked link (its HTML part's), sent before the
	// outage.
	if _, err := ns.PutTemplate(t.Context(), notify.Template{Type: "promo", Category: notify.Orders,
		Channels: map[string]map[string]notify.Content{"email": {"en": {Subject: "Sale", Body: "Sale",
			HTML: `<a href="{url}">Sale</a>`}}}}); err != nil {
		t.Fatal(err)
	}
	acc, err := ns.Send(t.Context(), notify.Request{UserID: "u1", Type: "promo", Channels: []notify.Channel{notify.Email},
		Data: []byte(`{"url":"https://example.com/sale"}`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range q.take() {
		if err := ns.Process(t.Context(), j); err != nil {
			t.Fatalf("Process(%s): %v", j.MsgID(), err)
		}
	}
	links, err := db.EmailLinks(t.Context(), acc.NotificationID)
	if err != nil || len(links) != 1 || links[0].URL != "https://example.com/sale" {
		t.Fatalf("the email's tracked links = %+v, %v; want one, to https://example.com/sale", links, err)
	}
	known := links[0].Token

	client := &http.Client{Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(token, from string) *http.Response {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", hs.URL+"/e/"+token, nil)
		req.Header.Set("X-Forwarded-For", from)
		req.Header.Set("User-Agent", "Mozilla/5.0")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET /e/%s: %v", token, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	randomToken := func() string { // well formed: 16 URL-safe characters
		var b [12]byte
		_, _ = rand.Read(b[:])
		return base64.RawURLEncoding.EncodeToString(b[:])
	}

	proxy.cut()
	before := proxy.accepts.Load()
	outageAnswers(t, "token", func(from string) (*http.Response, time.Duration) {
		return get(randomToken(), from), 0
	})
	dials := proxy.accepts.Load() - before
	t.Logf("%d dials to the database for 80 lookups of tracked email tokens during the outage", dials)
	if dials > 30 {
		t.Errorf("the store was dialled %d times for 80 lookups during the outage, want a bounded number (probes, not one per token)", dials)
	}

	proxy.restore()
	start := time.Now()
	n := 0
	enginetest.EventuallyNil(t, 30*time.Second, "the tracked link redirects after the outage", func() error {
		n++ // a client of its own each time: 503s count against a client's limit
		resp := get(known, "192.0.2."+strconv.Itoa(n%250+1))
		return enginetest.State(resp.StatusCode == http.StatusFound && resp.Header.Get("Location") == "https://example.com/sale",
			"GET /e/%s = %d", known, resp.StatusCode)
	})
	t.Logf("the tracked link redirects %v after the database came back", time.Since(start).Round(time.Millisecond))
}
