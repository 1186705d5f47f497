package redisconn_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/redisconn"
)

// TestOpenEveryKind connects to each kind of address --redis-url names,
// each served by engines the test starts: one server, a Cluster from one
// seed, a Sentinel group and a TLS server checked against its CA. Each is
// connected when Open returns and stores and reads a key.
func TestOpenEveryKind(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		start    func(t *testing.T) (url, ca string)
		wantMode rueidis.ClientMode
	}{
		{"standalone", func(t *testing.T) (string, string) { return enginetest.StartRedis(t).URL(), "" },
			rueidis.ClientModeStandalone},
		{"cluster from one seed", func(t *testing.T) (string, string) {
			return enginetest.StartRedisCluster(t, 3, 0).Nodes[1].URL(), ""
		}, rueidis.ClientModeCluster},
		{"cluster with addr= seeds", func(t *testing.T) (string, string) {
			return enginetest.StartRedisCluster(t, 3, 0).URL(), ""
		}, rueidis.ClientModeCluster},
		{"sentinel", func(t *testing.T) (string, string) { return enginetest.StartRedisSentinel(t, 2).URL(), "" },
			rueidis.ClientModeSentinel},
		{"tls with a CA file", func(t *testing.T) (string, string) {
			r := enginetest.StartRedisTLS(t)
			return r.URL(), r.CAFile
		}, rueidis.ClientModeStandalone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url, ca := tt.start(t)
			c, err := redisconn.Open(redisconn.Options{URL: url, CAFile: ca})
			if err != nil {
				t.Fatalf("Open(%s) = %v", url, err)
			}
			t.Cleanup(c.Close)
			client := c.Client()
			if client == nil {
				t.Fatalf("Open(%s): not connected: %v", url, c.Err())
			}
			if client.Mode() != tt.wantMode {
				t.Errorf("Mode() = %s, want %s", client.Mode(), tt.wantMode)
			}
			ctx := t.Context()
			if err := c.Ping(ctx); err != nil {
				t.Errorf("Ping = %v", err)
			}
			for _, k := range []string{"a", "b", "c", "d"} { // several slots on a Cluster
				if err := client.Do(ctx, client.B().Set().Key("redisconn:"+k).Value(k).Build()).Error(); err != nil {
					t.Fatalf("SET %s = %v", k, err)
				}
				if v, err := client.Do(ctx, client.B().Get().Key("redisconn:"+k).Build()).ToString(); err != nil || v != k {
					t.Errorf("GET %s = %q, %v; want %q", k, v, err, k)
				}
			}
		})
	}
}

// TestOpenTLSWithoutTheCA is refused: the test CA is no system authority.
func TestOpenTLSWithoutTheCA(t *testing.T) {
	t.Parallel()
	r := enginetest.StartRedisTLS(t)
	c, err := redisconn.Open(redisconn.Options{URL: r.URL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.Err(); !errors.Is(err, redisconn.ErrNotConnected) || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("Err() = %v, want not connected for want of a trusted certificate", err)
	}
}

// TestOpenWhileDownConnectsLater opens a Conn on a stopped Redis: Open
// returns at once, not connected, and logs it once; Run connects when
// Redis starts, hands the client to every OnConnect function once and logs
// that; an OnConnect after that is called at once.
func TestOpenWhileDownConnectsLater(t *testing.T) {
	t.Parallel()
	redis := enginetest.StartRedis(t)
	redis.Stop()
	logs := &enginetest.LogBuffer{}
	c, err := redisconn.Open(redisconn.Options{URL: redis.URL(), RetryInterval: 10 * time.Millisecond,
		MaxRetryInterval: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatalf("Open with Redis down = %v, want a Conn that connects later", err)
	}
	t.Cleanup(c.Close)
	if c.Client() != nil {
		t.Fatal("Client() != nil with Redis down")
	}
	if err := c.Ping(t.Context()); !errors.Is(err, redisconn.ErrNotConnected) || !strings.Contains(err.Error(), "refused") {
		t.Errorf("Ping with Redis down = %v, want ErrNotConnected with the dial error", err)
	}
	got := make(chan rueidis.Client, 2)
	c.OnConnect(func(client rueidis.Client) { got <- client })

	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-ran })
	if len(got) != 0 {
		t.Fatal("OnConnect called with Redis down")
	}

	redis.Start()
	var client rueidis.Client
	select {
	case client = <-got:
	case <-time.After(15 * time.Second):
		t.Fatalf("not connected within 15s of Redis starting: %v", c.Err())
	}
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("Run = %v once connected, want nil", err)
		}
		ran <- nil
	case <-time.After(5 * time.Second):
		t.Error("Run still running after it connected")
	}
	if err := client.Do(t.Context(), client.B().Ping().Build()).Error(); err != nil {
		t.Errorf("PING on the late client = %v", err)
	}
	if err := c.Ping(t.Context()); err != nil {
		t.Errorf("Ping once connected = %v", err)
	}
	late := false
	c.OnConnect(func(rueidis.Client) { late = true })
	if !late {
		t.Error("OnConnect after connecting was not called at once")
	}
	if len(got) != 0 {
		t.Error("an OnConnect function was called twice")
	}
	log := logs.String()
	if n := strings.Count(log, "redis unreachable at start"); n != 1 {
		t.Errorf("logged the start outage %d times, want once:\n%s", n, log)
	}
	if n := strings.Count(log, "redis connected"); n != 1 {
		t.Errorf("logged the connection %d times, want once:\n%s", n, log)
	}
}
