package enginetest

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestNATSCluster: a three-server cluster keeps an R3 stream writable and
// readable while one server is killed, and the restarted server catches up.
func TestNATSCluster(t *testing.T) {
	t.Parallel()
	c := StartNATSCluster(t, 3)
	if got := strings.Count(c.URL(), ","); got != 2 {
		t.Fatalf("URL() = %q, want three comma-separated seeds", c.URL())
	}
	nc, err := nats.Connect(c.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3.>"}, Replicas: 3})
	if err != nil {
		t.Fatalf("create an R3 stream: %v", err)
	}
	publish := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			// A publish may fail while the stream elects a new leader:
			// retry each until the deadline.
			for {
				pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := js.Publish(pctx, "r3.x", []byte{byte(i)}, jetstream.WithMsgID(strconv.Itoa(i)))
				pcancel()
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("publish: %v", err)
				}
			}
		}
	}
	publish(0, 10)

	// Kill the server the client is on, so it has to move.
	victim := -1
	for i := range c.Len() {
		if strings.HasSuffix(nc.ConnectedUrl(), c.ServerURL(i)[len("nats://"):]) {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("connected to %s, which is none of %s", nc.ConnectedUrl(), c)
	}
	c.Kill(victim)
	if c.Server(victim) != nil {
		t.Error("Server() of a killed server is not nil")
	}
	publish(10, 20)
	c.Restart(victim)
	for {
		info, err := s.Info(ctx)
		if err == nil && info.State.Msgs == 20 && len(info.Cluster.Replicas) == 2 && allCurrent(info.Cluster.Replicas) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("stream after restart: %+v, %v; want 20 messages on 3 current servers", info, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func allCurrent(peers []*jetstream.PeerInfo) bool {
	for _, p := range peers {
		if !p.Current {
			return false
		}
	}
	return true
}

// TestNATSServerOnATakenPort is the race StartNATSCluster survives: a
// spare port taken by another process before the server binds it. The
// server must report it at once (it would otherwise wait a minute for a
// listener it never gets), so that the cluster can start on new ports.
func TestNATSServerOnATakenPort(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	c := &NATSCluster{t: t, name: newTag()}
	c.nodes = []*natsNode{{name: c.name + "-0", port: held.Addr().(*net.TCPAddr).Port, dir: t.TempDir()}}
	t.Cleanup(func() { c.Kill(0) })
	start := time.Now()
	err = c.start(0)
	if !errors.Is(err, errPortTaken) {
		t.Fatalf("start on a taken port: %v, want errPortTaken", err)
	}
	if waited := time.Since(start); waited > clusterTimeout/2 {
		t.Fatalf("start on a taken port returned after %s, not at once", waited)
	}
}
