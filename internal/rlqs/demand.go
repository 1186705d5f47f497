package rlqs

import (
	"context"
	"sync"
	"time"
)

// Update is one client's new demand for one bucket.
type Update struct {
	// Bucket names the bucket across nodes: its domain and bucket id.
	Bucket string
	Demand Demand
	// WriteOnly: the caller needs no table for this bucket (it answers
	// from a division it holds, see shareCache); Report may return nil
	// for it, and costs no read of the table.
	WriteOnly bool
}

// DemandStore keeps every client's demand per bucket, so the nodes serving
// one bucket's clients divide the same table. The Server calls it once per
// usage report (one Report for every limited bucket of the report), never
// per request.
type DemandStore interface {
	// Report records each update and returns, for each in order, the live
	// demands (Expires after now) of every client of its bucket, its own
	// included (or nil for a WriteOnly update).
	Report(ctx context.Context, now time.Time, updates []Update) ([][]Demand, error)
	// Leave drops client's demand for bucket (the stream ended or the
	// bucket was abandoned), so its share is freed before it expires.
	Leave(ctx context.Context, bucket, client string) error
}

// MemoryDemand is a DemandStore in the process: for a single node, and
// as the fallback while the shared store fails. Its zero value is ready;
// it is safe for concurrent use. Expired demands are dropped when their
// bucket is next reported, and every bucket is swept once a minute, so
// memory follows the live clients.
type MemoryDemand struct {
	mu        sync.Mutex
	buckets   map[string]map[string]Demand
	lastSweep time.Time
}

var _ DemandStore = (*MemoryDemand)(nil)

// Report implements DemandStore.
func (m *MemoryDemand) Report(_ context.Context, now time.Time, updates []Update) ([][]Demand, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.buckets == nil {
		m.buckets = map[string]map[string]Demand{}
	}
	if now.Sub(m.lastSweep) > time.Minute {
		m.lastSweep = now
		for b, clients := range m.buckets {
			prune(clients, now)
			if len(clients) == 0 {
				delete(m.buckets, b)
			}
		}
	}
	out := make([][]Demand, len(updates))
	for i, u := range updates {
		clients := m.buckets[u.Bucket]
		if clients == nil {
			clients = map[string]Demand{}
			m.buckets[u.Bucket] = clients
		}
		clients[u.Demand.Client] = u.Demand
		if u.WriteOnly {
			continue
		}
		prune(clients, now)
		ds := make([]Demand, 0, len(clients))
		for _, d := range clients {
			ds = append(ds, d)
		}
		out[i] = ds
	}
	return out, nil
}

// Leave implements DemandStore.
func (m *MemoryDemand) Leave(_ context.Context, bucket, client string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if clients := m.buckets[bucket]; clients != nil {
		delete(clients, client)
		if len(clients) == 0 {
			delete(m.buckets, bucket)
		}
	}
	return nil
}

func prune(clients map[string]Demand, now time.Time) {
	for c, d := range clients {
		if !d.Expires.After(now) {
			delete(clients, c)
		}
	}
}
