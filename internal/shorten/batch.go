package shorten

import (
	"context"
	"sync"
	"time"
)

// maxBatch bounds the links one transaction creates.
const maxBatch = 256

// batchTimeout bounds one batch's transaction. The batch runs under the
// context of whichever request leads it, detached from its cancellation,
// since it carries other requests' links too.
const batchTimeout = 10 * time.Second

// batcher is a group commit for link creation: concurrent Create calls are
// written in one transaction. There is no goroutine of its own: the first
// caller to find no batch in progress leads, writing everything queued
// (including what arrives meanwhile) until the queue is empty; the others
// wait for their result. On SQLite, whose writes go through one
// connection and one fsync per commit, this turns N commits into one; on
// PostgreSQL it turns N round trips into one.
type batcher struct {
	store Store
	codec *Codec

	mu      sync.Mutex
	queue   []*insertCall
	leading bool
}

type insertCall struct {
	link    NewLink
	out     Link
	created bool
	err     error
	done    chan struct{}
}

// insert creates nl, reporting false when its code or its (notification,
// URL) pair was taken.
func (b *batcher) insert(ctx context.Context, nl NewLink) (Link, bool, error) {
	call := &insertCall{link: nl, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, call)
	if b.leading {
		b.mu.Unlock()
		select {
		case <-call.done:
			return call.out, call.created, call.err
		case <-ctx.Done():
			return Link{}, false, ctx.Err() // the link may still be created, unreferenced
		}
	}
	b.leading = true
	for len(b.queue) > 0 {
		n := min(len(b.queue), maxBatch)
		batch := b.queue[:n:n]
		b.queue = b.queue[n:]
		b.mu.Unlock()
		b.write(ctx, batch)
		b.mu.Lock()
	}
	b.leading = false
	b.queue = nil
	b.mu.Unlock()
	return call.out, call.created, call.err
}

func (b *batcher) write(ctx context.Context, batch []*insertCall) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
	defer cancel()
	links := make([]NewLink, len(batch))
	for i, c := range batch {
		links[i] = c.link
	}
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
