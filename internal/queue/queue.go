package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Attribute keys used in log records.
const (
	logKeyURL   = "nats_url"
	logKeyError = "error"
)

// Defaults for zero fields of [Options].
const (
	DefaultReadyTimeout   = 30 * time.Second
	DefaultReconnectWait  = 250 * time.Millisecond
	DefaultPingTimeout    = 2 * time.Second
	defaultDrainTimeout   = 10 * time.Second
	defaultConnectTimeout = 5 * time.Second
	jetStreamAskTimeout   = 5 * time.Second
	jetStreamAskPause     = 250 * time.Millisecond
)

// ErrNotConnected is returned (wrapped) by [Conn.Ping] when the client is
// not currently connected to a server, for example while it reconnects.
var ErrNotConnected = errors.New("queue: not connected to NATS")

// Options configures [Open]. The zero value starts an embedded server with
// its files in the current directory's "jetstream" folder; Sluice always sets
// DataDir.
type Options struct {
	// URL names an external NATS server or cluster ("nats://host:4222",
	// several separated by commas). If empty, an embedded server is started.
	URL string

	// DataDir is the directory under which the embedded server keeps
	// JetStream's files (in DataDir/jetstream). Ignored when URL is set.
	DataDir string

	// ListenAddr, if set ("127.0.0.1:4222", port 0 for any free port),
	// makes the embedded server also accept NATS clients over TCP, so
	// other tools (the nats CLI) can inspect it. If empty, the embedded
	// server opens no listener. Ignored when URL is set.
	ListenAddr string

	// Replicas is the number of copies JetStream keeps of every stream
	// (and consumer) made through [Conn.EnsureStream]: 1 to 5, and 1 with
	// the embedded server. A stream that exists with another number is
	// updated to this one, and the cluster moves its data. If zero, 1.
	Replicas int

	// StreamPrefix is prepended to names by [Conn.Name]; see the package
	// documentation. It may hold only ASCII letters, digits, '_' and '-'.
	StreamPrefix string

	// Logger receives connection events and the embedded server's log.
	// If nil, nothing is logged.
	Logger *slog.Logger

	// ReadyTimeout bounds how long Open waits for the embedded server to be
	// ready, or for the first connection to an external one, and then for
	// JetStream to answer.
	// If zero, DefaultReadyTimeout is used.
	ReadyTimeout time.Duration

	// ReconnectWait is the pause between attempts to reconnect to an
	// external server; reconnection never gives up.
	// If zero, DefaultReconnectWait is used.
	ReconnectWait time.Duration
}

// Conn is an open connection to JetStream, embedded or external.
// It is safe for concurrent use. Create it with [Open]; the zero value is not
// usable.
type Conn struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	srv    *server.Server // nil when external
	prefix string
	log    *slog.Logger
	closed chan struct{} // closed by nats when the connection is closed
	opts   Options       // as given to Open, for extra connections

	closeOnce sync.Once
	closeErr  error
}

// Open connects to JetStream as opts describe and returns once it can be
// used: the embedded server is ready, or the external server answered and has
// JetStream enabled. If the external server cannot be reached at first, Open
// fails rather than waiting; after that, the Conn reconnects forever.
func Open(ctx context.Context, opts Options) (*Conn, error) {
	if err := validPrefix(opts.StreamPrefix); err != nil {
		return nil, err
	}
	opts.Replicas = cmp.Or(opts.Replicas, 1)
	if opts.Replicas < 1 || opts.Replicas > 5 || (opts.URL == "" && opts.Replicas > 1) {
		return nil, fmt.Errorf("queue: %d replicas: want 1 to 5, and 1 with the embedded server", opts.Replicas)
	}
	opts.ReadyTimeout = cmp.Or(opts.ReadyTimeout, DefaultReadyTimeout)
	opts.ReconnectWait = cmp.Or(opts.ReconnectWait, DefaultReconnectWait)
	c := &Conn{
		prefix: opts.StreamPrefix,
		log:    opts.Logger,
		closed: make(chan struct{}),
		opts:   opts,
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}

	var err error
	if opts.URL == "" {
		c.srv, err = startEmbedded(opts, c.log)
		if err != nil {
			return nil, err
		}
		c.nc, err = nats.Connect("", c.natsOptions(nats.InProcessServer(c.srv))...)
	} else {
		c.log = c.log.With(logKeyURL, redact(opts.URL))
		c.nc, err = nats.Connect(opts.URL, c.natsOptions(
			nats.MaxReconnects(-1),
			nats.ReconnectWait(opts.ReconnectWait),
			// Notice a silent peer (partition, dead host) within about
			// 30s rather than the client's default 4 minutes.
			nats.PingInterval(10*time.Second),
			nats.MaxPingsOutstanding(3),
			nats.Timeout(min(opts.ReadyTimeout, defaultConnectTimeout)),
		)...)
	}
	if err != nil {
		c.shutdownServer()
		return nil, fmt.Errorf("queue: connect: %w", err)
	}
	c.js, err = jetstream.New(c.nc)
	if err == nil {
		err = jetStreamReady(ctx, c.js, opts.ReadyTimeout)
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("queue: jetstream: %w", err)
	}
	return c, nil
}

// jetStreamReady asks the server for the account's JetStream information
// until it answers, so that Open fails now, not at the first publish, when
// the server has no JetStream. A server just started (or a cluster still
// electing its meta leader) may take several seconds over its first answer:
// each ask is bounded by a few seconds and asked again until timeout.
func jetStreamReady(ctx context.Context, js jetstream.JetStream, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		askCtx, askCancel := context.WithTimeout(ctx, jetStreamAskTimeout)
		_, err := js.AccountInfo(askCtx)
		askCancel()
		if err == nil || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
			errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(jetStreamAskPause):
		}
	}
}

func (c *Conn) natsOptions(extra ...nats.Option) []nats.Option {
	return append([]nats.Option{
		nats.Name("sluice"),
		nats.DrainTimeout(defaultDrainTimeout),
		nats.ClosedHandler(func(*nats.Conn) { close(c.closed) }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err == nil { // our own Close
				return
			}
			c.log.Warn("nats disconnected", logKeyError, err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			c.log.Info("nats reconnected", logKeyURL, redact(nc.ConnectedUrl()))
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			c.log.Error("nats async error", logKeyError, err)
		}),
	}, extra...)
}

// NATS returns the underlying core NATS connection.
func (c *Conn) NATS() *nats.Conn { return c.nc }

// JetStream returns the JetStream API bound to the connection.
func (c *Conn) JetStream() jetstream.JetStream { return c.js }

// Embedded reports whether the server runs inside this process.
func (c *Conn) Embedded() bool { return c.srv != nil }

// Name returns s with the Conn's StreamPrefix prepended. Use it for every
// stream name and subject; see the package documentation.
func (c *Conn) Name(s string) string { return c.prefix + s }

// Ping reports whether JetStream is usable right now: the client is
// connected and the server answers a JetStream account request. It is meant
// for readiness checks. If ctx has no deadline, DefaultPingTimeout applies.
func (c *Conn) Ping(ctx context.Context) error {
	if st := c.nc.Status(); st != nats.CONNECTED {
		return fmt.Errorf("%w (%s)", ErrNotConnected, st)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultPingTimeout)
		defer cancel()
	}
	if _, err := c.js.AccountInfo(ctx); err != nil {
		return fmt.Errorf("queue: ping jetstream: %w", err)
	}
	return nil
}

// Replicas returns the number of copies of every stream, Options.Replicas.
func (c *Conn) Replicas() int { return c.opts.Replicas }

// EnsureStream creates the stream cfg describes, or updates it to cfg if it
// already exists, and returns it. cfg.Name and cfg.Subjects are used as given:
// build them with [Conn.Name]. A zero cfg.Replicas is [Conn.Replicas], so a
// change of Options.Replicas reaches existing streams here.
//
// A stream that already has cfg's settings is not updated: nodes starting
// together would otherwise send an update each while another creates the
// stream, which NATS 2.9 servers answer by crashing.
func (c *Conn) EnsureStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	cfg.Replicas = cmp.Or(cfg.Replicas, c.opts.Replicas)
	s, err := c.js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if s, err = c.js.CreateStream(ctx, cfg); err != nil {
			// Another node made it first: its name is in use, or (NATS
			// 2.9, nodes starting together) its subjects overlap ours.
			if made, gerr := c.js.Stream(ctx, cfg.Name); gerr == nil {
				s, err = made, nil
			}
		}
	}
	if err == nil && !sameStream(s.CachedInfo().Config, cfg) {
		s, err = c.js.UpdateStream(ctx, cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("queue: ensure stream %q: %w", cfg.Name, err)
	}
	return s, nil
}

// sameStream reports whether the stream's settings, as the server reports
// them, already are those Sluice asks for in want: every field want sets
// has the server's value (fields want leaves zero take the server's
// default, which an update would not change).
func sameStream(have, want jetstream.StreamConfig) bool {
	w, h := reflect.ValueOf(&want).Elem(), reflect.ValueOf(have)
	for i := range w.NumField() {
		if w.Field(i).IsZero() {
			w.Field(i).Set(h.Field(i))
		}
	}
	return reflect.DeepEqual(want, have)
}

// Close drains the connection (pending publishes are flushed and
// subscriptions finish the messages they hold), then shuts the embedded
// server down and waits for it to stop. Calling Close more than once returns
// the first result.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		if err := c.nc.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			c.closeErr = fmt.Errorf("queue: drain: %w", err)
			c.nc.Close()
		}
		// Drain is asynchronous; nats closes the connection when it is
		// done or after DrainTimeout.
		select {
		case <-c.closed:
		case <-time.After(defaultDrainTimeout + time.Second):
			c.nc.Close()
		}
		c.shutdownServer()
	})
	return c.closeErr
}

func (c *Conn) shutdownServer() {
	if c.srv != nil {
		c.srv.Shutdown()
		c.srv.WaitForShutdown()
	}
}

func validPrefix(p string) error {
	for _, r := range p {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '_', r == '-':
		default:
			return fmt.Errorf("queue: stream prefix %q: only ASCII letters, digits, '_' and '-' are allowed", p)
		}
	}
	return nil
}
