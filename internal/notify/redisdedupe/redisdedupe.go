// Package redisdedupe is the Redis (or Valkey) fast path for notification
// request_id deduplication: one SET key value NX EX ttl per request, so
// repeated requests are recognised across every Sluice node without a
// database read. Redis may lose keys (a restart, an eviction); the record
// store's unique request_id stays the safety net. [Dedupe] implements
// notify.Dedupe.
package redisdedupe

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/notify"
)

// Dedupe implements notify.Dedupe on Redis. It is safe for concurrent use.
type Dedupe struct {
	client rueidis.Client
	prefix string
	ttl    time.Duration
}

var _ notify.Dedupe = (*Dedupe)(nil)

// New returns a Dedupe keeping keys under prefix (for example "sluice:")
// for ttl (24 hours if zero).
func New(client rueidis.Client, prefix string, ttl time.Duration) *Dedupe {
	if ttl <= 0 {
		ttl = 24 * time.Hour
	}
	return &Dedupe{client: client, prefix: prefix, ttl: ttl}
}

// Claim implements notify.Dedupe with SET NX EX, and GET when the key
// exists. A key that expires between the two is claimed again.
func (d *Dedupe) Claim(ctx context.Context, key, value string) (string, bool, error) {
	k := d.prefix + key
	for range 3 {
		err := d.client.Do(ctx, d.client.B().Set().Key(k).Value(value).Nx().ExSeconds(int64(d.ttl/time.Second)).Build()).Error()
		if err == nil {
			return "", true, nil
		}
		if !rueidis.IsRedisNil(err) {
			return "", false, fmt.Errorf("redis set nx: %w", err)
		}
		existing, err := d.client.Do(ctx, d.client.B().Get().Key(k).Build()).ToString()
		if err == nil {
			return existing, false, nil
		}
		if !rueidis.IsRedisNil(err) {
			return "", false, fmt.Errorf("redis get: %w", err)
		}
	}
	return "", false, fmt.Errorf("redis dedupe: key %q keeps vanishing", k)
}

// Release implements notify.Dedupe.
func (d *Dedupe) Release(ctx context.Context, key string) error {
	if err := d.client.Do(ctx, d.client.B().Del().Key(d.prefix+key).Build()).Error(); err != nil {
		return fmt.Errorf("redis del: %w", err)
	}
	return nil
}
