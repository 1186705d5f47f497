package enginetest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// StartRedis runs redis-server for the calling test on a spare loopback port,
// without persistence (--save "" --appendonly no), its directory in
// t.TempDir(), and returns once it answers PING. The server is stopped when
// the test ends. It skips the test (fails it when CI=true) if redis-server is
// not installed.
func StartRedis(t testing.TB) *Process {
	t.Helper()
	return startProcess(t, spec{
		name:  "redis-server",
		path:  "redis-server",
		url:   func(addr string) string { return "redis://" + addr },
		args:  func(port int, dir, _ string) []string { return redisArgs(port, dir) },
		ready: redisReady,
	}, t.TempDir())
}

// redisArgs are the command line of a redis-server for one test: loopback
// on port, no persistence (--save "" --appendonly no), in the foreground,
// logging to stdout, its directory dir.
func redisArgs(port int, dir string) []string {
	return []string{
		"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--save", "", "--appendonly", "no", "--dir", dir,
		"--daemonize", "no", "--logfile", "",
	}
}

// StartNATS runs nats-server with JetStream for the calling test on a spare
// loopback port (nats-server -a 127.0.0.1 -p PORT -js -sd DIR, DIR in
// t.TempDir()), and returns once it accepts a client and reports JetStream.
// Streams survive Stop and Start, since DIR is kept. The server is stopped
// when the test ends. It skips the test (fails it when CI=true) if
// nats-server is not installed.
func StartNATS(t testing.TB) *Process {
	t.Helper()
	return startProcess(t, spec{
		name: "nats-server",
		path: "nats-server",
		url:  func(addr string) string { return "nats://" + addr },
		args: func(port int, dir, tag string) []string {
			return []string{
				"-a", "127.0.0.1", "-p", strconv.Itoa(port),
				"-js", "-sd", filepath.Join(dir, "jetstream"), "-n", tag,
			}
		},
		ready: natsReady,
	}, t.TempDir())
}

// redisReady sends INFO server over raw RESP and checks that the answering
// server is process pid and has finished loading.
func redisReady(ctx context.Context, addr, _ string, pid int) error {
	conn, r, err := dial(ctx, addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	return redisIsPid(conn, r, pid)
}

// redisIsPid sends INFO server on conn and checks that the answering
// server is process pid and has finished loading.
func redisIsPid(conn io.Writer, r *bufio.Reader, pid int) error {
	if _, err := conn.Write([]byte("*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")); err != nil {
		return err
	}
	head, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(head, "$") { // -LOADING and other errors
		return fmt.Errorf("redis: %s", strings.TrimSpace(head))
	}
	n, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil || n < 0 {
		return fmt.Errorf("redis: bad reply %q", head)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	want := "process_id:" + strconv.Itoa(pid) + "\r\n"
	if !strings.Contains(string(body), want) {
		return errors.New("redis: another process answers on this port")
	}
	return nil
}

// natsReady reads the server's INFO, checks that it is our server (named
// tag) with JetStream, and completes a CONNECT/PING/PONG exchange.
func natsReady(ctx context.Context, addr, tag string, _ int) error {
	conn, r, err := dial(ctx, addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	js, ok := strings.CutPrefix(strings.TrimSpace(line), "INFO ")
	if !ok {
		return fmt.Errorf("nats: expected INFO, got %q", line)
	}
	var info struct {
		Name      string `json:"server_name"`
		JetStream bool   `json:"jetstream"`
	}
	if err := json.Unmarshal([]byte(js), &info); err != nil {
		return fmt.Errorf("nats: INFO: %w", err)
	}
	if info.Name != tag {
		return errors.New("nats: another server answers on this port")
	}
	if !info.JetStream {
		return errors.New("nats: JetStream not enabled yet")
	}
	if _, err := conn.Write([]byte("CONNECT {\"verbose\":false}\r\nPING\r\n")); err != nil {
		return err
	}
	line, err = r.ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "PONG" {
		return fmt.Errorf("nats: expected PONG, got %q", line)
	}
	return nil
}

// dial connects to addr with ctx's deadline applied to the whole exchange.
func dial(ctx context.Context, addr string) (net.Conn, *bufio.Reader, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	return conn, bufio.NewReader(conn), nil
}
