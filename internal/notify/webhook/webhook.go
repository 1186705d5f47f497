// Package webhook delivers notifications to a user's webhook_url as signed
// JSON, following the Standard Webhooks specification
// (https://www.standardwebhooks.com): every request carries
//
//	webhook-id:        notification_id:channel (the same on every retry)
//	webhook-timestamp: Unix seconds of this attempt
//	webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">
//
// keyed by the secret's bytes (a "whsec_" prefix followed by base64).
// Receivers verify the signature, refuse stale timestamps and drop repeated
// webhook-ids.
//
// Answers are classified as the issue asks: 2xx is sent; 408, 429 and 5xx
// (and timeouts and connection errors) are temporary, honouring
// Retry-After; 410 and every other status are permanent (redirects are not
// followed). Targets that resolve to an address that is not globally
// reachable (loopback, private, link-local, unspecified, and every other
// such range of the IANA special-purpose registries: internal/netguard)
// are refused, at connection time so DNS cannot rebind around the check,
// unless AllowPrivate is set.
//
// [Provider] is a notify.Provider for the webhook channel.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/internal/netguard"
	"github.com/sluicehq/sluice/internal/notify"
)

// SecretPrefix starts every Standard Webhooks secret.
const SecretPrefix = "whsec_"

// Provider sends webhooks. Build it with New; it is safe for concurrent use.
type Provider struct {
	key    []byte
	client *http.Client
	now    func() time.Time
}

// Options configure New.
type Options struct {
	// Secret is "whsec_" followed by base64 (24 to 64 random bytes).
	Secret string
	// AllowPrivate lets targets on loopback and private networks through.
	AllowPrivate bool
	// Timeout bounds one request. If zero, 10 seconds.
	Timeout time.Duration
	// Transport, if set, replaces the guarded transport (tests only: it
	// bypasses the private-target check).
	Transport http.RoundTripper
	// Now is the clock for webhook-timestamp. If nil, time.Now.
	Now func() time.Time
}

var _ notify.Provider = (*Provider)(nil)

// New returns a Provider, or an error for a malformed secret.
func New(o Options) (*Provider, error) {
	key, err := DecodeSecret(o.Secret)
	if err != nil {
		return nil, err
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	rt := o.Transport
	if rt == nil {
		rt = guardedTransport(o.AllowPrivate, timeout)
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	return &Provider{
		key: key,
		client: &http.Client{Transport: rt, Timeout: timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		now: now,
	}, nil
}

// DecodeSecret returns the HMAC key of a "whsec_..." secret.
func DecodeSecret(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, fmt.Errorf("webhook secret must start with %q", SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) < 16 || len(key) > 64 {
		return nil, fmt.Errorf("webhook secret: want %s followed by base64 of 16 to 64 bytes", SecretPrefix)
	}
	return key, nil
}

// NewSecret returns a fresh random secret.
func NewSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return SecretPrefix + base64.StdEncoding.EncodeToString(b[:])
}

// LoadOrCreateSecret returns the secret kept in file, creating the file
// (mode 0600) with a new secret when it does not exist. created reports
// that.
func LoadOrCreateSecret(file string) (secret string, created bool, err error) {
	b, err := os.ReadFile(file)
	if err == nil {
		secret = strings.TrimSpace(string(b))
		if _, err := DecodeSecret(secret); err != nil {
			return "", false, fmt.Errorf("%s: %w", file, err)
		}
		return secret, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", false, fmt.Errorf("read webhook secret: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return "", false, fmt.Errorf("create data dir: %w", err)
	}
	secret = NewSecret()
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) { // another process won the race
		return LoadOrCreateSecret(file)
	}
	if err != nil {
		return "", false, fmt.Errorf("create webhook secret: %w", err)
	}
	_, err = f.WriteString(secret + "\n")
	if err = errors.Join(err, f.Sync(), f.Close()); err != nil {
		return "", false, fmt.Errorf("write webhook secret: %w", err)
	}
	return secret, true, nil
}

// Sign returns the webhook-signature value for id, timestamp and body.
func Sign(key []byte, id string, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%d.", id, timestamp)
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// Verify checks a webhook-signature header (which may list several
// space-separated signatures) against id, timestamp and body.
func Verify(key []byte, id string, timestamp int64, body []byte, header string) bool {
	want := Sign(key, id, timestamp, body)
	for sig := range strings.FieldsSeq(header) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return true
		}
	}
	return false
}

// Payload is the JSON body: Standard Webhooks' type, timestamp and data.
type Payload struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      Data      `json:"data"`
}

// Data describes the notification.
type Data struct {
	NotificationID string          `json:"notification_id"`
	UserID         string          `json:"user_id"`
	Category       notify.Category `json:"category"`
	Subject        string          `json:"subject,omitempty"`
	Body           string          `json:"body"`
	Data           json.RawMessage `json:"data,omitempty"`
	Attempt        int             `json:"attempt"`
}

// Name implements notify.Provider.
func (p *Provider) Name() string { return "webhook" }

// NeedsContact implements notify.Provider: a webhook needs its URL.
func (p *Provider) NeedsContact() bool { return true }

// Send implements notify.Provider.
func (p *Provider) Send(ctx context.Context, m notify.Message) (notify.Receipt, error) {
	now := p.now()
	body, err := json.Marshal(Payload{Type: m.Type, Timestamp: now.UTC(), Data: Data{
		NotificationID: m.NotificationID, UserID: m.UserID, Category: m.Category, Subject: m.Subject,
		Body: m.Body, Data: m.Data, Attempt: m.Attempt}})
	if err != nil {
		return notify.Receipt{}, notify.Permanentf("encode webhook: %w", err)
	}
	id := m.IdempotencyKey
	return notify.Receipt{ProviderMessageID: id}, p.post(ctx, m.To, p.key, id, now, body)
}

// Post sends body to url as a Standard Webhook signed with secret (a
// "whsec_" secret of its own, such as an event subscription's) under
// webhook-id id, through the same guarded client as Send, and classifies
// the answer as Send does.
func (p *Provider) Post(ctx context.Context, url, secret, id string, body []byte) error {
	key, err := DecodeSecret(secret)
	if err != nil {
		return notify.Permanent(err)
	}
	return p.post(ctx, url, key, id, p.now(), body)
}

func (p *Provider) post(ctx context.Context, url string, key []byte, id string, now time.Time, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return notify.Permanentf("webhook url: %w", err)
	}
	ts := now.Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Sluice-Webhooks/1")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", Sign(key, id, ts, body))
	resp, err := p.client.Do(req)
	if err != nil {
		if errors.Is(err, errPrivateTarget) {
			return notify.Permanent(err)
		}
		return notify.Temporary(fmt.Errorf("webhook: %w", err), 0)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return classify(resp, now)
}

// classify maps an answer to nil, a temporary or a permanent error.
func classify(resp *http.Response, now time.Time) error {
	code := resp.StatusCode
	err := fmt.Errorf("webhook answered %d %s", code, http.StatusText(code))
	switch {
	case code >= 200 && code <= 299:
		return nil
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		return notify.Temporary(err, retryAfter(resp.Header.Get("Retry-After"), now))
	default:
		return notify.Permanent(err)
	}
}

// retryAfter reads Retry-After as seconds or an HTTP date; at most one hour.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && secs > 0 {
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), time.Hour)
}

var errPrivateTarget = errors.New("webhook target is a loopback or private address; set --allow-private-targets to allow it")

// guardedTransport dials only globally reachable addresses unless
// allowPrivate: every address a name resolves to is checked as it is
// dialled (netguard.Control), so DNS cannot rebind around the check.
func guardedTransport(allowPrivate bool, timeout time.Duration) *http.Transport {
	d := &net.Dialer{Timeout: min(timeout, 5*time.Second)}
	if !allowPrivate {
		d.Control = func(network, address string, c syscall.RawConn) error {
			if err := netguard.Control(network, address, c); err != nil {
				return fmt.Errorf("%w: %w", errPrivateTarget, err)
			}
			return nil
		}
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil // a proxy would hide the real target from the check
	t.DialContext = d.DialContext
	t.MaxIdleConnsPerHost = 16
	t.ResponseHeaderTimeout = timeout
	return t
}

// Private reports addresses webhooks may not reach by default: every range
// of the IANA special-purpose registries that is not globally reachable
// (loopback, private, link-local, shared, documentation, benchmarking,
// reserved, ...), multicast, and IPv4-mapped or NAT64 forms of them
// (netguard.Blocked).
func Private(ip netip.Addr) bool {
	_, blocked := netguard.Blocked(ip)
	return blocked
}
