package queue

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
)

// startEmbedded starts a NATS server with JetStream inside the process and
// waits, at most opts.ReadyTimeout, until it accepts clients.
func startEmbedded(opts Options, log *slog.Logger) (*server.Server, error) {
	sopts := &server.Options{
		ServerName: "sluice-embedded",
		JetStream:  true,
		StoreDir:   filepath.Join(opts.DataDir, "jetstream"),
		DontListen: opts.ListenAddr == "",
		NoSigs:     true, // signals belong to the Sluice process
	}
	if opts.ListenAddr != "" {
		host, port, err := net.SplitHostPort(opts.ListenAddr)
		if err != nil {
			return nil, fmt.Errorf("queue: listen address %q: %w", opts.ListenAddr, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 0 || p > 65535 {
			return nil, fmt.Errorf("queue: listen address %q: bad port", opts.ListenAddr)
		}
		if p == 0 {
			p = server.RANDOM_PORT // the server reads 0 as its default, 4222
		}
		sopts.Host, sopts.Port = host, p
	}
	srv, err := server.NewServer(sopts)
	if err != nil {
		return nil, fmt.Errorf("queue: embedded nats: %w", err)
	}
	srv.SetLoggerV2(serverLog{log.With("component", "nats-server")}, false, false, false)
	srv.Start()
	if !srv.ReadyForConnections(opts.ReadyTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("queue: embedded nats not ready after %s", opts.ReadyTimeout)
	}
	return srv, nil
}

// serverLog sends the embedded server's log to slog.
type serverLog struct{ l *slog.Logger }

// Noticef goes to Debug: the embedded server's start-up banner and notices
// would otherwise fill the first screen of every `sluice serve`.
func (s serverLog) Noticef(format string, v ...any) { s.l.Debug(fmt.Sprintf(format, v...)) }
func (s serverLog) Warnf(format string, v ...any)   { s.l.Warn(fmt.Sprintf(format, v...)) }
func (s serverLog) Fatalf(format string, v ...any)  { s.l.Error(fmt.Sprintf(format, v...)) }
func (s serverLog) Errorf(format string, v ...any)  { s.l.Error(fmt.Sprintf(format, v...)) }
func (s serverLog) Debugf(format string, v ...any)  { s.l.Debug(fmt.Sprintf(format, v...)) }
func (s serverLog) Tracef(format string, v ...any)  { s.l.Debug(fmt.Sprintf(format, v...)) }

// redact hides passwords and tokens in a server URL list before it is logged.
func redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil {
			parts[i] = "(unparsable url)"
			continue
		}
		if u.User != nil {
			if _, ok := u.User.Password(); !ok {
				u.User = url.User("REDACTED") // a lone user part is a token
			}
		}
		parts[i] = u.Redacted()
	}
	return strings.Join(parts, ",")
}
