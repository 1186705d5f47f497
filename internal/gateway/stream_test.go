package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/gateway"
)

// streamEvents is how many events sseUpstream streams before [DONE].
const streamEvents = 20

// sseUpstream streams events one flush at a time, the last one
// "[DONE]", in answer to a POST: it reads the body first, or, for a
// request with X-Answer-First, streams its first event, says so on the
// channel started holds for the request's X-Request-Id, and reads the
// body after (the client sends the rest of its body only then).
type sseUpstream struct{ started sync.Map } // request id: chan struct{}

func (u *sseUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	_ = rc.EnableFullDuplex()
	first := r.Header.Get("X-Answer-First") != ""
	if !first {
		_, _ = io.Copy(io.Discard, r.Body)
	}
	for i := range streamEvents {
		fmt.Fprintf(w, "data: {\"n\":%d}\n\n", i)
		_ = rc.Flush()
		if ch, ok := u.started.Load(r.Header.Get("X-Request-Id")); i == 0 && first && ok {
			close(ch.(chan struct{}))
			_, _ = io.Copy(io.Discard, r.Body)
		}
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

// wantStream is the body sseUpstream streams.
var wantStream = func() string {
	var b strings.Builder
	for i := range streamEvents {
		fmt.Fprintf(&b, "data: {\"n\":%d}\n\n", i)
	}
	return b.String() + "data: [DONE]\n\n"
}()

// TestStreamedPostsArriveWhole: streamed responses to POSTs with a body,
// 8 at a time through the gateway's listener, every one arrives whole
// (every event, the last one, no unexpected EOF): whether the upstream
// reads the body before it answers, or starts streaming first and reads
// the rest of the body, sent by the client only then, afterwards. Before
// the gateway served such requests in full duplex, net/http drained the
// body when the response's headers went out, under the proxy still
// forwarding it: the proxy then dropped the upstream connection and the
// client saw the stream end early.
func TestStreamedPostsArriveWhole(t *testing.T) {
	t.Parallel()
	up := &sseUpstream{}
	addr := serveHTTP(t, gateway.Config{AnonymousPolicy: "free",
		Routes: []gateway.Route{{Path: "/v1/", Streaming: true}}}, up, nil) // no listener timeouts: the short test ones cut bodies on a loaded machine
	client := &http.Client{Timeout: 20 * time.Second}
	post := func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		size := 512 + (i*997)%(64<<10)
		if i%3 == 0 {
			size = 96<<10 + (i*997)%(64<<10) // the rest over a read buffer, under what net/http drains
		}
		part := bytes.Repeat([]byte("x"), size/2)
		id := strconv.Itoa(i)
		first := i%3 == 0
		var body io.Reader = bytes.NewReader(append(part, part...))
		if first { // half the body now, the rest once the stream started
			started := make(chan struct{})
			up.started.Store(id, started)
			defer up.started.Delete(id)
			pr, pw := io.Pipe()
			defer pr.Close()
			go func() {
				_, _ = pw.Write(part)
				select {
				case <-started:
					_, _ = pw.Write(part)
					pw.Close()
				case <-ctx.Done():
					pw.CloseWithError(ctx.Err())
				}
			}()
			body = pr
		}
		req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+addr+"/v1/chat/completions", body)
		req.ContentLength = int64(2 * len(part))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-Id", id)
		if first {
			req.Header.Set("X-Answer-First", "1")
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		if err != nil || string(got) != wantStream {
			return fmt.Errorf("answer-first %v, %d-byte body: %d of %d bytes, %v", first, req.ContentLength, len(got), len(wantStream), err)
		}
		return nil
	}
	const requests, workers = 300, 8
	jobs := make(chan int, requests)
	for i := range requests {
		jobs <- i
	}
	close(jobs)
	var mu sync.Mutex
	var failed []string
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				if err := post(i); err != nil {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("request %d: %v", i, err))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Errorf("%d of %d streamed responses cut short, e.g. %s", len(failed), requests, strings.Join(failed[:min(len(failed), 3)], "; "))
	}
}
