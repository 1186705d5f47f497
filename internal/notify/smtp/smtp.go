// Package smtp sends email notifications over SMTP (RFC 5321) to a relay:
// STARTTLS (or implicit TLS), AUTH PLAIN or LOGIN, connections kept open
// and reused between messages, a Message-ID derived from the delivery so a
// retried message carries the same one, List-Unsubscribe and
// List-Unsubscribe-Post (RFC 8058) on marketing mail, and DSN parameters
// (RFC 3461) whose envelope id is "notification_id:channel", so a bounce
// names the delivery it belongs to. A message with an HTML part goes out as
// multipart/alternative (text, then HTML), each part quoted-printable.
//
// Replies are classified from the protocol's own codes: 4xx (and enhanced
// 4.x.x) are temporary, 5xx permanent, except authentication and relay
// policy refusals (5.7.0, 5.7.8, 530, 535), which say the relay is
// misconfigured, not the message: they are temporary, so the circuit
// breaker opens and messages wait or fail over instead of being
// dead-lettered one by one.
//
// [Client] is a notify.Provider for the email channel.
package smtp

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-sasl"
	gosmtp "github.com/emersion/go-smtp"

	"github.com/sluicehq/sluice/internal/notify"
)

// TLS modes.
const (
	TLSStartTLS = "starttls" // plain connection upgraded with STARTTLS (required)
	TLSImplicit = "tls"      // TLS from the first byte (port 465)
	TLSNone     = "none"     // no TLS: only for a relay on the same host
)

// Options configure a Client. Addr and From are required.
type Options struct {
	// Name identifies the provider in deliveries and metrics. If empty,
	// "smtp".
	Name string
	// Addr is the relay's host:port.
	Addr string
	// TLS is TLSStartTLS, TLSImplicit or TLSNone. If empty, TLSStartTLS.
	TLS string
	// TLSConfig configures TLS. If nil, one verifying the relay's host
	// name from Addr.
	TLSConfig *tls.Config
	// Username and Password authenticate when Username is set, with AUTH
	// PLAIN when the relay offers it and LOGIN otherwise (or Auth).
	Username, Password string
	// Auth forces a mechanism: "plain" or "login". If empty, chosen from
	// what the relay offers.
	Auth string
	// From is the envelope sender and From header address; FromName the
	// display name.
	From, FromName string
	// LocalName is sent in EHLO. If empty, "localhost".
	LocalName string
	// MessageIDDomain is the right-hand side of Message-IDs. If empty,
	// From's domain.
	MessageIDDomain string
	// UnsubscribeURL, for marketing mail, is the https URL of
	// List-Unsubscribe (with List-Unsubscribe-Post One-Click); "{user_id}",
	// "{notification_id}" and "{type}" are replaced, URL-escaped. If empty,
	// marketing mail gets a mailto: List-Unsubscribe to UnsubscribeMailto
	// (default From) only.
	UnsubscribeURL    string
	UnsubscribeMailto string
	// MaxIdle is how many connections are kept open between messages. If
	// zero, 4.
	MaxIdle int
	// IdleTimeout closes a kept connection unused for this long (relays
	// drop idle clients after a few minutes). If zero, 30 seconds.
	IdleTimeout time.Duration
	// DialTimeout bounds connecting. If zero, 10 seconds.
	DialTimeout time.Duration
	// Now is the clock for Date headers and idle connections. If nil,
	// time.Now.
	Now func() time.Time
}

// Client sends messages to one SMTP relay. It is safe for concurrent use;
// build it with New and Close it to close kept connections.
type Client struct {
	opts   Options
	host   string
	domain string
	mu     sync.Mutex
	idle   []*conn
	closed bool
}

var _ notify.Provider = (*Client)(nil)

// conn is one open SMTP session.
type conn struct {
	c        *gosmtp.Client
	raw      net.Conn
	lastUsed time.Time
}

// New checks opts and returns a Client. It does not connect.
func New(opts Options) (*Client, error) {
	opts.Name = cmp.Or(opts.Name, "smtp")
	opts.TLS = cmp.Or(opts.TLS, TLSStartTLS)
	opts.LocalName = cmp.Or(opts.LocalName, "localhost")
	opts.MaxIdle = cmp.Or(opts.MaxIdle, 4)
	opts.IdleTimeout = cmp.Or(opts.IdleTimeout, 30*time.Second)
	opts.DialTimeout = cmp.Or(opts.DialTimeout, 10*time.Second)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	host, _, err := net.SplitHostPort(opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("smtp addr %q: %w", opts.Addr, err)
	}
	_, domain, ok := strings.Cut(opts.From, "@")
	if !ok || domain == "" {
		return nil, fmt.Errorf("smtp from %q: not an email address", opts.From)
	}
	switch opts.TLS {
	case TLSStartTLS, TLSImplicit, TLSNone:
	default:
		return nil, fmt.Errorf("smtp tls %q: want starttls, tls or none", opts.TLS)
	}
	switch opts.Auth {
	case "", "plain", "login":
	default:
		return nil, fmt.Errorf("smtp auth %q: want plain or login", opts.Auth)
	}
	if opts.TLSConfig == nil {
		opts.TLSConfig = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	return &Client{opts: opts, host: host, domain: cmp.Or(opts.MessageIDDomain, domain)}, nil
}

// Name returns the provider's name.
func (c *Client) Name() string { return c.opts.Name }

// NeedsContact is true: a message needs an email address.
func (c *Client) NeedsContact() bool { return true }

// Send delivers m to its relay. A kept connection the relay closed
// meanwhile is replaced once, before anything of the message was sent.
func (c *Client) Send(ctx context.Context, m notify.Message) (notify.Receipt, error) {
	msg, id, err := c.compose(m)
	if err != nil {
		return notify.Receipt{}, notify.Permanent(err)
	}
	for try := 0; ; try++ {
		cn, reused, err := c.get(ctx)
		if err != nil {
			return notify.Receipt{}, classify(err)
		}
		stop := context.AfterFunc(ctx, func() { _ = cn.raw.SetDeadline(time.Unix(1, 0)) })
		if dl, ok := ctx.Deadline(); ok {
			_ = cn.raw.SetDeadline(dl)
		}
		started, err := c.transact(cn, m, msg)
		stopped := stop()
		_ = cn.raw.SetDeadline(time.Time{})
		if err == nil {
			c.put(cn)
			return notify.Receipt{ProviderMessageID: id}, nil
		}
		var se *gosmtp.SMTPError
		if errors.As(err, &se) && stopped {
			// The relay refused this message; the session is still good.
			if cn.c.Reset() == nil {
				c.put(cn)
			} else {
				cn.c.Close()
			}
		} else {
			cn.c.Close()
		}
		if ctx.Err() != nil {
			return notify.Receipt{}, notify.Temporary(fmt.Errorf("smtp: %w", ctx.Err()), 0)
		}
		if reused && !started && se == nil && try == 0 {
			continue // a stale kept connection: nothing was sent yet
		}
		return notify.Receipt{}, classify(err)
	}
}

// transact runs one mail transaction. started reports whether DATA began
// (after which a retry could duplicate the message).
func (c *Client) transact(cn *conn, m notify.Message, msg []byte) (started bool, err error) {
	mo := &gosmtp.MailOptions{Return: gosmtp.DSNReturnHeaders, EnvelopeID: m.IdempotencyKey}
	if ok, _ := cn.c.Extension("DSN"); !ok {
		mo = nil
	}
	if err := cn.c.Mail(c.opts.From, mo); err != nil {
		return false, err
	}
	var ro *gosmtp.RcptOptions
	if mo != nil {
		ro = &gosmtp.RcptOptions{Notify: []gosmtp.DSNNotify{gosmtp.DSNNotifyFailure, gosmtp.DSNNotifyDelayed}}
	}
	if err := cn.c.Rcpt(m.To, ro); err != nil {
		return false, err
	}
	w, err := cn.c.Data()
	if err != nil {
		return false, err
	}
	if _, err := w.Write(msg); err != nil {
		return true, err
	}
	return true, w.Close()
}

// get returns a kept connection, or dials a new one.
func (c *Client) get(ctx context.Context) (*conn, bool, error) {
	now := c.opts.Now()
	c.mu.Lock()
	for len(c.idle) > 0 {
		cn := c.idle[len(c.idle)-1]
		c.idle = c.idle[:len(c.idle)-1]
		if now.Sub(cn.lastUsed) < c.opts.IdleTimeout {
			c.mu.Unlock()
			return cn, true, nil
		}
		cn.c.Close()
	}
	c.mu.Unlock()
	cn, err := c.dial(ctx)
	return cn, false, err
}

// put keeps cn for the next message, or closes it when enough are kept.
func (c *Client) put(cn *conn) {
	cn.lastUsed = c.opts.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || len(c.idle) >= c.opts.MaxIdle {
		_ = cn.c.Quit()
		return
	}
	c.idle = append(c.idle, cn)
}

// Close closes every kept connection. Sends after Close still work but
// keep nothing.
func (c *Client) Close() error {
	c.mu.Lock()
	idle := c.idle
	c.idle, c.closed = nil, true
	c.mu.Unlock()
	for _, cn := range idle {
		_ = cn.c.Quit()
	}
	return nil
}

func (c *Client) dial(ctx context.Context) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	defer cancel()
	var raw net.Conn
	var err error
	d := &net.Dialer{}
	if c.opts.TLS == TLSImplicit {
		raw, err = (&tls.Dialer{NetDialer: d, Config: c.opts.TLSConfig}).DialContext(ctx, "tcp", c.opts.Addr)
	} else {
		raw, err = d.DialContext(ctx, "tcp", c.opts.Addr)
	}
	if err != nil {
		return nil, fmt.Errorf("smtp dial: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = raw.SetDeadline(dl)
	}
	var cl *gosmtp.Client
	if c.opts.TLS == TLSStartTLS {
		cl, err = gosmtp.NewClientStartTLS(raw, c.opts.TLSConfig)
		if err != nil {
			raw.Close()
			return nil, fmt.Errorf("smtp starttls: %w", err)
		}
	} else {
		cl = gosmtp.NewClient(raw)
	}
	// EHLO with our name (after STARTTLS the client says hello again).
	if err := cl.Hello(c.opts.LocalName); err != nil {
		cl.Close()
		return nil, err
	}
	if c.opts.Username != "" {
		if err := cl.Auth(c.auth(cl)); err != nil {
			cl.Close()
			return nil, fmt.Errorf("smtp auth: %w", err)
		}
	}
	_ = raw.SetDeadline(time.Time{})
	// After STARTTLS the client talks over its own TLS conn; deadlines on
	// raw still apply to it, since TLS reads and writes go through raw.
	return &conn{c: cl, raw: raw}, nil
}

// auth picks the SASL mechanism.
func (c *Client) auth(cl *gosmtp.Client) sasl.Client {
	mech := c.opts.Auth
	if mech == "" {
		mech = "login"
		if cl.SupportsAuth("PLAIN") {
			mech = "plain"
		}
	}
	if mech == "plain" {
		return sasl.NewPlainClient("", c.opts.Username, c.opts.Password)
	}
	return sasl.NewLoginClient(c.opts.Username, c.opts.Password)
}
