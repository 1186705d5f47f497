// Package fcm sends push notifications through Firebase Cloud Messaging's
// HTTP v1 API (POST /v1/projects/{project}/messages:send).
//
// It authenticates as a Google service account: a JWT signed with the
// account's RSA key (RS256) is exchanged for an OAuth access token at the
// token endpoint (the account's token_uri, or a configured one), cached
// until shortly before it expires and fetched again after a 401.
//
// Errors are classified from FCM's error codes: UNREGISTERED is permanent
// and wraps notify.ErrUnregistered, so the worker removes the token from the
// user's contacts; INVALID_ARGUMENT and SENDER_ID_MISMATCH are permanent;
// QUOTA_EXCEEDED, UNAVAILABLE and INTERNAL are temporary and honour
// Retry-After; 401, 403 and THIRD_PARTY_AUTH_ERROR (our credentials) are
// provider faults (notify.ProviderFault): temporary, and a reason for a
// critical message to fail over at once.
//
// [Client] is a notify.Provider for the push channel.
package fcm

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
)

// ServiceAccount is the part of a Google service account key file used.
type ServiceAccount struct {
	ProjectID   string `json:"project_id"`
	ClientEmail string `json:"client_email"`
	PrivateKey  string `json:"private_key"` // PEM, PKCS#8 or PKCS#1
	TokenURI    string `json:"token_uri"`
}

// Options configure a Client. Account is required.
type Options struct {
	// Name identifies the provider. If empty, "fcm".
	Name    string
	Account ServiceAccount
	// ProjectID overrides Account.ProjectID.
	ProjectID string
	// BaseURL is the API's root. If empty, https://fcm.googleapis.com.
	BaseURL string
	// TokenURL overrides Account.TokenURI. If both are empty,
	// https://oauth2.googleapis.com/token.
	TokenURL string
	// Client makes the calls. If nil, one with a 10 second timeout.
	Client *http.Client
	// Now is the clock for tokens and TTLs. If nil, time.Now.
	Now func() time.Time
}

// Client sends through one Firebase project. It is safe for concurrent use.
type Client struct {
	opts     Options
	key      *rsa.PrivateKey
	endpoint string

	mu      sync.Mutex
	token   string
	expires time.Time
}

var _ notify.Provider = (*Client)(nil)

// Scope is the OAuth scope FCM needs.
const Scope = "https://www.googleapis.com/auth/firebase.messaging"

// New parses the service account's key and returns a Client.
func New(opts Options) (*Client, error) {
	opts.Name = cmp.Or(opts.Name, "fcm")
	opts.BaseURL = strings.TrimRight(cmp.Or(opts.BaseURL, "https://fcm.googleapis.com"), "/")
	opts.TokenURL = cmp.Or(opts.TokenURL, opts.Account.TokenURI, "https://oauth2.googleapis.com/token")
	opts.ProjectID = cmp.Or(opts.ProjectID, opts.Account.ProjectID)
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ProjectID == "" || opts.Account.ClientEmail == "" {
		return nil, errors.New("fcm: the service account needs project_id and client_email")
	}
	key, err := parseKey(opts.Account.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("fcm: service account key: %w", err)
	}
	return &Client{opts: opts, key: key,
		endpoint: opts.BaseURL + "/v1/projects/" + url.PathEscape(opts.ProjectID) + "/messages:send"}, nil
}

func parseKey(p string) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode([]byte(p))
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, errors.New("not an RSA key")
	}
	return rk, nil
}

// Name returns the provider's name.
func (c *Client) Name() string { return c.opts.Name }

// NeedsContact is true: a message needs a registration token.
func (c *Client) NeedsContact() bool { return true }

// Send sends m to its registration token. The receipt's ProviderMessageID
// is FCM's message name.
func (c *Client) Send(ctx context.Context, m notify.Message) (notify.Receipt, error) {
	body, err := json.Marshal(map[string]any{"message": c.payload(m)})
	if err != nil {
		return notify.Receipt{}, notify.Permanent(err)
	}
	for try := 0; ; try++ {
		tok, err := c.accessToken(ctx)
		if err != nil {
			return notify.Receipt{}, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
		if err != nil {
			return notify.Receipt{}, notify.Permanent(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.opts.Client.Do(req)
		if err != nil {
			return notify.Receipt{}, notify.Temporary(fmt.Errorf("fcm: %w", err), 0)
		}
		out, rerr := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if rerr != nil {
			return notify.Receipt{}, notify.Temporary(fmt.Errorf("fcm: read response: %w", rerr), 0)
		}
		if resp.StatusCode == http.StatusOK {
			var ok struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(out, &ok)
			return notify.Receipt{ProviderMessageID: ok.Name}, nil
		}
		if resp.StatusCode == http.StatusUnauthorized && try == 0 {
			c.forgetToken(tok) // revoked or expired early: fetch another once
			continue
		}
		return notify.Receipt{}, classify(resp, out)
	}
}

// payload is the v1 message of m: a notification with title and body,
// the notification's data as string values, and its expiry as Android's
// ttl and APNs' apns-expiration (FCM relays both).
func (c *Client) payload(m notify.Message) map[string]any {
	data := map[string]string{"notification_id": m.NotificationID, "type": m.Type}
	var fields map[string]any
	if len(m.Data) > 0 && json.Unmarshal(m.Data, &fields) == nil {
		for k, v := range fields {
			if _, taken := data[k]; taken {
				continue
			}
			if s, ok := v.(string); ok {
				data[k] = s
			} else if b, err := json.Marshal(v); err == nil {
				data[k] = string(b)
			}
		}
	}
	msg := map[string]any{
		"token":        m.To,
		"notification": map[string]string{"title": m.Subject, "body": m.Body},
		"data":         data,
	}
	android := map[string]any{"collapse_key": m.NotificationID}
	if m.Category == notify.Critical {
		android["priority"] = "high"
	}
	if !m.ExpiresAt.IsZero() {
		left := max(m.ExpiresAt.Sub(c.opts.Now()), 0)
		android["ttl"] = strconv.FormatInt(int64(left/time.Second), 10) + "s"
		msg["apns"] = map[string]any{"headers": map[string]string{"apns-expiration": strconv.FormatInt(m.ExpiresAt.Unix(), 10)}}
	}
	msg["android"] = android
	return msg
}

// apiError is Google's error body with FCM's error code in details.
type apiError struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
		Details []struct {
			Type      string `json:"@type"`
			ErrorCode string `json:"errorCode"`
		} `json:"details"`
	} `json:"error"`
}

// classify reads a refusal from its FCM error code, then its HTTP status.
func classify(resp *http.Response, body []byte) error {
	var ae apiError
	_ = json.Unmarshal(body, &ae)
	code := ae.Error.Status
	for _, d := range ae.Error.Details {
		if strings.HasSuffix(d.Type, "google.firebase.fcm.v1.FcmError") && d.ErrorCode != "" {
			code = d.ErrorCode
		}
	}
	err := fmt.Errorf("fcm %d %s: %s", resp.StatusCode, code, cmp.Or(ae.Error.Message, http.StatusText(resp.StatusCode)))
	wait := retryAfter(resp.Header.Get("Retry-After"))
	switch code {
	case "UNREGISTERED":
		return notify.Permanent(fmt.Errorf("%w: %w", notify.ErrUnregistered, err))
	case "INVALID_ARGUMENT", "SENDER_ID_MISMATCH":
		return notify.Permanent(err)
	case "THIRD_PARTY_AUTH_ERROR": // our APNs or web push credentials in Firebase
		return notify.ProviderFault(err, wait)
	case "QUOTA_EXCEEDED", "UNAVAILABLE", "INTERNAL":
		return notify.Temporary(err, wait)
	}
	if s := resp.StatusCode; s == http.StatusUnauthorized || s == http.StatusForbidden {
		return notify.ProviderFault(err, wait) // our service account
	}
	if s := resp.StatusCode; s == http.StatusTooManyRequests || s >= 500 {
		return notify.Temporary(err, wait)
	}
	return notify.Permanent(err)
}

func retryAfter(v string) time.Duration {
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
