package httpapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
)

// TestBlocksFillTheirCap: through a real listener, one admin key adds
// emergency blocks until ratelimit.max_blocks are in force: the next is
// 429 problem+json naming the setting, while replacing a block in force
// (same key, policy and domain) still succeeds and lifting one makes
// room. A block in force costs under 2 KiB of this node's live memory
// (the measured figure is in the test's log and in docs/security.md,
// "Bounds").
func TestBlocksFillTheirCap(t *testing.T) {
	// Not parallel: the memory measured is this test's alone.
	const maxBlocks = 400
	b := setup(t)
	svc, err := limits.NewService(limits.Options{Rules: loadedRules(t, b),
		Counters: ratelimit.NewMemoryStore(ratelimit.MemoryOptions{}), MaxBlocks: maxBlocks})
	if err != nil {
		t.Fatal(err)
	}
	b.srv = New(Options{Logger: slog.New(slog.DiscardHandler), Keys: b.db, Ratelimit: svc})
	admin := b.addKey(t, auth.ScopeAdmin)
	ts := httptest.NewServer(b.srv)
	t.Cleanup(ts.Close)
	send := func(method, path, body string) (int, string) {
		t.Helper()
		code, _, out := wire(t, method, ts.URL+path, admin, body, nil)
		return code, string(out)
	}
	block := func(key string) (int, string) {
		return send("POST", "/v1/ratelimit/blocks", `{"key":"`+key+`","duration":"1h","reason":"credential stuffing from this address"}`)
	}

	before := liveBytes()
	for i := range maxBlocks {
		if code, body := block(fmt.Sprintf("ip:203.0.%d.%d", i/256, i%256)); code != http.StatusCreated {
			t.Fatalf("block %d: %d %s", i, code, body)
		}
	}
	per := perEntry(t, "a block in force", before, liveBytes(), maxBlocks)
	if per > 2048 {
		t.Errorf("a block holds %.0f bytes, past the documented bound's margin of 2 KiB", per)
	}
	if n := len(svc.Blocks()); n != maxBlocks {
		t.Fatalf("%d blocks in force, want %d", n, maxBlocks)
	}
	code, body := block("ip:198.51.100.1")
	if code != http.StatusTooManyRequests || !strings.Contains(body, "ratelimit.max_blocks") || !strings.Contains(body, `"status":429`) {
		t.Errorf("a block past the cap: %d %s; want 429 problem+json naming ratelimit.max_blocks", code, body)
	}
	if code, body := block("ip:203.0.0.0"); code != http.StatusCreated {
		t.Errorf("replacing a block in force at the cap: %d %s, want 201", code, body)
	}
	if code, body := send("DELETE", "/v1/ratelimit/blocks/ip:203.0.0.1", ""); code != http.StatusNoContent {
		t.Fatalf("unblock: %d %s", code, body)
	}
	if code, body := block("ip:198.51.100.1"); code != http.StatusCreated {
		t.Errorf("a block once one was lifted: %d %s, want 201", code, body)
	}
	if n := len(svc.Blocks()); n != maxBlocks {
		t.Errorf("%d blocks in force, want %d", n, maxBlocks)
	}
}
