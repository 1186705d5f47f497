package enginetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Timings of a [Process]. Generous, because CI machines are small and tests
// run with -race in parallel.
const (
	readyTimeout = 30 * time.Second       // from exec to answering
	stopTimeout  = 10 * time.Second       // from SIGTERM to SIGKILL
	pollInterval = 20 * time.Millisecond  // between readiness probes
	probeTimeout = 500 * time.Millisecond // one readiness probe
	spareTries   = 5                      // ports tried by the first start
	outputTail   = 16 << 10               // bytes of output kept for messages
)

// errExited reports that the process ended before it was ready, which on a
// first start usually means another process took the spare port first.
var errExited = errors.New("process exited before it was ready")

// spec describes one kind of engine process.
type spec struct {
	name string // for messages: "redis-server"
	path string // binary: absolute, or looked up in PATH
	url  func(addr string) string
	// args builds the command line. tag is unique to the Process; engines
	// that can carry a name take it, so that ready can tell our process
	// from another that holds the port.
	args func(port int, dir, tag string) []string
	// ready probes addr once and returns nil if the process answering
	// there is ours (its pid or tag) and ready for clients.
	ready func(ctx context.Context, addr, tag string, pid int) error
	// prepare, if set, adjusts the command before each start (credentials).
	prepare func(cmd *exec.Cmd)
	// stopSignal asks for a graceful shutdown; SIGTERM if zero.
	stopSignal syscall.Signal
}

// Process is an engine server (redis-server, nats-server, postgres) run by
// one test on a spare loopback port, with its data in a directory of its
// own, so that the test may stop, kill and restart it without disturbing the
// machine's shared engines. The process is stopped when the test ends.
//
// Its methods are safe for concurrent use; [Process.Start] must be called
// from the test's goroutine, because it fails the test when the process does
// not come back.
type Process struct {
	t    testing.TB
	spec spec
	path string
	dir  string
	port int
	tag  string
	out  *tail

	hold *portHold // the port, held while the process is stopped

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited and been waited for
}

// startProcess runs the engine sp describes on a spare port and waits until
// it answers. It skips the test (fails it when CI=true) if the binary is
// missing, and retries with another port if the process dies at start, since
// the spare port may have been taken between picking it and binding it.
func startProcess(t testing.TB, sp spec, dir string) *Process {
	t.Helper()
	path := findBinary(t, sp.path)
	p := &Process{t: t, spec: sp, path: path, dir: dir, tag: newTag(), out: &tail{max: outputTail}}
	t.Cleanup(func() {
		p.Stop()
		p.mu.Lock()
		p.hold.release()
		p.mu.Unlock()
		if t.Failed() {
			t.Logf("%s output (tail):\n%s", sp.name, p.out)
		}
	})
	for try := 1; ; try++ {
		h, err := holdSparePort()
		if err != nil {
			t.Fatalf("%s: pick a spare port: %v", sp.name, err)
		}
		p.port, p.hold = h.port, h
		err = p.launch()
		if err == nil {
			return p
		}
		if !errors.Is(err, errExited) || try == spareTries {
			t.Fatalf("%s on port %d: %v\noutput:\n%s", sp.name, p.port, err, p.out)
		}
	}
}

// Addr returns the process's "127.0.0.1:port" address, stable across restarts.
func (p *Process) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port))
}

// URL returns the client URL of the process ("redis://127.0.0.1:port",
// "nats://127.0.0.1:port", "postgres://..."), stable across restarts.
func (p *Process) URL() string { return p.spec.url(p.Addr()) }

// Dir returns the process's data directory, kept across restarts.
func (p *Process) Dir() string { return p.dir }

// Start starts the stopped process again on the same port and data
// directory, and waits until it answers. It fails the test if the process is
// running or does not come back.
func (p *Process) Start() {
	p.t.Helper()
	p.mu.Lock()
	running := p.runningLocked()
	p.mu.Unlock()
	if running {
		p.t.Fatalf("%s: Start while it is running", p.spec.name)
	}
	// The port is ours, but the old socket may linger for a moment or
	// another test may have grabbed it as a "spare": retry until the
	// deadline.
	deadline := time.Now().Add(readyTimeout)
	for {
		err := p.launch()
		if err == nil {
			return
		}
		if !errors.Is(err, errExited) || time.Now().After(deadline) {
			p.t.Fatalf("%s: restart on port %d: %v\noutput:\n%s", p.spec.name, p.port, err, p.out)
		}
		<-time.After(10 * pollInterval)
	}
}

// Stop ends the process gracefully: SIGTERM, then SIGKILL if it has not
// exited within 10 seconds. It waits for the process to exit. Stopping a
// stopped process does nothing.
func (p *Process) Stop() { p.end(cmp.Or(p.spec.stopSignal, syscall.SIGTERM)) }

// Kill ends the process and its children at once with SIGKILL, as a crash
// would, and waits for it to exit. Killing a stopped process does nothing.
func (p *Process) Kill() { p.end(syscall.SIGKILL) }

func (p *Process) end(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.runningLocked() {
		p.cmd = nil
		return
	}
	if sig == syscall.SIGKILL {
		_ = syscall.Kill(-p.cmd.Process.Pid, sig) // the whole process group
	} else {
		_ = p.cmd.Process.Signal(sig)
		select {
		case <-p.done:
		case <-time.After(stopTimeout):
			_ = p.cmd.Process.Kill()
		}
	}
	<-p.done
	p.cmd = nil
	// Hold the port until Start, so that no other test takes it meanwhile;
	// with SO_REUSEADDR, since the old connections may linger in TIME_WAIT.
	// Connections to it are still refused, as to a stopped server's port.
	if h, err := holdPort(p.port, true); err == nil {
		p.hold = h
	}
}

func (p *Process) runningLocked() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// launch execs the process on p.port and waits until it answers, or fails
// with errExited if it dies first.
func (p *Process) launch() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd := exec.Command(p.path, p.spec.args(p.port, p.dir, p.tag)...)
	cmd.Dir = p.dir
	cmd.Stdout, cmd.Stderr = p.out, p.out
	// If the test binary dies, so does the engine.
	// Its own process group lets Kill take down its children too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if p.spec.prepare != nil {
		p.spec.prepare(cmd)
	}
	fmt.Fprintf(p.out, "--- start %s on port %d\n", p.spec.name, p.port)
	p.hold.release()
	p.hold = nil
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	p.cmd, p.done = cmd, done

	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var last error
	for {
		pctx, pcancel := context.WithTimeout(ctx, probeTimeout)
		last = p.spec.ready(pctx, p.Addr(), p.tag, cmd.Process.Pid)
		pcancel()
		if last == nil {
			return nil
		}
		select {
		case <-done:
			p.cmd = nil
			return fmt.Errorf("%w (%s)", errExited, cmd.ProcessState)
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			<-done
			p.cmd = nil
			return fmt.Errorf("not ready after %s: %v", readyTimeout, last)
		case <-tick.C:
		}
	}
}

// newTag returns a name unique to one Process.
func newTag() string {
	return fmt.Sprintf("sluicetest-%d-%d", os.Getpid(), tagSeq.Add(1))
}

var tagSeq atomic.Int64

// DeadAddr returns "127.0.0.1:port" of a listener that holds the port for
// the test and closes every connection it accepts at once: a peer that
// fails every exchange, which no other test can take the port of (as it
// could a port picked free and left closed).
func DeadAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// findBinary returns the path of the named program, looked up in PATH and
// then in /usr/local/bin, /usr/sbin and /usr/bin. If it is in none of them,
// it skips the test, or fails it when CI=true.
func findBinary(t testing.TB, name string) string {
	t.Helper()
	if path, err := exec.LookPath(name); err == nil {
		return path
	}
	for _, dir := range []string{"/usr/local/bin", "/usr/sbin", "/usr/bin"} {
		if path, err := exec.LookPath(filepath.Join(dir, name)); err == nil {
			return path
		}
	}
	missing(t, name+" is not installed (not in PATH, /usr/local/bin, /usr/sbin or /usr/bin)")
	return ""
}

// missing skips the test, or fails it when CI=true, because an engine
// binary is not installed.
func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s, and CI=true: this test needs it", why)
	}
	t.Skipf("%s: skipping (CI=true turns this into a failure)", why)
}

// tail keeps the last max bytes written to it. It is safe for concurrent use.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (w *tail) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	if over := len(w.buf) - w.max; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(b), nil
}

func (w *tail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}
