package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// sluiceBinary builds cmd/sluice once per test run.
func sluiceBinary(t *testing.T) string { return enginetest.SluiceBinary(t) }

// child is a `sluice serve` in a process of its own.
type child struct {
	cmd      *exec.Cmd
	httpURL  string
	grpcAddr string
	logs     *bytes.Buffer
	exited   chan error
}

// startChild runs `sluice serve` on spare ports with dataDir (and extra
// flags) and waits for its "sluice serving" log line to learn the HTTP
// address.
func startChild(t *testing.T, dataDir string, extra ...string) *child {
	t.Helper()
	args := append([]string{"serve", "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0",
		"--data-dir", dataDir, "--log-format", "json"}, extra...)
	cmd := exec.Command(sluiceBinary(t), args...)
	cmd.Env = append(os.Environ(), "SLUICE_DATABASE_URL=", "SLUICE_NATS_URL=", "SLUICE_REDIS_URL=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, logs: &bytes.Buffer{}, exited: make(chan error, 1)}
	addr := make(chan [2]string, 1)
	var logMu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Bytes()
			logMu.Lock()
			c.logs.Write(line)
			c.logs.WriteByte('\n')
			logMu.Unlock()
			var entry struct{ Msg, HTTP, GRPC string }
			if json.Unmarshal(line, &entry) == nil && entry.Msg == "sluice serving" {
				addr <- [2]string{entry.HTTP, entry.GRPC}
			}
		}
		c.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	select {
	case a := <-addr:
		c.httpURL, c.grpcAddr = "http://"+a[0], a[1]
	case err := <-c.exited:
		t.Fatalf("sluice serve exited before serving: %v\n%s", err, c.logs)
	case <-time.After(60 * time.Second):
		t.Fatalf("sluice serve did not start within 60s\n%s", c.logs)
	}
	return c
}

func (c *child) request(t *testing.T, method, path, key, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.httpURL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestKillNineKeepsRecords acknowledges records, kills the process with
// SIGKILL at once, restarts it on the same data dir and finds every record.
func TestKillNineKeepsRecords(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	c := startChild(t, dataDir)

	code, body := c.request(t, "POST", "/v1/keys", "", `{"name":"admin","scopes":["admin"]}`)
	if code != 201 {
		t.Fatalf("create admin key = %d %s", code, body)
	}
	var admin struct{ Key string }
	_ = json.Unmarshal(body, &admin)

	const n = 40
	var wg sync.WaitGroup
	acked := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			code, body := c.request(t, "POST", "/v1/keys", admin.Key, fmt.Sprintf(`{"name":"k%d","scopes":["notify:send"]}`, i))
			if code == 201 {
				var k struct{ ID string }
				_ = json.Unmarshal(body, &k)
				acked <- k.ID
			} else {
				t.Errorf("create key %d = %d %s", i, code, body)
			}
		})
	}
	wg.Wait()
	close(acked)
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.exited

	c2 := startChild(t, dataDir)
	code, body = c2.request(t, "GET", "/v1/keys", admin.Key, "")
	if code != 200 {
		t.Fatalf("list after restart = %d %s", code, body)
	}
	for id := range acked {
		if !strings.Contains(string(body), `"id":"`+id+`"`) {
			t.Errorf("acknowledged key %s lost after kill -9", id)
		}
	}
	_ = c2.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-c2.exited; err != nil {
		t.Errorf("after SIGTERM: %v, want exit 0\n%s", err, c2.logs)
	}
	if !strings.Contains(c2.logs.String(), `"msg":"stopped"`) {
		t.Errorf("no clean stop logged:\n%s", c2.logs)
	}
}
