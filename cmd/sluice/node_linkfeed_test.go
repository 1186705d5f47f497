package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
)

// TestLinkLiveTwoNodes: two nodes on one database and one NATS; a stream
// of a link's live stats opened on node B gets the hit of a redirect
// node A served, with its dimensions, within a deadline (the flush
// interval and a NATS hop); a stream reopened on B with Last-Event-ID
// gets the hit it missed meanwhile.
func TestLinkLiveTwoNodes(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Links.FlushInterval = 200 * time.Millisecond
	a, b := startTwoNodes(t, cfg)

	code, raw := call(t, "POST", a.httpURL+"/v1/links", `{"url":"https://example.com/live"}`)
	var l struct{ Code string }
	if code != 201 || json.Unmarshal(raw, &l) != nil {
		t.Fatalf("POST /v1/links on A = %d %s", code, raw)
	}
	streamURL := b.httpURL + "/v1/links/" + l.Code + "/stats/stream"
	s := openInboxStream(t, streamURL, nil)
	redirect := func() time.Time {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "GET", a.httpURL+"/"+l.Code, nil)
		req.Header.Set("User-Agent", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1")
		req.Header.Set("Accept-Language", "de-DE")
		start := time.Now()
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound {
			t.Fatalf("GET /%s on A = %d, want 302", l.Code, resp.StatusCode)
		}
		return start
	}
	start := redirect()
	e := s.next(t, "hit")
	took := time.Since(start)
	var hit struct {
		Code, Device, OS, Language string
		Bot                        bool
		At                         time.Time
	}
	if err := json.Unmarshal([]byte(e.Data), &hit); err != nil || hit.Code != l.Code || hit.Device != "mobile" || hit.OS != "ios" ||
		hit.Language != "de" || hit.Bot || hit.At.IsZero() || e.ID == "" {
		t.Errorf("B's stream got %+v (%+v, %v), want A's iPhone click", e, hit, err)
	}
	// The flush interval (200ms) and a NATS hop; 5s leaves room for a
	// loaded machine.
	if took > 5*time.Second {
		t.Errorf("the hit reached B's stream %s after the redirect on A", took)
	}
	t.Logf("redirect on A to event on B: %s", took)
	s.close()

	redirect()
	// The Go client, resuming on B.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r, err := client.New(b.httpURL, "").LinkHits(ctx, l.Code, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m, err := r.Next()
	if err != nil || m.ID == e.ID || m.ID == "" || m.Code != l.Code || m.OS != "ios" || r.LastEventID != m.ID {
		t.Errorf("resumed after %s: %+v, %v (last %s), want the missed hit", e.ID, m, err, r.LastEventID)
	}
}

// TestLinkLiveStreamEndsAtShutdown: a node shutting down ends its open
// live stats streams at once instead of waiting out the shutdown timeout
// for them.
func TestLinkLiveStreamEndsAtShutdown(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.DrainDelay, cfg.ShutdownTimeout = 0, time.Minute
	r := runNode(t, cfg, slog.New(slog.DiscardHandler))
	base := "http://" + r.HTTP
	code, raw := call(t, "POST", base+"/v1/links", `{"url":"https://example.com/live"}`)
	var l struct{ Code string }
	if code != 201 || json.Unmarshal(raw, &l) != nil {
		t.Fatalf("POST /v1/links = %d %s", code, raw)
	}
	s := openInboxStream(t, base+"/v1/links/"+l.Code+"/stats/stream", nil)
	// Within 20s with a live stream open: its shutdown timeout is 1m.
	if err := r.stop(t, 20*time.Second); err != nil {
		t.Errorf("serve returned %v", err)
	}
	for range s.events { // the stream has ended: its channel closes
	}
}

// TestLinksLiveCLI: sluice links live prints the hits of redirects
// served while it runs, one JSON object a line with its id, and stops at
// --count; --after resumes after a printed id; an unknown link fails.
func TestLinksLiveCLI(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Links.FlushInterval = 50 * time.Millisecond
	n := startNode(t, cfg)
	env := map[string]string{"SLUICE_SERVER": n.httpURL}
	if code, _, errs := runCLI(t, env, "shorten", "https://example.com/live", "--slug", "live"); code != 0 {
		t.Fatalf("shorten = %d %q", code, errs)
	}
	type result struct {
		code      int
		out, errs string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errs := runCLI(t, env, "links", "live", "live", "--count", "2", "--json")
		done <- result{code, out, errs}
	}()
	// The command connects when it connects: visit until it has printed
	// two hits.
	var r result
	deadline := time.After(30 * time.Second)
wait:
	for {
		if code, _ := visit(t, n.httpURL, "live"); code != http.StatusFound {
			t.Fatalf("visit = %d", code)
		}
		select {
		case r = <-done:
			break wait
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			t.Fatal("links live --count 2 did not end within 30s of visits")
		}
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if r.code != 0 || len(lines) != 2 {
		t.Fatalf("links live = %d %q %q, want two lines", r.code, r.out, r.errs)
	}
	var first struct{ ID, Code, OS string }
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first.ID == "" || first.Code != "live" || first.OS != "ios" {
		t.Errorf("first line %q (%+v, %v), want the iPhone's hit with an id", lines[0], first, err)
	}
	code, out, errs := runCLI(t, env, "links", "live", "live", "--after", first.ID, "--count", "1", "--json")
	var resumed struct{ ID string }
	if err := json.Unmarshal([]byte(out), &resumed); code != 0 || err != nil || resumed.ID == first.ID || !strings.Contains(lines[1], `"id":"`+resumed.ID+`"`) {
		t.Errorf("links live --after %s = %d %q %q, want the second hit, %s", first.ID, code, out, errs, lines[1])
	}
	if code, _, errs := runCLI(t, env, "links", "live", "nope", "--count", "1"); code == 0 || !strings.Contains(errs, "404") {
		t.Errorf("links live of an unknown link = %d %q, want a 404", code, errs)
	}
}
