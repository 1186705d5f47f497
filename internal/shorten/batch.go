package shorten

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// maxBatch bounds the links one transaction creates.
const maxBatch = 256

// batchTimeout bounds one batch's transaction. The batch runs under the
// context of whichever request leads it, detached from its cancellation,
// since it carries other requests' links too.
const batchTimeout = 10 * time.Second

// batcher is a group commit for link creation: concurrent Create calls are
// written in one transaction. There is no goroutine of its own: the first
// caller to find no batch in progress leads, writing what is queued
// (including what arrives meanwhile) batch after batch until its own link
// is written; then, if calls are still queued, it hands the lead to the
// oldest of them and returns. Each call waits for its own batch and at most
// the one ahead of it, never for later ones: that matters when the store
// retries a batch for seconds (a PostgreSQL restart) while callers keep
// arriving. On SQLite, whose writes go through one connection and one
// fsync per commit, this turns N commits into one; on PostgreSQL it turns N
// round trips into one.
type batcher struct {
	store Store
	codec *Codec

	mu      sync.Mutex
	queue   []*insertCall // waiting callers, oldest first
	leading bool
}

type insertCall struct {
	link    NewLink
	arrived time.Time // when insert was called: its retry window starts
	out     Link
	created bool
	err     error
	done    chan struct{} // closed once out, created and err are set
	lead    chan struct{} // closed when the lead is handed to this call
}

// insert creates nl, reporting false when its code or its (notification,
// URL) pair was taken.
func (b *batcher) insert(ctx context.Context, nl NewLink) (Link, bool, error) {
	call := &insertCall{link: nl, arrived: time.Now(), done: make(chan struct{}), lead: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, call)
	if b.leading {
		b.mu.Unlock()
		select {
		case <-call.done:
			return call.out, call.created, call.err
		case <-call.lead:
		case <-ctx.Done():
			b.mu.Lock()
			select {
			case <-call.lead:
				b.mu.Unlock() // handed the lead meanwhile: lead anyway, others wait on it
			default:
				if i := slices.Index(b.queue, call); i >= 0 {
					b.queue = slices.Delete(b.queue, i, i+1) // not written yet: it never will be
				} // else in a batch being written: the link may still be created, unreferenced
				b.mu.Unlock()
				return Link{}, false, ctx.Err()
			}
		}
		b.mu.Lock()
	}
	b.leading = true
	for {
		n := min(len(b.queue), maxBatch)
		batch := b.queue[:n:n]
		b.queue = b.queue[n:]
		b.mu.Unlock()
		b.write(ctx, batch)
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.leading = false
			b.queue = nil
			break
		}
		select {
		case <-call.done: // written: the oldest waiting call leads on
			close(b.queue[0].lead)
		default:
			continue // more than a batch was queued ahead of it
		}
		break
	}
	b.mu.Unlock()
	return call.out, call.created, call.err
}

// write stores batch in one CreateLinks call. The store retries a
// transient failure (PostgreSQL restarting) within apperr.RetryWindow,
// here counted from the arrival of the batch's oldest call: a call that
// waited for the batch ahead of it has spent part of its window already,
// and the answer comes within one window of its request either way.
func (b *batcher) write(ctx context.Context, batch []*insertCall) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
	defer cancel()
	links := make([]NewLink, len(batch))
	oldest := batch[0].arrived
	for i, c := range batch {
		links[i] = c.link
		if c.arrived.Before(oldest) {
			oldest = c.arrived
		}
	}
	ctx = apperr.WithRetryDeadline(ctx, oldest.Add(apperr.RetryWindow))
	out, created, err := b.store.CreateLinks(ctx, links, func(id int64) (string, error) {
		if id < 0 {
			return "", errorf("negative id %d", id)
		}
		return b.codec.Encode(uint64(id))
	})
	for i, c := range batch {
		if err != nil {
			c.err = err
		} else {
			c.out, c.created = out[i], created[i]
		}
		close(c.done)
	}
}
