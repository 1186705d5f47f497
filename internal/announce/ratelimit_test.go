package announce_test

import (
	"crypto/rand"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluicehq/sluice/internal/announce"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/limits"
)

// TestRatelimitCarriesChanges sends a rule change, a key reset and a
// block change (a rules change without a policy) from one node and
// checks that another node hears each, with its kind, policy and key.
func TestRatelimitCarriesChanges(t *testing.T) {
	t.Parallel()
	url := enginetest.NATSURL(t)
	prefix := "t" + rand.Text()[:8] + "."
	name := func(s string) string { return prefix + s }
	conn := func() *nats.Conn {
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	sender, receiver := announce.NewRatelimit(conn(), name), announce.NewRatelimit(conn(), name)
	var (
		mu    sync.Mutex
		heard []limits.Change
	)
	stop, err := receiver.Listen(func(c limits.Change) { mu.Lock(); heard = append(heard, c); mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })

	sent := []limits.Change{
		{Kind: limits.RulesChanged, Policy: "free"},
		{Kind: limits.KeyReset, Policy: "free", Key: "ann"},
		{Kind: limits.RulesChanged},
	}
	for _, c := range sent {
		if err := sender.Announce(t.Context(), c); err != nil {
			t.Fatalf("Announce(%+v): %v", c, err)
		}
	}
	var got []limits.Change
	enginetest.EventuallyNil(t, 5*time.Second, fmt.Sprintf("%d changes heard", len(sent)), func() error {
		mu.Lock()
		defer mu.Unlock()
		got = slices.Clone(heard)
		return enginetest.State(len(got) >= len(sent), "heard %+v", got)
	})
	// Two subjects: order holds within each, not across them.
	for _, c := range sent {
		if !slices.Contains(got, c) {
			t.Errorf("heard %+v, want it to include %+v", got, c)
		}
	}
}
