// Package twilio sends SMS notifications through a Twilio-compatible
// Messages API (POST /2010-04-01/Accounts/{sid}/Messages.json, a form body,
// HTTP Basic auth with the account SID and auth token) and reads the status
// callbacks it posts back, verified with X-Twilio-Signature.
//
// Every message asks for a StatusCallback to the configured callback URL
// with the delivery's key in its query ("?delivery=notification_id:sms"), so
// a callback names its delivery without a lookup by message SID; the
// signature covers the whole URL, so the key cannot be forged.
// ValidityPeriod is the time left before the notification's expires_at
// (Twilio drops a message still queued when it runs out).
//
// Errors are classified from Twilio's own codes: invalid or unroutable
// numbers and opted-out recipients (21211, 21610, 21614 ...) are permanent;
// 429, 5xx, 20429 and 30003 temporary, honouring Retry-After.
//
// [Client] is a notify.Provider for the sms channel and a
// notify.CallbackParser for its delivery receipts.
package twilio

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
)

// Options configure a Client. AccountSID, AuthToken and one of From or
// MessagingServiceSID are required.
type Options struct {
	// Name identifies the provider in deliveries, metrics and the callback
	// path /v1/providers/{name}/callbacks. If empty, "twilio".
	Name string
	// BaseURL is the API's root. If empty, https://api.twilio.com.
	BaseURL             string
	AccountSID          string
	AuthToken           string
	From                string // E.164 sender number
	MessagingServiceSID string // used instead of From when set
	// CallbackURL is the public URL of this provider's callback route
	// (https://sluice.example.com/v1/providers/twilio/callbacks). If empty,
	// no StatusCallback is asked for and deliveries stay "sent".
	CallbackURL string
	// Client makes the calls. If nil, one with a 10 second timeout.
	Client *http.Client
	// Now is the clock for ValidityPeriod. If nil, time.Now.
	Now func() time.Time
}

// Client sends SMS through one account. It is safe for concurrent use.
type Client struct {
	opts     Options
	endpoint string
}

var _ notify.Provider = (*Client)(nil)

// MaxValidity is the longest ValidityPeriod Twilio accepts.
const MaxValidity = 36000 * time.Second

// New checks opts and returns a Client.
func New(opts Options) (*Client, error) {
	opts.Name = cmp.Or(opts.Name, "twilio")
	opts.BaseURL = strings.TrimRight(cmp.Or(opts.BaseURL, "https://api.twilio.com"), "/")
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.AccountSID == "" || opts.AuthToken == "" {
		return nil, fmt.Errorf("twilio: account SID and auth token are required")
	}
	if opts.From == "" && opts.MessagingServiceSID == "" {
		return nil, fmt.Errorf("twilio: a from number or a messaging service SID is required")
	}
	return &Client{opts: opts,
		endpoint: opts.BaseURL + "/2010-04-01/Accounts/" + url.PathEscape(opts.AccountSID) + "/Messages.json"}, nil
}

// Name returns the provider's name.
func (c *Client) Name() string { return c.opts.Name }

// NeedsContact is true: a message needs a phone number.
func (c *Client) NeedsContact() bool { return true }

// message is the part of Twilio's message resource we read.
type message struct {
	SID    string `json:"sid"`
	Status string `json:"status"`
}

// apiError is Twilio's error body.
type apiError struct {
	Code     int    `json:"code"`
	Message  string `json:"message"`
	MoreInfo string `json:"more_info"`
	Status   int    `json:"status"`
}

// Send creates the message. The receipt's ProviderMessageID is its SID.
func (c *Client) Send(ctx context.Context, m notify.Message) (notify.Receipt, error) {
	form := url.Values{"To": {m.To}, "Body": {m.Body}}
	if c.opts.MessagingServiceSID != "" {
		form.Set("MessagingServiceSid", c.opts.MessagingServiceSID)
	} else {
		form.Set("From", c.opts.From)
	}
	if c.opts.CallbackURL != "" {
		form.Set("StatusCallback", CallbackFor(c.opts.CallbackURL, m.IdempotencyKey))
	}
	if !m.ExpiresAt.IsZero() {
		left := m.ExpiresAt.Sub(c.opts.Now())
		form.Set("ValidityPeriod", strconv.Itoa(int(min(max(left, time.Second), MaxValidity)/time.Second)))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return notify.Receipt{}, notify.Permanent(err)
	}
	req.SetBasicAuth(c.opts.AccountSID, c.opts.AuthToken)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := c.opts.Client.Do(req)
	if err != nil {
		return notify.Receipt{}, notify.Temporary(fmt.Errorf("twilio: %w", err), 0)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return notify.Receipt{}, notify.Temporary(fmt.Errorf("twilio: read response: %w", err), 0)
	}
	if resp.StatusCode/100 == 2 {
		var msg message
		if err := json.Unmarshal(body, &msg); err != nil || msg.SID == "" {
			// Accepted, but we cannot tell its SID: do not send it again.
			return notify.Receipt{}, nil
		}
		return notify.Receipt{ProviderMessageID: msg.SID}, nil
	}
	var ae apiError
	_ = json.Unmarshal(body, &ae)
	return notify.Receipt{}, classify(resp, ae)
}

// CallbackFor is the StatusCallback URL of delivery key under base.
func CallbackFor(base, key string) string {
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + "delivery=" + url.QueryEscape(key)
}

// permanentCodes are Twilio error codes that no retry can fix.
var permanentCodes = map[int]string{
	21211: "invalid To number",
	21212: "invalid From number",
	21408: "region not enabled",
	21421: "invalid phone number",
	21604: "To number required",
	21606: "From number cannot send SMS",
	21610: "recipient unsubscribed (STOP)",
	21612: "cannot route to this number",
	21614: "To number is not a mobile number",
	21617: "body too long",
	30004: "message blocked",
	30005: "unknown destination handset",
	30006: "landline or unreachable carrier",
	30007: "carrier filtered as spam",
}

// temporaryCodes are Twilio error codes worth retrying, whatever the HTTP
// status said.
var temporaryCodes = map[int]string{
	20429: "too many requests",
	20500: "internal error",
	20503: "service unavailable",
	30001: "queue overflow",
	30003: "unreachable destination handset",
	30008: "unknown error",
}

// classify reads a refusal: the Twilio code decides when it is known, then
// the HTTP status (429 and 5xx temporary; 401 and 403, our credentials,
// a provider fault: temporary, so the breaker opens, and a reason for
// critical messages to fail over at once; other 4xx permanent).
func classify(resp *http.Response, ae apiError) error {
	err := fmt.Errorf("twilio %d code %d: %s", resp.StatusCode, ae.Code, cmp.Or(ae.Message, http.StatusText(resp.StatusCode)))
	wait := retryAfter(resp.Header.Get("Retry-After"))
	if _, ok := permanentCodes[ae.Code]; ok {
		return notify.Permanent(err)
	}
	if _, ok := temporaryCodes[ae.Code]; ok {
		return notify.Temporary(err, wait)
	}
	switch s := resp.StatusCode; {
	case s == http.StatusUnauthorized, s == http.StatusForbidden:
		return notify.ProviderFault(err, wait) // our credentials or account
	case s == http.StatusTooManyRequests, s >= 500, s == http.StatusRequestTimeout:
		return notify.Temporary(err, wait)
	}
	return notify.Permanent(err)
}

// retryAfter parses a Retry-After header: seconds or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
