// Package rediscache is the shortener's shared second-level cache on Redis
// or Valkey (standalone or Cluster): every node reads a link another node
// already loaded without asking the database. [Cache] implements
// shorten.SharedCache.
package rediscache

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/shorten"
)

var _ shorten.SharedCache = (*Cache)(nil)

// Cache keeps links under Prefix + code as "id expiry-micros url". It is
// safe for concurrent use.
type Cache struct {
	client rueidis.Client
	prefix string
}

// New returns a Cache on client with keys under prefix (default
// "sluice:link:").
func New(client rueidis.Client, prefix string) *Cache {
	if prefix == "" {
		prefix = "sluice:link:"
	}
	return &Cache{client: client, prefix: prefix}
}

// Get implements shorten.SharedCache.
func (c *Cache) Get(ctx context.Context, code string) (shorten.CachedLink, bool, error) {
	s, err := c.client.Do(ctx, c.client.B().Get().Key(c.prefix+code).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return shorten.CachedLink{}, false, nil
	}
	if err != nil {
		return shorten.CachedLink{}, false, fmt.Errorf("get link %q: %w", code, err)
	}
	l, err := decode(s)
	if err != nil {
		return shorten.CachedLink{}, false, fmt.Errorf("get link %q: %w", code, err)
	}
	return l, true, nil
}

// Set implements shorten.SharedCache. A ttl below one millisecond stores
// nothing.
func (c *Cache) Set(ctx context.Context, code string, l shorten.CachedLink, ttl time.Duration) error {
	if ttl < time.Millisecond {
		return nil
	}
	err := c.client.Do(ctx, c.client.B().Set().Key(c.prefix+code).Value(encode(l)).Px(ttl).Build()).Error()
	if err != nil {
		return fmt.Errorf("set link %q: %w", code, err)
	}
	return nil
}

// Delete implements shorten.SharedCache.
func (c *Cache) Delete(ctx context.Context, code string) error {
	if err := c.client.Do(ctx, c.client.B().Del().Key(c.prefix+code).Build()).Error(); err != nil {
		return fmt.Errorf("delete link %q: %w", code, err)
	}
	return nil
}

func encode(l shorten.CachedLink) string {
	var exp int64
	if !l.ExpiresAt.IsZero() {
		exp = l.ExpiresAt.UnixMicro()
	}
	return strconv.FormatInt(l.ID, 10) + " " + strconv.FormatInt(exp, 10) + " " + l.URL
}

func decode(s string) (shorten.CachedLink, error) {
	id, rest, ok1 := strings.Cut(s, " ")
	exp, url, ok2 := strings.Cut(rest, " ")
	n, err1 := strconv.ParseInt(id, 10, 64)
	e, err2 := strconv.ParseInt(exp, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil || url == "" {
		return shorten.CachedLink{}, fmt.Errorf("malformed cached link %q", s)
	}
	l := shorten.CachedLink{ID: n, URL: url}
	if e != 0 {
		l.ExpiresAt = time.UnixMicro(e).UTC()
	}
	return l, nil
}
