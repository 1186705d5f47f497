package main

import (
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// TestAPISlowBodyIsCut: a client that sends a request's headers and a few
// bytes of its body, then stalls, is disconnected after --http-read-timeout
// instead of holding the connection.
func TestAPISlowBodyIsCut(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.HTTP.ReadHeaderTimeout, cfg.HTTP.ReadTimeout = 200*time.Millisecond, 300*time.Millisecond
	n := startNode(t, cfg)
	c, err := net.Dial("tcp", strings.TrimPrefix(n.httpURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := "POST /v1/notifications HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"user"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, c); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the API still holds a stalled request's connection after 10s (read timeout 300ms)")
	}
}
