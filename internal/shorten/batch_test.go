package shorten

import (
	"context"
	"testing"
	"testing/synctest"
)

// gatedStore's CreateLinks reports each call's links on started, then
// waits for a token on gate before storing them (every one created).
type gatedStore struct {
	Store
	started chan []NewLink
	gate    chan struct{}
}

func (s *gatedStore) CreateLinks(_ context.Context, links []NewLink, code func(id int64) (string, error)) ([]Link, []bool, error) {
	s.started <- links
	<-s.gate
	out := make([]Link, len(links))
	created := make([]bool, len(links))
	for i, l := range links {
		c, err := code(int64(i + 1))
		if err != nil {
			return nil, nil, err
		}
		out[i], created[i] = Link{ID: int64(i + 1), Code: c, URL: l.URL}, true
	}
	return out, created, nil
}

// TestBatcherLeaderLeavesOnceItsLinkIsWritten: the caller leading the
// batcher returns as soon as its own batch is written, although calls
// queued meanwhile still wait for theirs (one of them leads on); a queued
// caller whose context ends leaves the queue, and its link is not written.
func TestBatcherLeaderLeavesOnceItsLinkIsWritten(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		codec, err := NewCodec([]byte("test key"), 7)
		if err != nil {
			t.Fatal(err)
		}
		st := &gatedStore{started: make(chan []NewLink, 8), gate: make(chan struct{})}
		b := &batcher{store: st, codec: codec}
		ctx := t.Context()
		answered := make(chan string, 8)
		insert := func(ctx context.Context, url string) {
			if _, ok, err := b.insert(ctx, NewLink{URL: url}); err != nil || !ok {
				answered <- url + " failed"
				return
			}
			answered <- url
		}

		go insert(ctx, "leader")
		if got := <-st.started; len(got) != 1 || got[0].URL != "leader" {
			t.Fatalf("first batch = %+v, want the leader's link", got)
		}
		go insert(ctx, "queued")
		gone, cancel := context.WithCancel(ctx)
		go insert(gone, "gone")
		synctest.Wait() // both wait behind the leader's batch
		cancel()
		synctest.Wait()
		if a := <-answered; a != "gone failed" {
			t.Fatalf("answer = %q, want the cancelled call's failure", a)
		}

		st.gate <- struct{}{} // the leader's batch is written
		synctest.Wait()
		select {
		case a := <-answered:
			if a != "leader" {
				t.Fatalf("answer = %q, want the leader's", a)
			}
		default:
			t.Fatal("the leader is still waiting after its batch was written")
		}
		if got := <-st.started; len(got) != 1 || got[0].URL != "queued" {
			t.Fatalf("second batch = %+v, want only the queued link (the cancelled one left the queue)", got)
		}
		st.gate <- struct{}{}
		if a := <-answered; a != "queued" {
			t.Fatalf("answer = %q, want the queued call's", a)
		}
		if b.leading || len(b.queue) != 0 {
			t.Errorf("after the last batch: leading %v, %d queued; want an idle batcher", b.leading, len(b.queue))
		}
	})
}
