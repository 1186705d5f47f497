package enginetest

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/rueidis"
)

func TestSpawn(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		start  func(testing.TB) *Process
		scheme string
	}{
		{name: "redis", start: StartRedis, scheme: "redis://"},
		{name: "nats", start: StartNATS, scheme: "nats://"},
		{name: "postgres", start: StartPostgres, scheme: "postgres://postgres@"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := tt.start(t)
			addr := p.Addr()
			if want := tt.scheme + addr; !strings.HasPrefix(p.URL(), want) {
				t.Errorf("URL() = %q, want it to start with %q", p.URL(), want)
			}
			if !strings.HasPrefix(addr, "127.0.0.1:") {
				t.Errorf("Addr() = %q, want a loopback address", addr)
			}
			mustAnswer(t, p)

			p.Stop()
			mustRefuse(t, addr)
			p.Stop() // a second Stop does nothing

			p.Start()
			if p.Addr() != addr {
				t.Fatalf("after Start, Addr() = %q, want %q", p.Addr(), addr)
			}
			mustAnswer(t, p)

			p.Kill()
			mustRefuse(t, addr)
			p.Kill()

			p.Start()
			mustAnswer(t, p)
		})
	}
}

// mustAnswer checks that p's own process answers its readiness probe.
func mustAnswer(t *testing.T, p *Process) {
	t.Helper()
	p.mu.Lock()
	pid := p.cmd.Process.Pid
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.spec.ready(ctx, p.Addr(), p.tag, pid); err != nil {
		t.Fatalf("%s at %s does not answer: %v", p.spec.name, p.Addr(), err)
	}
}

// mustRefuse checks that nothing listens on addr once a process has been
// stopped: Stop and Kill return only after the process has exited.
func mustRefuse(t *testing.T, addr string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		conn.Close()
		t.Fatalf("%s still accepts connections after the process ended", addr)
	}
}

func TestSpawnRejectsAnotherProcessOnThePort(t *testing.T) {
	t.Parallel()
	p := StartRedis(t)
	n := StartNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// A probe for one engine must not accept a different process that holds
	// the port, or a restart that lost its port would look ready.
	if err := redisReady(ctx, p.Addr(), "", 1); err == nil {
		t.Error("redisReady accepted a redis-server with another pid")
	}
	if err := natsReady(ctx, n.Addr(), "someone-else", 0); err == nil {
		t.Error("natsReady accepted a nats-server with another name")
	}
}

func TestPostgresKeepsDataAcrossRestart(t *testing.T) {
	t.Parallel()
	p := StartPostgres(t)
	exec := func(sql string) {
		t.Helper()
		conn, err := pgx.Connect(t.Context(), p.URL())
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer conn.Close(t.Context())
		if _, err := conn.Exec(t.Context(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)")
	p.Kill()
	p.Start()
	exec("DO $$ BEGIN IF (SELECT v FROM kept) <> 42 THEN RAISE 'lost'; END IF; END $$")
}

// TestRedisCluster starts a 3-master cluster and checks that a client sees
// a Cluster and can write keys that land on different masters.
func TestRedisCluster(t *testing.T) {
	t.Parallel()
	c := StartRedisCluster(t, 3, 0)
	opt, err := rueidis.ParseURL(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	if len(opt.InitAddress) != 3 {
		t.Errorf("URL %s names %d addresses, want 3", c.URL(), len(opt.InitAddress))
	}
	opt.DisableCache = true
	rc, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("connect to %s: %v", c, err)
	}
	defer rc.Close()
	if rc.Mode() != rueidis.ClientModeCluster {
		t.Fatalf("client mode = %v, want cluster", rc.Mode())
	}
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		if err := rc.Do(t.Context(), rc.B().Set().Key(k).Value(k).Build()).Error(); err != nil {
			t.Errorf("SET %s: %v", k, err)
		}
	}
	if n := len(rc.Nodes()); n != 3 {
		t.Errorf("client knows %d nodes, want 3", n)
	}
}
