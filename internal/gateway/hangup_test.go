package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/gateway"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
)

// hangUpstream streams one event on /stream, then holds the stream open
// until the gateway gives up on it (reporting that on ended); anything
// else is answered at once.
type hangUpstream struct{ ended chan string }

func (u *hangUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/stream" {
		_, _ = io.WriteString(w, "ok")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":\"t\"}]}\n\n")
	_ = http.NewResponseController(w).Flush()
	<-r.Context().Done()
	select {
	case u.ended <- r.URL.Path:
	default:
	}
}

// hangUp is a client that sends a request for path, reads the first
// event of the streamed answer and closes its connection.
func hangUp(addr, path string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
		return err
	}
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	if err != nil || !strings.Contains(status, " 200 ") {
		return fmt.Errorf("status line %q, %v", status, err)
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return fmt.Errorf("no event before %v", err)
		}
		if strings.Contains(line, "data:") {
			return nil // hang up mid-stream
		}
	}
}

// TestLeaseReleasedWhenTheClientHangsUp: clients that disconnect in the
// middle of a streamed response (the reverse proxy then aborts the
// handler with http.ErrAbortHandler) give their concurrency leases and
// their token reservations back: the next request is admitted, long
// before the leases' period.
func TestLeaseReleasedWhenTheClientHangsUp(t *testing.T) {
	t.Parallel()
	for _, metered := range []bool{false, true} {
		t.Run(fmt.Sprintf("metered=%v", metered), func(t *testing.T) {
			t.Parallel()
			rt := gateway.Route{Path: "/", Policies: []string{"tier"}}
			if metered {
				rt.Policies = []string{"tier", "tpm"}
				rt.CostFromResponse = &gateway.CostFromResponse{JSON: "usage.total_tokens", Estimate: 10, Policies: []string{"tpm"}}
			}
			up := &hangUpstream{ended: make(chan string, 2)}
			gs, _ := setupUpstream(t, gateway.Config{AnonymousPolicy: "inflight", Routes: []gateway.Route{rt}}, up,
				limits.NamedPolicy{Name: "inflight", Algorithm: ratelimit.Concurrency, Limit: 2, Period: limits.Period(time.Hour)},
				limits.NamedPolicy{Name: "tpm", Algorithm: ratelimit.FixedWindow, Limit: 1000, Period: limits.Period(time.Hour)})
			addr := strings.TrimPrefix(gs.URL, "http://")
			for i := range 2 {
				if err := hangUp(addr, "/stream"); err != nil {
					t.Fatalf("client %d: %v", i, err)
				}
			}
			for range 2 {
				select {
				case <-up.ended:
				case <-time.After(10 * time.Second):
					t.Fatal("the upstream streams still open 10 s after their clients hung up")
				}
			}
			client := &http.Client{Timeout: 5 * time.Second}
			enginetest.EventuallyNil(t, 5*time.Second, "a request admitted once the hung-up streams ended", func() error {
				resp, err := client.Get(gs.URL + "/quick")
				if err != nil {
					return err
				}
				resp.Body.Close()
				return enginetest.State(resp.StatusCode == 200, "status %d, remaining %s", resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
			})
		})
	}
}
