package enginetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSCluster is a NATS JetStream cluster run by one test inside the test
// process, from the nats-server module Sluice builds with (the machine's
// packaged nats-server may be far older). Each server listens for clients
// and routes on spare loopback ports and keeps JetStream's files in a
// directory of its own, so the test may kill one server and start it again
// on the same ports and store. The servers are shut down when the test ends.
//
// Its methods are safe for concurrent use.
type NATSCluster struct {
	t     testing.TB
	name  string
	mu    sync.Mutex
	nodes []*natsNode
}

type natsNode struct {
	name        string
	port, route int
	dir         string
	srv         *server.Server // nil while killed
}

// StartNATSCluster runs n JetStream servers joined into one cluster (n = 1
// runs a single server without routes) and returns once every server
// accepts clients and JetStream answers on each, which in a cluster means
// the meta leader is elected.
func StartNATSCluster(t testing.TB, n int) *NATSCluster {
	t.Helper()
	c := &NATSCluster{t: t, name: newTag()}
	for i := range n {
		port, err := sparePort()
		if err == nil {
			var route int
			route, err = sparePort()
			c.nodes = append(c.nodes, &natsNode{name: fmt.Sprintf("%s-%d", c.name, i), port: port, route: route, dir: t.TempDir()})
		}
		if err != nil {
			t.Fatalf("nats cluster: pick a spare port: %v", err)
		}
	}
	t.Cleanup(func() {
		for i := range c.nodes {
			c.Kill(i)
		}
	})
	// A spare port is free when picked but may be taken by another test
	// process before the server binds it: then every server starts again on
	// new ports.
	for attempt := 1; ; attempt++ {
		err := c.startAll()
		if err == nil {
			break
		}
		if !errors.Is(err, errPortTaken) || attempt == 5 {
			t.Fatalf("nats cluster: %v", err)
		}
		for i, nd := range c.nodes {
			c.Kill(i)
			if nd.port, err = sparePort(); err == nil {
				nd.route, err = sparePort()
			}
			if err != nil {
				t.Fatalf("nats cluster: pick a spare port: %v", err)
			}
		}
	}
	for i := range c.nodes {
		c.waitJetStream(i)
	}
	return c
}

// startAll starts every server at once and returns the first error.
func (c *NATSCluster) startAll() error {
	var wg sync.WaitGroup
	errs := make([]error, len(c.nodes))
	for i := range c.nodes {
		wg.Go(func() { errs[i] = c.start(i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// errPortTaken reports a server that could not bind its client or route
// port.
var errPortTaken = errors.New("port taken")

// listenLog is the server's logger: it keeps the first fatal error (a
// port the server cannot bind is one, after which it never becomes ready)
// and drops the rest.
type listenLog struct {
	mu    sync.Mutex
	fatal error
}

func (l *listenLog) Fatalf(format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fatal != nil {
		return
	}
	l.fatal = fmt.Errorf(format, v...)
	if strings.Contains(format, "listening") {
		l.fatal = fmt.Errorf("%w: %w", errPortTaken, l.fatal)
	}
}

func (l *listenLog) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fatal
}

func (*listenLog) Noticef(string, ...any) {}
func (*listenLog) Warnf(string, ...any)   {}
func (*listenLog) Errorf(string, ...any)  {}
func (*listenLog) Debugf(string, ...any)  {}
func (*listenLog) Tracef(string, ...any)  {}

// start runs server i on its ports and store and waits until it accepts
// clients, or returns an error wrapping errPortTaken as soon as the server
// reports a port it cannot bind.
func (c *NATSCluster) start(i int) error {
	c.mu.Lock()
	nd := c.nodes[i]
	var routes []*url.URL
	if len(c.nodes) > 1 {
		for _, o := range c.nodes {
			routes = append(routes, &url.URL{Scheme: "nats", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(o.route))})
		}
	}
	c.mu.Unlock()
	opts := &server.Options{
		ServerName: nd.name,
		Host:       "127.0.0.1",
		Port:       nd.port,
		JetStream:  true,
		StoreDir:   filepath.Join(nd.dir, "jetstream"),
		NoSigs:     true,
		NoLog:      true,
	}
	if len(routes) > 0 {
		opts.Cluster = server.ClusterOpts{Name: c.name, Host: "127.0.0.1", Port: nd.route}
		opts.Routes = routes
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("server %s: %w", nd.name, err)
	}
	log := &listenLog{}
	srv.SetLogger(log, false, false)
	srv.Start()
	// In process, under -race and a loaded machine, a server of a cluster
	// (its routes, JetStream's store) has been seen to take over 30 s.
	deadline := time.Now().Add(clusterTimeout)
	for !srv.ReadyForConnections(10 * pollInterval) {
		if err := log.err(); err != nil {
			srv.Shutdown()
			return fmt.Errorf("server %s: %w", nd.name, err)
		}
		if time.Now().After(deadline) {
			srv.Shutdown()
			return fmt.Errorf("server %s not ready after %s", nd.name, clusterTimeout)
		}
	}
	c.mu.Lock()
	nd.srv = srv
	c.mu.Unlock()
	return nil
}

// waitJetStream polls server i until a client connected to it gets an
// answer to a JetStream account request, or fails the test at the
// deadline.
func (c *NATSCluster) waitJetStream(i int) {
	c.t.Helper()
	url := c.ServerURL(i)
	deadline := time.Now().Add(clusterTimeout)
	var last error
	for time.Now().Before(deadline) {
		if last = jetStreamAnswers(url); last == nil {
			return
		}
		time.Sleep(10 * pollInterval)
	}
	c.t.Fatalf("nats cluster server %d (%s): JetStream not ready after %s: %v", i, url, clusterTimeout, last)
}

func jetStreamAnswers(url string) error {
	nc, err := nats.Connect(url, nats.Timeout(probeTimeout), nats.NoReconnect())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err
}

// URL returns every server's client URL, comma-separated, as nats.Connect
// (and --nats-url) takes a list of seeds.
func (c *NATSCluster) URL() string {
	urls := make([]string, c.Len())
	for i := range urls {
		urls[i] = c.ServerURL(i)
	}
	return strings.Join(urls, ",")
}

// ServerURL returns server i's client URL, stable across restarts.
func (c *NATSCluster) ServerURL(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return "nats://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(c.nodes[i].port))
}

// Len returns the number of servers, running or not.
func (c *NATSCluster) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.nodes)
}

// Server returns server i, or nil while it is killed.
func (c *NATSCluster) Server(i int) *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].srv
}

// Kill shuts server i down and waits until it has stopped; its clients
// move to the other servers. Killing a killed server does nothing.
func (c *NATSCluster) Kill(i int) {
	c.mu.Lock()
	srv := c.nodes[i].srv
	c.nodes[i].srv = nil
	c.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// Restart starts killed server i again on its ports and store and waits
// until JetStream answers on it. It fails the test if the server is
// running or does not come back.
func (c *NATSCluster) Restart(i int) {
	c.t.Helper()
	if c.Server(i) != nil {
		c.t.Fatalf("nats cluster: Restart of server %d while it runs", i)
	}
	// The old listener's port may linger for a moment: retry until the
	// deadline.
	deadline := time.Now().Add(readyTimeout)
	for {
		err := c.start(i)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("nats cluster: restart server %d: %v", i, err)
		}
		time.Sleep(10 * pollInterval)
	}
	c.waitJetStream(i)
}

// String lists the servers' client addresses, for messages.
func (c *NATSCluster) String() string { return "nats cluster " + c.URL() }
