// Package apns sends push notifications through Apple's Push Notification
// service over HTTP/2 (POST /3/device/{token}) with token-based
// authentication: an ES256 JWT signed with the team's .p8 key, refreshed
// every 40 minutes (Apple refuses tokens older than an hour and throttles
// ones refreshed more often than every 20 minutes).
//
// apns-id is a UUID derived from the delivery's idempotency key
// ("notification_id:channel"), so every attempt at a delivery carries the
// same id; apns-collapse-id is the notification id, so a retried message
// that did arrive twice replaces itself on the device; apns-expiration is
// the notification's expires_at (0, "deliver once or drop", when it has
// none).
//
// 410 Unregistered (and BadDeviceToken) are permanent and wrap
// notify.ErrUnregistered, so the worker removes the token; 429 and 5xx are
// temporary; ExpiredProviderToken refreshes the JWT and is temporary.
//
// [Client] is a notify.Provider for the push channel.
package apns

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
)

// Options configure a Client. KeyID, TeamID, PrivateKey and Topic are
// required.
type Options struct {
	// Name identifies the provider. If empty, "apns".
	Name string
	// BaseURL is the service's root. If empty, https://api.push.apple.com
	// (https://api.sandbox.push.apple.com for development builds).
	BaseURL string
	KeyID   string
	TeamID  string
	// PrivateKey is the .p8 key file's PEM (PKCS#8, P-256).
	PrivateKey string
	// Topic is the app's bundle id.
	Topic string
	// Client makes the calls; it must speak HTTP/2. If nil, one with a 10
	// second timeout (net/http negotiates HTTP/2 over TLS).
	Client *http.Client
	// Now is the clock for provider tokens. If nil, time.Now.
	Now func() time.Time
}

// Client sends to one app. It is safe for concurrent use.
type Client struct {
	opts Options
	key  *ecdsa.PrivateKey

	mu     sync.Mutex
	jwt    string
	issued time.Time
}

var _ notify.Provider = (*Client)(nil)

// TokenLifetime is how long a provider token is used before a new one is
// signed.
const TokenLifetime = 40 * time.Minute

// New parses the key and returns a Client.
func New(opts Options) (*Client, error) {
	opts.Name = cmp.Or(opts.Name, "apns")
	opts.BaseURL = strings.TrimRight(cmp.Or(opts.BaseURL, "https://api.push.apple.com"), "/")
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.KeyID == "" || opts.TeamID == "" || opts.Topic == "" {
		return nil, errors.New("apns: key id, team id and topic are required")
	}
	block, _ := pem.Decode([]byte(opts.PrivateKey))
	if block == nil {
		return nil, errors.New("apns: private key: no PEM block")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("apns: private key: %w", err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("apns: private key is not an ECDSA key")
	}
	return &Client{opts: opts, key: key}, nil
}

// Name returns the provider's name.
func (c *Client) Name() string { return c.opts.Name }

// NeedsContact is true: a message needs a device token.
func (c *Client) NeedsContact() bool { return true }

// Send sends m to its device token. The receipt's ProviderMessageID is the
// apns-id.
func (c *Client) Send(ctx context.Context, m notify.Message) (notify.Receipt, error) {
	body, err := json.Marshal(payload(m))
	if err != nil {
		return notify.Receipt{}, notify.Permanent(err)
	}
	id := ID(m.IdempotencyKey)
	for try := 0; ; try++ {
		tok, err := c.providerToken()
		if err != nil {
			return notify.Receipt{}, notify.Permanent(err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.opts.BaseURL+"/3/device/"+m.To, bytes.NewReader(body))
		if err != nil {
			return notify.Receipt{}, notify.Permanent(fmt.Errorf("apns: device token %q: %w", m.To, err))
		}
		req.Header.Set("authorization", "bearer "+tok)
		req.Header.Set("apns-topic", c.opts.Topic)
		req.Header.Set("apns-push-type", "alert")
		req.Header.Set("apns-id", id)
		req.Header.Set("apns-collapse-id", collapseID(m.NotificationID))
		req.Header.Set("apns-priority", priority(m.Category))
		exp := "0"
		if !m.ExpiresAt.IsZero() {
			exp = strconv.FormatInt(m.ExpiresAt.Unix(), 10)
		}
		req.Header.Set("apns-expiration", exp)
		resp, err := c.opts.Client.Do(req)
		if err != nil {
			return notify.Receipt{}, notify.Temporary(fmt.Errorf("apns: %w", err), 0)
		}
		out, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return notify.Receipt{ProviderMessageID: cmp.Or(resp.Header.Get("apns-id"), id)}, nil
		}
		var e struct {
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(out, &e)
		if resp.StatusCode == http.StatusForbidden && e.Reason == "ExpiredProviderToken" && try == 0 {
			c.forgetToken(tok)
			continue
		}
		return notify.Receipt{}, classify(resp, e.Reason)
	}
}

// payload is the APNs JSON of m: an alert, and the notification's id,
// type and data beside aps.
func payload(m notify.Message) map[string]any {
	p := map[string]any{
		"aps":             map[string]any{"alert": map[string]string{"title": m.Subject, "body": m.Body}, "sound": "default"},
		"notification_id": m.NotificationID,
		"type":            m.Type,
	}
	if len(m.Data) > 0 {
		p["data"] = json.RawMessage(m.Data)
	}
	return p
}

func priority(c notify.Category) string {
	if c == notify.Marketing {
		return "5" // delivered when the device is awake anyway
	}
	return "10"
}

// collapseID fits the notification id into apns-collapse-id's 64 bytes.
func collapseID(id string) string {
	if len(id) <= 64 {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// ID derives the apns-id (a UUID, canonical form) from a delivery's
// idempotency key: a name-based, SHA-1 UUID (version 5) of the key.
func ID(key string) string {
	sum := sha1.Sum([]byte("sluice:" + key))
	u := sum[:16]
	u[6] = (u[6] & 0x0f) | 0x50
	u[8] = (u[8] & 0x3f) | 0x80
	h := hex.EncodeToString(u)
	return strings.ToUpper(h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32])
}

// classify reads a refusal from its status and reason.
func classify(resp *http.Response, reason string) error {
	err := fmt.Errorf("apns %d %s", resp.StatusCode, cmp.Or(reason, http.StatusText(resp.StatusCode)))
	switch {
	case resp.StatusCode == http.StatusGone || reason == "Unregistered" || reason == "BadDeviceToken":
		return notify.Permanent(fmt.Errorf("%w: %w", notify.ErrUnregistered, err))
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return notify.Temporary(err, 0)
	case resp.StatusCode == http.StatusForbidden:
		return notify.ProviderFault(err, 0) // our key or team: the breaker's business, and a reason to fail over
	}
	return notify.Permanent(err)
}

// providerToken returns the current JWT, signing a new one when it is
// TokenLifetime old.
func (c *Client) providerToken() (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Now()
	if c.jwt != "" && now.Sub(c.issued) < TokenLifetime {
		return c.jwt, nil
	}
	enc := base64.RawURLEncoding
	h, _ := json.Marshal(map[string]string{"alg": "ES256", "kid": c.opts.KeyID})
	p, _ := json.Marshal(map[string]any{"iss": c.opts.TeamID, "iat": now.Unix()})
	signing := enc.EncodeToString(h) + "." + enc.EncodeToString(p)
	sum := sha256.Sum256([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, c.key, sum[:])
	if err != nil {
		return "", fmt.Errorf("apns: sign provider token: %w", err)
	}
	// JWS wants r and s as fixed 32-byte big-endian halves, not DER.
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	c.jwt, c.issued = signing+"."+enc.EncodeToString(sig), now
	return c.jwt, nil
}

func (c *Client) forgetToken(tok string) {
	c.mu.Lock()
	if c.jwt == tok {
		c.jwt = ""
	}
	c.mu.Unlock()
}
