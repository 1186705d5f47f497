// Package redisconn connects Sluice to Redis or Valkey from a URL
// (standalone, Cluster, Sentinel, TLS) and, when the server is down at
// start, keeps trying in the background, so that a node started during a
// Redis outage serves on its local fallbacks and takes Redis up as soon as
// it answers, without a restart.
//
// A client cannot be made before the server answers: rueidis learns at the
// first dial whether it talks to a Cluster, a Sentinel group or a single
// server, and the commands it builds differ. So a [Conn] hands its client
// to its users when it has one ([Conn.OnConnect]) rather than at once; each
// user has a local way to go on until then.
package redisconn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// ErrNotConnected is the error of a [Conn] that has not reached Redis yet.
var ErrNotConnected = errors.New("redis not connected")

// Options configures Open.
type Options struct {
	// URL names the server (see [ClientOption]). Required.
	URL string
	// CAFile, if set, is a PEM file of the certificate authorities a
	// rediss:// server's certificate must chain to. If empty, the
	// system's.
	CAFile string
	// RetryInterval is the first wait between two attempts to connect
	// while Redis does not answer; each wait doubles up to MaxRetryInterval.
	// If zero, 250ms and 5s.
	RetryInterval, MaxRetryInterval time.Duration
	// Logger is told once when Redis does not answer at start and once
	// when it connects later. If nil, nothing is logged.
	Logger *slog.Logger
}

// Conn is a connection to Redis that may come after start. Open tries
// once; while that fails, Run tries again until it connects. It is safe
// for concurrent use.
type Conn struct {
	opt   rueidis.ClientOption
	opts  Options
	log   *slog.Logger
	start time.Time

	mu        sync.Mutex
	client    rueidis.Client // nil until connected
	err       error          // the last failed attempt, while client is nil
	onConnect []func(rueidis.Client)
	closed    bool
}

// Open parses opts and connects to Redis. It fails only when the URL or
// the CA file is wrong: when Redis does not answer, it returns a Conn that
// is not connected yet, and [Conn.Run] keeps trying.
func Open(opts Options) (*Conn, error) {
	opt, err := ClientOption(opts.URL, opts.CAFile)
	if err != nil {
		return nil, err
	}
	opts.RetryInterval = cmp.Or(opts.RetryInterval, 250*time.Millisecond)
	opts.MaxRetryInterval = max(cmp.Or(opts.MaxRetryInterval, 5*time.Second), opts.RetryInterval)
	c := &Conn{opt: opt, opts: opts, log: opts.Logger, start: time.Now()}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.connect() == nil {
		c.log.Warn("redis unreachable at start: serving on local fallbacks until it answers; connecting in the background",
			slog.String("addr", c.addrs()), slog.Any("error", c.err))
	}
	return c, nil
}

// addrs lists the addresses the URL names, for logs.
func (c *Conn) addrs() string { return strings.Join(c.opt.InitAddress, ",") }

// connect makes one attempt and returns the client, or nil when it
// failed. On success it calls the OnConnect functions registered so far.
func (c *Conn) connect() rueidis.Client {
	client, err := rueidis.NewClient(c.opt)
	c.mu.Lock()
	if err != nil || c.closed {
		if err == nil {
			client.Close()
			err = errors.New("closed")
		}
		c.err = err
		c.mu.Unlock()
		return nil
	}
	c.client, c.err = client, nil
	fns := c.onConnect
	c.onConnect = nil
	c.mu.Unlock()
	for _, fn := range fns {
		fn(client)
	}
	return client
}

// Run tries to connect, with waits growing from RetryInterval to
// MaxRetryInterval, until it connects or ctx ends; it returns nil at once
// when the Conn is connected. One attempt may outlast ctx by the dial
// timeout (5s unless the URL sets dial_timeout).
func (c *Conn) Run(ctx context.Context) error {
	wait := c.opts.RetryInterval
	for attempt := 2; c.Client() == nil; attempt++ {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		if client := c.connect(); client != nil {
			c.log.Info("redis connected", slog.String("addr", c.addrs()), slog.String("mode", string(client.Mode())),
				slog.Duration("after", time.Since(c.start).Round(time.Millisecond)), slog.Int("attempts", attempt))
			return nil
		}
		c.log.Debug("redis still unreachable", slog.Int("attempt", attempt), slog.Any("error", c.Err()))
		wait = min(2*wait, c.opts.MaxRetryInterval)
	}
	return nil
}

// OnConnect has fn called with the client once the Conn is connected: at
// once (before OnConnect returns) when it already is, otherwise from Run
// when it connects. fn is called once, and should not block: the next
// function waits for it.
func (c *Conn) OnConnect(fn func(rueidis.Client)) {
	c.mu.Lock()
	client := c.client
	if client == nil {
		c.onConnect = append(c.onConnect, fn)
	}
	c.mu.Unlock()
	if client != nil {
		fn(client)
	}
}

// Client returns the client, or nil while the Conn is not connected.
func (c *Conn) Client() rueidis.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.client
}

// Err returns nil once connected; before that, ErrNotConnected wrapping
// why the last attempt failed.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client != nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrNotConnected, c.err)
}

// Ping asks Redis for a PONG, for readiness checks. Before the Conn is
// connected it returns [Conn.Err].
func (c *Conn) Ping(ctx context.Context) error {
	client := c.Client()
	if client == nil {
		return c.Err()
	}
	return client.Do(ctx, client.B().Ping().Build()).Error()
}

// Close closes the client, if there is one; a Conn closed before it
// connects never will. Stop Run first.
func (c *Conn) Close() {
	c.mu.Lock()
	client := c.client
	c.closed, c.client, c.onConnect = true, nil, nil
	c.err = errors.New("closed")
	c.mu.Unlock()
	if client != nil {
		client.Close()
	}
}
