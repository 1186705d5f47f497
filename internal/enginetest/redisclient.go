package enginetest

import (
	"testing"

	"github.com/redis/rueidis"
)

// RedisClient connects a rueidis client to the Redis at url (a server, a
// cluster or a sentinel group, as rueidis.ParseURL reads it), closed when
// t ends; each option adjusts the parsed options first (NoClientCache).
func RedisClient(t testing.TB, url string, options ...func(*rueidis.ClientOption)) rueidis.Client {
	t.Helper()
	opt, err := rueidis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range options {
		o(&opt)
	}
	rc, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(rc.Close)
	return rc
}

// NoClientCache is a RedisClient option: no client-side caching, so the
// client asks the server every time (and sends no CLIENT TRACKING).
func NoClientCache(opt *rueidis.ClientOption) { opt.DisableCache = true }
