package announce_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/shorten"
)

// TestRulesReachTheOtherNode: B has cached a link (a cache TTL far longer
// than the test); rules set on A reach B through the announcement, which B
// caches in place of the old entry, so B applies them while its store
// cannot answer; removing them reaches B the same way.
func TestRulesReachTheOtherNode(t *testing.T) {
	t.Parallel()
	nats := enginetest.StartNATS(t)
	dbPath := filepath.Join(t.TempDir(), "sluice.db")
	prefix := testPrefix()
	node := func(down bool) *shorten.Service { return announcingNode(t, dbPath, nats.URL(), prefix, down) }
	a, b := node(false), node(true)
	ctx := t.Context()
	l, err := a.Create(ctx, shorten.CreateRequest{URL: "https://example.com/plain"})
	if err != nil {
		t.Fatal(err)
	}
	const iphone = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1"
	visit := shorten.Visit{UserAgent: iphone, Client: "192.0.2.1"}
	redirect := func() string {
		tg, err := b.Resolve(ctx, l.Code, "client")
		if err != nil {
			return "error: " + err.Error()
		}
		return b.Choose(tg, visit).URL
	}
	enginetest.Eventually(t, 5*time.Second, "B caches the link created on A", func() bool { return redirect() == l.URL })

	rules := []shorten.Rule{{Name: "ios", If: shorten.Conditions{OS: []string{"ios"}}, URL: "https://apps.example.com/app"}}
	if _, err := a.SetRules(ctx, shorten.Caller{Admin: true}, l.Code, rules); err != nil {
		t.Fatalf("SetRules: %v", err)
	}
	took := enginetest.Eventually(t, 5*time.Second, "B applies the rules set on A", func() bool { return redirect() == "https://apps.example.com/app" })
	t.Logf("rules set on A applied on B (store down, entry cached for an hour) after %v", took)
	if _, err := a.SetRules(ctx, shorten.Caller{Admin: true}, l.Code, nil); err != nil {
		t.Fatalf("SetRules(none): %v", err)
	}
	enginetest.Eventually(t, 5*time.Second, "B drops the rules removed on A", func() bool { return redirect() == l.URL })
}
