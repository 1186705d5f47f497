package e2e

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
	c, err := tryStartChild(t, sluiceBinary(t), dataDir, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tryStartChild is startChild returning its error, for any goroutine:
// the caller builds the binary (sluiceBinary) on the test's goroutine.
func tryStartChild(t *testing.T, binary, dataDir string, extra ...string) (*child, error) {
	args := append([]string{"serve", "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0",
		"--data-dir", dataDir, "--log-format", "json"}, extra...)
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "SLUICE_DATABASE_URL=", "SLUICE_NATS_URL=", "SLUICE_REDIS_URL=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
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
		return c, nil
	case err := <-c.exited:
		logMu.Lock()
		defer logMu.Unlock()
		return nil, fmt.Errorf("sluice serve exited before serving: %v\n%s", err, c.logs)
	case <-time.After(2 * time.Minute):
		logMu.Lock()
		defer logMu.Unlock()
		return nil, fmt.Errorf("sluice serve did not start within 2m\n%s", c.logs)
	}
}

// request sends method path to the child with body (JSON unless empty)
// and the API key (unless empty), and returns the status and body; it
// fails the test when the request fails, so only the test's goroutine
// calls it (others call try).
func (c *child) request(t *testing.T, method, path, key, body string) (int, []byte) {
	t.Helper()
	code, b, err := c.try(method, path, key, body)
	if err != nil {
		t.Fatal(err)
	}
	return code, b
}

// adminKey creates an API key with the admin scope on the child (its first
// key needs none) and returns it.
func (c *child) adminKey(t *testing.T) string {
	t.Helper()
	code, body := c.request(t, "POST", "/v1/keys", "", `{"name":"admin","scopes":["admin"]}`)
	if code != 201 {
		t.Fatalf("create admin key = %d %s", code, body)
	}
	var admin struct{ Key string }
	_ = json.Unmarshal(body, &admin)
	return admin.Key
}

// try is request returning its error, for any goroutine.
func (c *child) try(method, path, key, body string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.httpURL+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// TestKillNineKeepsRecords acknowledges records, kills the process with
// SIGKILL at once, restarts it on the same data dir and finds every record.
func TestKillNineKeepsRecords(t *testing.T) {
	enginetest.Faults(t)
	t.Parallel()
	dataDir := t.TempDir()
	c := startChild(t, dataDir)

	admin := c.adminKey(t)

	const n = 40
	var wg sync.WaitGroup
	acked := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			code, body, err := c.try("POST", "/v1/keys", admin, fmt.Sprintf(`{"name":"k%d","scopes":["notify:send"]}`, i))
			if err != nil {
				t.Errorf("create key %d: %v", i, err)
			} else if code == 201 {
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
	code, body := c2.request(t, "GET", "/v1/keys", admin, "")
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
