package httplimit_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/httplimit"
)

// TestLeaseFreedWhenTheClientHangsUp: behind the middleware, a reverse
// proxy streaming a response aborts with http.ErrAbortHandler when its
// client disconnects mid-stream; the client's concurrency slot is freed
// all the same, not one Period later.
func TestLeaseFreedWhenTheClientHangsUp(t *testing.T) {
	t.Parallel()
	ended := make(chan struct{}, 1)
	us := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/stream" {
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: one\n\n")
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
		select {
		case ended <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(us.Close)
	target, _ := url.Parse(us.URL)
	inflight := &ratelimit.Policy{Name: "inflight", Algorithm: ratelimit.Concurrency, Limit: 1, Period: time.Hour}
	m := &httplimit.Middleware{
		Store:  ratelimit.NewMemoryStore(ratelimit.MemoryOptions{}),
		Limits: func(*http.Request) []httplimit.Limit { return []httplimit.Limit{{Policy: inflight, Key: "k"}} },
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target) }}
	gs := httptest.NewServer(m.Wrap(proxy))
	t.Cleanup(gs.Close)

	c, err := net.DialTimeout("tcp", strings.TrimPrefix(gs.URL, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprint(c, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("no event before %v", err)
		}
		if strings.HasPrefix(line, "data:") {
			break
		}
	}
	c.Close() // hang up mid-stream
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream stream still open 10 s after the client hung up")
	}
	client := &http.Client{Timeout: 5 * time.Second}
	enginetest.EventuallyNil(t, 5*time.Second, "a request admitted after the hung-up stream ended", func() error {
		resp, err := client.Get(gs.URL + "/quick")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return enginetest.State(resp.StatusCode == 200, "status %d", resp.StatusCode)
	})
}
