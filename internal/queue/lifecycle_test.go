package queue

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice/internal/enginetest"
)

func TestEmbeddedPersistsAcrossReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := Options{DataDir: dir, StreamPrefix: "P_"}

	c, err := Open(t.Context(), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	first := c
	t.Cleanup(func() { first.Close() }) // in case the test stops early
	s, err := c.EnsureStream(t.Context(), streamConfig(c, "KEEP"))
	if err != nil {
		t.Fatalf("EnsureStream: %v", err)
	}
	publish(t, c, c.Name("keep.a"), "id-1", "one")
	publish(t, c, c.Name("keep.a"), "id-2", "two")
	if got := consume(t, s, 1); !slices.Equal(got, []string{"one"}) {
		t.Fatalf("consumed %q before reopen, want [one]", got)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := c.Ping(t.Context()); err == nil {
		t.Error("Ping after Close succeeded, want an error")
	}
	if _, err := os.Stat(filepath.Join(dir, "jetstream")); err != nil {
		t.Errorf("JetStream files are not in DataDir/jetstream: %v", err)
	}

	c = open(t, opts)
	s, err = c.JetStream().Stream(t.Context(), c.Name("KEEP"))
	if err != nil {
		t.Fatalf("stream after reopen: %v", err)
	}
	if n := s.CachedInfo().State.Msgs; n != 2 {
		t.Errorf("after reopen the stream holds %d messages, want 2", n)
	}
	// The durable consumer kept its acknowledgement: only "two" is left.
	if got := consume(t, s, 1); !slices.Equal(got, []string{"two"}) {
		t.Errorf("consumed %q after reopen, want [two]", got)
	}
	// Deduplication ids survive too, within the stream's window.
	if ack := publish(t, c, c.Name("keep.a"), "id-2", "two again"); !ack.Duplicate {
		t.Error("republishing id-2 after reopen: Duplicate = false, want true")
	}
}

func TestEmbeddedListener(t *testing.T) {
	t.Parallel()
	t.Run("none by default", func(t *testing.T) {
		t.Parallel()
		c := open(t, Options{DataDir: t.TempDir()})
		if addr := c.srv.Addr(); addr != nil {
			t.Errorf("embedded server listens on %v, want no listener", addr)
		}
	})
	t.Run("ListenAddr", func(t *testing.T) {
		t.Parallel()
		c := open(t, Options{DataDir: t.TempDir(), ListenAddr: "127.0.0.1:0"})
		addr, ok := c.srv.Addr().(*net.TCPAddr)
		if !ok || addr.Port == 0 {
			t.Fatalf("embedded server address = %v, want a TCP port", c.srv.Addr())
		}
		// Another client, over TCP, sees the same JetStream.
		s := ensureStream(t, c, "SHARED")
		other := open(t, Options{URL: "nats://" + addr.String(), StreamPrefix: c.prefix})
		publish(t, other, other.Name("shared.x"), "id-1", "over tcp")
		if got := consume(t, s, 1); !slices.Equal(got, []string{"over tcp"}) {
			t.Errorf("consumed %q, want [over tcp]", got)
		}
	})
}

// TestPingFollowsServer checks that readiness reflects the server's current
// state and that the Conn reconnects by itself.
func TestPingFollowsServer(t *testing.T) {
	t.Parallel()
	p := enginetest.StartNATS(t)
	logs := &recorder{}
	c := open(t, Options{URL: p.URL(), Logger: slog.New(logs)})
	if err := c.Ping(t.Context()); err != nil {
		t.Fatalf("Ping with the server up: %v", err)
	}

	p.Stop()
	err := waitPing(t, c, func(err error) bool { return err != nil })
	if !errors.Is(err, ErrNotConnected) {
		t.Logf("Ping failed with %v (not ErrNotConnected; acceptable)", err)
	}
	logs.wait(t, "nats disconnected")

	p.Start()
	waitPing(t, c, func(err error) bool { return err == nil })
	logs.wait(t, "nats reconnected")
}

// waitPing polls c.Ping until done accepts its result, and fails the test
// if that takes longer than 15 seconds.
func waitPing(t *testing.T, c *Conn, done func(error) bool) error {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		err := c.Ping(ctx)
		cancel()
		if done(err) {
			return err
		}
		if time.Now().After(deadline) {
			t.Fatalf("Ping still returns %v after 15s", err)
		}
		<-tick.C
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	refused := "nats://" + enginetest.RefusedAddr(t) // held: no other test can listen there
	tests := []struct {
		name string
		opts Options
	}{
		{name: "bad prefix", opts: Options{DataDir: t.TempDir(), StreamPrefix: "a.b"}},
		{name: "bad listen address", opts: Options{DataDir: t.TempDir(), ListenAddr: "nowhere"}},
		{name: "bad listen port", opts: Options{DataDir: t.TempDir(), ListenAddr: "127.0.0.1:http"}},
		{name: "nothing at URL", opts: Options{URL: refused, ReadyTimeout: 2 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Open(t.Context(), tt.opts)
			if err == nil {
				c.Close()
				t.Fatalf("Open(%+v) succeeded, want an error", tt.opts)
			}
		})
	}
}

func TestName(t *testing.T) {
	t.Parallel()
	c := &Conn{prefix: "T1_"}
	if got := c.Name("NOTIFY_EMAIL"); got != "T1_NOTIFY_EMAIL" {
		t.Errorf("Name(NOTIFY_EMAIL) = %q, want T1_NOTIFY_EMAIL", got)
	}
	if got := (&Conn{}).Name("notify.email"); got != "notify.email" {
		t.Errorf("Name with no prefix = %q, want notify.email", got)
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{name: "plain", in: "nats://h:4222", want: "nats://h:4222"},
		{name: "password", in: "nats://u:secret@h:4222", want: "nats://u:xxxxx@h:4222"},
		{name: "token", in: "nats://tok@h:4222", want: "nats://REDACTED@h:4222"},
		{name: "list", in: "nats://a:1, nats://u:p@b:2", want: "nats://a:1,nats://u:xxxxx@b:2"},
	}
	for _, tt := range tests {
		if got := redact(tt.in); got != tt.want {
			t.Errorf("%s: redact(%q) = %q, want %q", tt.name, tt.in, got, tt.want)
		}
	}
}

// recorder is a slog.Handler that keeps record messages for tests.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Message)
	return nil
}

// wait polls until msg has been logged, for at most 10 seconds.
func (r *recorder) wait(t *testing.T, msg string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		found := slices.Contains(r.msgs, msg)
		r.mu.Unlock()
		if found {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q not logged within 10s", msg)
		}
		<-time.After(10 * time.Millisecond)
	}
}

// TestOpenWithoutJetStream: Open asks the server for JetStream until it
// answers (a fresh server may be slow to), but a server that answers it
// has none fails Open at once instead of at the deadline.
func TestOpenWithoutJetStream(t *testing.T) {
	t.Parallel()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := Open(ctx, Options{URL: srv.ClientURL(), ReadyTimeout: time.Minute})
	if err == nil {
		c.Close()
		t.Fatal("Open on a server without JetStream succeeded")
	}
	if !errors.Is(err, jetstream.ErrJetStreamNotEnabled) && !errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		t.Fatalf("Open: %v, want JetStream not enabled", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Open waited for the deadline: %v", err)
	}
}
