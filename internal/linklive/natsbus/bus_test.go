package natsbus_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/linklive"
	"github.com/sluicehq/sluice/internal/linklive/natsbus"
	"github.com/sluicehq/sluice/internal/shorten"
)

// TestBusPublishListenSince: a recorded batch reaches the hub of a
// listening Bus, each hit with its dimensions and an id that grows, only
// to its link's subscriptions; Since replays one link's hits after an id,
// from the middle of a batch too, and none past the last; replays leave
// no consumer behind.
func TestBusPublishListenSince(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bus, stream := openBus(t)
	hub := linklive.NewHub(linklive.Options{Replay: bus.Since})
	sub, err := hub.Subscribe(7, "k1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := hub.Subscribe(8, "k1")
	if err != nil {
		t.Fatal(err)
	}
	stop, err := bus.Listen(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)

	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	bus.Publish([]shorten.Click{
		{LinkID: 7, At: at, Dimensions: shorten.Dimensions{Country: "FR", Device: "mobile", OS: "ios", Referrer: "t.co", Language: "fr", Target: "ios"}},
		{LinkID: 8, At: at},
		{LinkID: 7, At: at, Bot: true, Reason: "tool", Dimensions: shorten.Dimensions{Source: shorten.SourceQR}},
		{LinkID: 7, At: at.Add(time.Second)},
	})
	next := func(sub *linklive.Subscription) linklive.Hit {
		t.Helper()
		select {
		case h := <-sub.C:
			return *h
		case <-time.After(10 * time.Second):
			t.Fatal("no hit reached the hub within 10s")
		}
		return linklive.Hit{}
	}
	var got []linklive.Hit
	for range 3 {
		got = append(got, next(sub))
	}
	want := []linklive.Hit{
		{LinkID: 7, At: at, Source: "link", Country: "FR", Device: "mobile", OS: "ios", Referrer: "t.co", Language: "fr", Target: "ios"},
		{LinkID: 7, At: at, Bot: true, BotReason: "tool", Source: "qr"},
		{LinkID: 7, At: at.Add(time.Second), Source: "link"},
	}
	for i := range want {
		if got[i].ID == 0 || i > 0 && got[i].ID <= got[i-1].ID {
			t.Errorf("hit %d has id %d after %d; want growing ids", i, got[i].ID, got[max(i-1, 0)].ID)
		}
		want[i].ID = got[i].ID
		if got[i] != want[i] {
			t.Errorf("hit %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if h := next(other); h.LinkID != 8 {
		t.Errorf("link 8's stream got %+v", h)
	}

	for _, tt := range []struct {
		name  string
		after uint64
		limit int
		want  []linklive.Hit
	}{
		{"from the start", 0, 100, got},
		{"mid-batch", got[0].ID, 100, got[1:]},
		{"limited", got[0].ID, 1, got[1:2]},
		{"after the last", got[2].ID, 100, nil},
	} {
		replayed, err := hub.Replay(ctx, 7, tt.after, tt.limit)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if len(replayed) != len(tt.want) {
			t.Errorf("%s: Replay(7, %d) = %+v, want %+v", tt.name, tt.after, replayed, tt.want)
			continue
		}
		for i := range replayed {
			if replayed[i] != tt.want[i] {
				t.Errorf("%s: hit %d = %+v, want %+v", tt.name, i, replayed[i], tt.want[i])
			}
		}
	}
	// Each replay deletes its consumer; one the client library recreated
	// meanwhile (an ordered consumer resets itself) goes once idle for
	// InactiveThreshold (10 s). Either way none stays behind.
	enginetest.EventuallyNil(t, 20*time.Second, "only Listen's consumer left", func() error {
		info, err := stream.Info(ctx)
		if err != nil {
			return err
		}
		return enginetest.State(info.State.Consumers == 1, "%d consumers", info.State.Consumers)
	})
}

// TestBusPublishNeverWaits: with nothing running the publisher, Publish
// still returns at once; the batches past its queue are dropped and
// counted.
func TestBusPublishNeverWaits(t *testing.T) {
	t.Parallel()
	bus := natsbus.NewBus(nil, nil, "links.hits", nil)
	done := make(chan struct{})
	go func() {
		for range 100 {
			bus.Publish([]shorten.Click{{LinkID: 1}, {LinkID: 2}})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Publish blocked with no publisher running")
	}
	if got := bus.Dropped(); got != 2*(100-64) {
		t.Errorf("Dropped() = %d, want %d (the batches past a queue of 64)", got, 2*(100-64))
	}
}
