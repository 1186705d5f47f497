package twilio

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/internal/notify"
)

var _ notify.CallbackParser = (*Client)(nil)

// Signature is X-Twilio-Signature for a POST to fullURL with form: the
// base64 HMAC-SHA1, keyed by the auth token, of the URL followed by every
// form parameter's name and value, sorted by name.
func Signature(authToken, fullURL string, form url.Values) string {
	keys := make([]string, 0, len(form))
	for k := range form {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	mac := hmac.New(sha1.New, []byte(authToken))
	mac.Write([]byte(fullURL))
	for _, k := range keys {
		vs := append([]string(nil), form[k]...)
		sort.Strings(vs)
		for _, v := range vs {
			mac.Write([]byte(k))
			mac.Write([]byte(v))
		}
	}
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// ParseCallback verifies a status callback's X-Twilio-Signature against
// the URL Twilio was given (CallbackURL's scheme, host and path with the
// query as received) and reads its report: delivered (or read) becomes
// delivered, undelivered and failed become failed with the error code;
// other statuses (queued, sending, sent) report nothing final.
func (c *Client) ParseCallback(cb notify.Callback) ([]notify.Report, error) {
	if c.opts.CallbackURL == "" {
		return nil, fmt.Errorf("twilio: no callback URL configured")
	}
	base, _, _ := strings.Cut(c.opts.CallbackURL, "?")
	_, query, _ := strings.Cut(cb.RequestURI, "?")
	full := base
	if query != "" {
		full += "?" + query
	}
	want := Signature(c.opts.AuthToken, full, cb.Form)
	if !hmac.Equal([]byte(want), []byte(cb.Header.Get("X-Twilio-Signature"))) {
		return nil, notify.ErrBadSignature
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("twilio callback query: %w", err)
	}
	id, ch, ok := strings.Cut(q.Get("delivery"), ":")
	if !ok || id == "" {
		return nil, fmt.Errorf("twilio callback: no delivery in the URL")
	}
	r := notify.Report{Key: notify.DeliveryKey{NotificationID: id, Channel: notify.Channel(ch)},
		ProviderMessageID: cb.Form.Get("MessageSid")}
	switch status := cb.Form.Get("MessageStatus"); status {
	case "delivered", "read":
		r.Status = notify.StatusDelivered
	case "undelivered", "failed":
		r.Status = notify.StatusFailed
		r.Error = "twilio " + status
		if code := cb.Form.Get("ErrorCode"); code != "" {
			r.Error += " code " + code
			if text, ok := permanentCodes[atoi(code)]; ok {
				r.Error += ": " + text
			} else if text, ok := temporaryCodes[atoi(code)]; ok {
				r.Error += ": " + text
			}
		}
	default:
		r.Status = notify.Status(status)
	}
	return []notify.Report{r}, nil
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}
