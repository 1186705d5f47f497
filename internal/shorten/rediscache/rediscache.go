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

// Cache keeps links under Prefix + code as "2:id expiry-micros
// fresh-until-micros url" (0 for a time not set). The "2:" makes an older
// node, which wrote and read "id expiry-micros url", take the entry for
// malformed and read the database instead of redirecting to a wrong URL;
// entries in the older form are still read (fresh for as long as they
// live). A link with redirect rules is kept as "3:id expiry fresh-until
// url\nrules" (the rules as shorten.EncodeRules writes them; a URL holds no
// newline): a node that knows only "2:" takes it for malformed and reads
// the database, where it finds the URL its version can serve, while links
// without rules keep the form every node reads. It is safe for concurrent
// use.
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

// version marks the current encoding, withRules that of a link with
// rules.
const (
	version   = "2:"
	withRules = "3:"
)

func encode(l shorten.CachedLink) string {
	if l.Rules != "" {
		return withRules + strconv.FormatInt(l.ID, 10) + " " + micros(l.ExpiresAt) + " " + micros(l.FreshUntil) + " " + l.URL + "\n" + l.Rules
	}
	return version + strconv.FormatInt(l.ID, 10) + " " + micros(l.ExpiresAt) + " " + micros(l.FreshUntil) + " " + l.URL
}

func micros(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixMicro(), 10)
}

func decode(s string) (shorten.CachedLink, error) {
	rest, current := strings.CutPrefix(s, version)
	rest, ruled := strings.CutPrefix(rest, withRules)
	fields := 2 // id, expiry, then the URL
	if current || ruled {
		fields = 3 // and fresh-until
	}
	var rules string
	if ruled {
		var ok bool
		if rest, rules, ok = strings.Cut(rest, "\n"); !ok || rules == "" {
			return shorten.CachedLink{}, fmt.Errorf("malformed cached link %q", s)
		}
	}
	var nums [3]int64
	for i := range fields {
		f, r, ok := strings.Cut(rest, " ")
		n, err := strconv.ParseInt(f, 10, 64)
		if !ok || err != nil {
			return shorten.CachedLink{}, fmt.Errorf("malformed cached link %q", s)
		}
		nums[i], rest = n, r
	}
	if rest == "" {
		return shorten.CachedLink{}, fmt.Errorf("malformed cached link %q", s)
	}
	l := shorten.CachedLink{ID: nums[0], URL: rest, Rules: rules}
	if nums[1] != 0 {
		l.ExpiresAt = time.UnixMicro(nums[1]).UTC()
	}
	if nums[2] != 0 {
		l.FreshUntil = time.UnixMicro(nums[2]).UTC()
	}
	return l, nil
}
