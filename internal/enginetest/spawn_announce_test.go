package enginetest

import (
	"io"
	"net"
	"slices"
	"sync"
	"testing"
)

// TestRedisClusterAnnounce: with Announce, a cluster client reaches every
// node through the address the option gave it, and through nothing else.
func TestRedisClusterAnnounce(t *testing.T) {
	t.Parallel()
	var (
		mu      sync.Mutex
		proxies []string
	)
	c := StartRedisCluster(t, 3, 0, Announce(func(_ int, addr string) string {
		p := forward(t, addr)
		mu.Lock()
		proxies = append(proxies, p)
		mu.Unlock()
		return p
	}))
	rc := RedisClient(t, c.URL(), NoClientCache)
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		if err := rc.Do(t.Context(), rc.B().Set().Key(k).Value(k).Build()).Error(); err != nil {
			t.Errorf("SET %s: %v", k, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for addr := range rc.Nodes() {
		if !slices.Contains(proxies, addr) {
			t.Errorf("client knows node %s, want only the announced %v", addr, proxies)
		}
	}
	for i := range c.Nodes {
		if !slices.Contains(proxies, c.ClientAddr(i)) {
			t.Errorf("ClientAddr(%d) = %s, want one of %v", i, c.ClientAddr(i), proxies)
		}
	}
}

// forward runs a TCP forwarder to upstream on a spare loopback port until
// the test ends and returns its address.
func forward(t *testing.T, upstream string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", upstream)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c); u.Close() }()
				_, _ = io.Copy(c, u)
			}()
		}
	}()
	return ln.Addr().String()
}
