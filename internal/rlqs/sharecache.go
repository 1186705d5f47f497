package rlqs

import (
	"math"
	"sync"
	"time"
)

// Shares are computed per bucket, not per report. Dividing a bucket means
// reading every client's demand and sorting it (see Shares), so with every
// report recomputing them, a node serving n Envoys of one bucket did n²
// work per interval, and read the whole table from the demand store n
// times. The node keeps each bucket's last division instead and answers a
// report from it while it is fresh: younger than a tenth of the reporting
// client's interval, made for the same limit, holding the client, and
// made with the client's demand as it still is (within
// rateTolerance). Otherwise the report reads the table and divides it
// again. Every client on the node is thus answered from one division, so
// the shares still sum to the limit; a change in another client's demand
// reaches a share at most a tenth of an interval later than before.
type shareCache struct {
	mu        sync.Mutex
	m         map[string]*division // bucket key
	lastSweep time.Time
}

// division is one bucket's shares, as Shares computed them at at.
type division struct {
	at     time.Time
	limit  float64
	shares map[string]float64 // client -> share
	rates  map[string]float64 // client -> the demand it was divided with
}

// rateTolerance is how far a client's demand may move, relative to the
// one its share was computed with, before its report divides the bucket
// again.
const rateTolerance = 0.05

// refreshFraction of the client's interval is how long a division serves.
const refreshFraction = 10

// lookup returns client's share of bucket from a fresh division, or false
// when the report must divide the bucket again.
func (c *shareCache) lookup(bucket, client string, limit, rate float64, interval time.Duration, now time.Time) (float64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.m[bucket]
	if d == nil || d.limit != limit || now.Sub(d.at) >= interval/refreshFraction || now.Before(d.at) {
		return 0, false
	}
	share, ok := d.shares[client]
	if !ok {
		return 0, false // a client new to the division: divide again
	}
	was := d.rates[client]
	if math.Abs(rate-was) > rateTolerance*math.Max(was, 1) {
		return 0, false
	}
	return share, true
}

// store keeps the division of bucket computed at now from table.
func (c *shareCache) store(bucket string, limit float64, shares map[string]float64, table []Demand, now time.Time) {
	rates := make(map[string]float64, len(table))
	for _, d := range table {
		rates[d.Client] = d.Rate
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*division{}
	}
	if now.Sub(c.lastSweep) > time.Minute { // buckets no one reports go
		c.lastSweep = now
		for k, d := range c.m {
			if now.Sub(d.at) > time.Minute {
				delete(c.m, k)
			}
		}
	}
	c.m[bucket] = &division{at: now, limit: limit, shares: shares, rates: rates}
}

// forget drops bucket's division: a client left it.
func (c *shareCache) forget(bucket string) {
	c.mu.Lock()
	delete(c.m, bucket)
	c.mu.Unlock()
}
