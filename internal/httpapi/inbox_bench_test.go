package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/inbox"
)

// BenchmarkInboxFanout is the SSE fan-out alone: 1,000 streams of one
// user open on one server (real HTTP over loopback, the clients in this
// process), and each iteration one message event handed to the node's
// streams as the cross-node bus hands them (inbox.Service.Receive). It
// ends when every stream has every message; msgs/s is messages delivered
// to all 1,000 streams per second, events/s the stream events.
func BenchmarkInboxFanout(b *testing.B) {
	const streams = 1000
	bb := setup(b)
	svc := inbox.New(inbox.Options{Store: bb.db, MaxStreams: streams, MaxStreamsPerUser: streams, Buffer: 1024})
	b.Cleanup(svc.Close)
	srv := New(Options{Logger: slog.New(slog.DiscardHandler), Keys: bb.db, Inbox: svc, InboxHeartbeat: time.Minute})
	ts := httptest.NewServer(srv)
	b.Cleanup(ts.Close)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: streams}}
	ctx, cancel := context.WithCancel(context.Background())
	var events atomic.Int64
	var open, done sync.WaitGroup
	for range streams {
		open.Add(1)
		done.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/v1/users/all/inbox/stream", nil)
			resp, err := hc.Do(req)
			if err != nil {
				b.Error(err)
				open.Done()
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			ready := false
			for sc.Scan() {
				line := sc.Bytes()
				if !ready && bytes.Equal(line, []byte("event: unread")) {
					ready = true
					open.Done()
				} else if bytes.Equal(line, []byte("event: message")) {
					events.Add(1)
				}
			}
		})
	}
	open.Wait()
	if svc.Streams() != streams {
		b.Fatalf("%d streams open, want %d", svc.Streams(), streams)
	}
	msg := inbox.Message{ID: "ntf_bench", UserID: "all", Type: "order.shipped", Category: "orders",
		Subject: "Order #42 shipped", Body: "Hi there, order #42 is on its way. Track it: see your orders page",
		CreatedAt: time.Now()}
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		m := msg
		m.Seq, m.ID = int64(i+1), "ntf_"+strconv.Itoa(i)
		svc.Receive(inbox.Event{Kind: inbox.KindMessage, UserID: "all", Unread: i + 1, Message: &m})
		// Keep within the streams' buffers: a stream that falls 1,024
		// events behind is cut off, by design.
		for int64(i+1)*streams-events.Load() > 512*streams {
			time.Sleep(100 * time.Microsecond) // backpressure for the benchmark loop only
		}
	}
	want := int64(b.N) * streams
	for events.Load() < want {
		if svc.Streams() < streams {
			b.Fatalf("a stream was cut off: %d open", svc.Streams())
		}
		time.Sleep(time.Millisecond) // waiting for the clients to read the rest
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(want)/elapsed.Seconds(), "events/s")
	cancel()
	svc.Close()
	done.Wait()
}
