package redisdedupe

import (
	"context"
	"crypto/rand"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/enginetest"
)

func TestClaim(t *testing.T) {
	t.Parallel()
	client := enginetest.RedisClient(t, enginetest.RedisURL(t), enginetest.NoClientCache)
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

// TestClaimHonoursTheDeadlineOnABlackHole: once Redis stops answering (a
// proxy that swallows every byte), Claim returns when its context ends,
// so the caller's short deadline holds.
func TestClaimHonoursTheDeadlineOnABlackHole(t *testing.T) {
	t.Parallel()
	opt, err := rueidis.ParseURL(enginetest.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	hole := blackHole(t, opt.InitAddress[0])
	opt.InitAddress = []string{hole.addr}
	opt.DisableCache = true
	client, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	d := New(client, "sluice_test_"+rand.Text()[:10]+":", time.Minute)
	if _, ok, err := d.Claim(t.Context(), "k", "v"); err != nil || !ok {
		t.Fatalf("Claim before the black hole = %v, %v", ok, err)
	}
	hole.swallow.Store(true)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, _, err := d.Claim(ctx, "k2", "v"); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Claim through a black hole succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Claim through a black hole ignored its 100ms deadline for 10s")
	}
}

// hole is a TCP proxy to a Redis server that, once swallow is set, drops
// every byte the client sends: the server never answers.
type hole struct {
	addr    string
	swallow atomic.Bool
}

func blackHole(t *testing.T, target string) *hole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hole{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn // closed with the listener, by the test's cleanup
	closed := false
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		closed = true
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			if closed { // accepted as the test ended
				c.Close()
				s.Close()
			}
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(c, s) })
			wg.Go(func() {
				buf := make([]byte, 32<<10)
				for {
					n, err := c.Read(buf)
					if err != nil {
						s.Close()
						return
					}
					if !h.swallow.Load() {
						if _, err := s.Write(buf[:n]); err != nil {
							return
						}
					}
				}
			})
		}
	})
	return h
}
