package httpapi

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
)

// The tests that fill a table a client fills (the "Bounds" table of
// docs/security.md) share these: a stream opened over a bare connection,
// so the client side costs a socket and nothing else, and the live memory
// of this process, read from runtime/metrics.

// rawStream is a GET sent on a bare TCP connection, its answer's head
// read; the connection stays open for a 200 (the stream goes on, unread),
// and the body of any other answer is read.
type rawStream struct {
	conn   net.Conn
	status int
	header http.Header
	body   string // for a refusal
}

// openRaw sends GET path to addr with key (if any) as a bearer, and reads
// the answer's head within 30s.
func openRaw(t testing.TB, addr, path, key string) *rawStream {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 30*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	req := "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
	if key != "" {
		req += "Authorization: Bearer " + key + "\r\n"
	}
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	// A reader on the head only: for a 200 its buffer is dropped, and the
	// events it may have read ahead with it.
	br := bufio.NewReaderSize(conn, 1024)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	s := &rawStream{conn: conn, status: resp.StatusCode, header: resp.Header}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		s.body = string(b)
		conn.Close()
	}
	_ = conn.SetDeadline(time.Time{})
	return s
}

// refusedAt429 checks that s is a 429 problem+json with a Retry-After
// whose detail names setting.
func (s *rawStream) refusedAt429(t testing.TB, what, setting string) {
	t.Helper()
	if s.status != http.StatusTooManyRequests || s.header.Get("Retry-After") == "" ||
		s.header.Get("Content-Type") != "application/problem+json" || !strings.Contains(s.body, setting) {
		t.Errorf("%s: status %d, Retry-After %q, Content-Type %q, body %s; want 429 problem+json with a Retry-After, naming %s",
			what, s.status, s.header.Get("Retry-After"), s.header.Get("Content-Type"), s.body, setting)
	}
}

// liveBytes is the memory this process's Go code holds after a GC: heap
// objects and goroutine stacks.
func liveBytes() uint64 {
	runtime.GC()
	runtime.GC()
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(samples)
	return samples[0].Value.Uint64() + samples[1].Value.Uint64()
}

// perEntry is the bytes each of n entries added between before and after,
// reported by t.Logf under what.
func perEntry(t testing.TB, what string, before, after uint64, n int) float64 {
	t.Helper()
	per := (float64(after) - float64(before)) / float64(n)
	t.Logf("%s: %.0f bytes each (%d entries, %d -> %d bytes live)", what, per, n, before, after)
	return per
}
