package redisdedupe

import (
	"crypto/rand"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/enginetest"
)

func TestClaim(t *testing.T) {
	t.Parallel()
	opt, err := rueidis.ParseURL(enginetest.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	opt.DisableCache = true
	client, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	prefix := "sluice_test_" + rand.Text()[:10] + ":" // keys of this test only; they expire
	d := New(client, prefix, time.Minute)
	ctx := t.Context()
	t.Cleanup(func() { _ = d.Release(t.Context(), "k") })

	if existing, ok, err := d.Claim(ctx, "k", "first"); err != nil || !ok || existing != "" {
		t.Fatalf("first Claim = %q, %v, %v; want claimed", existing, ok, err)
	}
	if existing, ok, err := d.Claim(ctx, "k", "second"); err != nil || ok || existing != "first" {
		t.Errorf("second Claim = %q, %v, %v; want the first value", existing, ok, err)
	}
	ttl, err := client.Do(ctx, client.B().Ttl().Key(prefix+"k").Build()).AsInt64()
	if err != nil || ttl <= 0 || ttl > 60 {
		t.Errorf("TTL = %d, %v; want an expiry of at most 60s", ttl, err)
	}
	if err := d.Release(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := d.Claim(ctx, "k", "third"); err != nil || !ok {
		t.Errorf("Claim after Release = %v, %v; want claimed", ok, err)
	}

	// Many racing claims of one key: exactly one wins.
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 50 {
		wg.Go(func() {
			if _, ok, err := d.Claim(ctx, "race", "v"); err == nil && ok {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	_ = d.Release(ctx, "race")
	if wins != 1 {
		t.Errorf("%d of 50 racing claims won, want 1", wins)
	}
}
