package main

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/notify/redisdedupe"
	"github.com/sluicehq/sluice/internal/redisconn"
	"github.com/sluicehq/sluice/internal/shorten"
	"github.com/sluicehq/sluice/internal/shorten/rediscache"
)

// startRedis opens the connection to --redis-url and returns its /readyz
// check. Redis being down does not stop the node: it serves on its local
// fallbacks (rate limits at limit / nodes, the link cache and request_id
// fast path skipped) while the connection is made in the background, and
// each user of Redis takes the client when it comes (n.redis.OnConnect).
func (n *node) startRedis(ctx context.Context) (httpapi.Check, error) {
	c, err := redisconn.Open(redisconn.Options{URL: n.cfg.RedisURL, CAFile: n.cfg.RedisCAFile, Logger: n.log})
	if err != nil {
		return httpapi.Check{}, err
	}
	n.redis = c
	n.onStop("redis", func(context.Context) error { c.Close(); return nil })
	if c.Client() != nil {
		n.log.Info("redis ready", "mode", c.Client().Mode())
	} else {
		n.goBackground(ctx, "redis connector", c.Run)
	}
	return httpapi.Check{Name: "redis", Ping: c.Ping}, nil
}

// late is a Redis adapter built once the node's Redis connects; until
// then get fails with redisconn.ErrNotConnected, which its users take as
// they take a Redis outage.
type late[T any] struct{ p atomic.Pointer[T] }

func (l *late[T]) get() (*T, error) {
	if v := l.p.Load(); v != nil {
		return v, nil
	}
	return nil, redisconn.ErrNotConnected
}

// sharedLinkCache is the shortener's shared cache on the node's Redis.
// Before Redis connects, lookups fall through to the database.
func (n *node) sharedLinkCache() shorten.SharedCache {
	c := &lateLinkCache{}
	n.redis.OnConnect(func(client rueidis.Client) { c.p.Store(rediscache.New(client, "")) })
	return c
}

type lateLinkCache struct{ late[rediscache.Cache] }

func (l *lateLinkCache) Get(ctx context.Context, code string) (shorten.CachedLink, bool, error) {
	c, err := l.get()
	if err != nil {
		return shorten.CachedLink{}, false, err
	}
	return c.Get(ctx, code)
}

func (l *lateLinkCache) Set(ctx context.Context, code string, link shorten.CachedLink, ttl time.Duration) error {
	c, err := l.get()
	if err != nil {
		return err
	}
	return c.Set(ctx, code, link, ttl)
}

func (l *lateLinkCache) Delete(ctx context.Context, code string) error {
	c, err := l.get()
	if err != nil {
		return err
	}
	return c.Delete(ctx, code)
}

// requestDedupe is the notifications' request_id fast path on the node's
// Redis. Before Redis connects, duplicates are caught by the record
// store's unique request_id.
func (n *node) requestDedupe() notify.Dedupe {
	d := &lateDedupe{}
	n.redis.OnConnect(func(client rueidis.Client) { d.p.Store(redisdedupe.New(client, "sluice:", 24*time.Hour)) })
	return d
}

type lateDedupe struct{ late[redisdedupe.Dedupe] }

func (l *lateDedupe) Claim(ctx context.Context, key, value string) (string, bool, error) {
	d, err := l.get()
	if err != nil {
		return "", false, err
	}
	return d.Claim(ctx, key, value)
}

func (l *lateDedupe) Release(ctx context.Context, key string) error {
	d, err := l.get()
	if err != nil {
		return err
	}
	return d.Release(ctx, key)
}

var (
	_ shorten.SharedCache = (*lateLinkCache)(nil)
	_ notify.Dedupe       = (*lateDedupe)(nil)
)
