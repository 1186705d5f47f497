package fcm

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
)

// accessToken returns a cached OAuth token, fetching a new one when it has
// less than a minute left. Fetches are serialised: concurrent senders wait
// for one exchange rather than each making their own.
func (c *Client) accessToken(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Now()
	if c.token != "" && now.Add(time.Minute).Before(c.expires) {
		return c.token, nil
	}
	assertion, err := c.assertion(now)
	if err != nil {
		return "", notify.Permanent(err)
	}
	form := url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}, "assertion": {assertion}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.opts.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", notify.Temporary(err, 0)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.opts.Client.Do(req)
	if err != nil {
		return "", notify.Temporary(fmt.Errorf("fcm token: %w", err), 0)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		// A refused assertion is our configuration, not the message:
		// temporary, so the breaker opens.
		return "", notify.Temporary(fmt.Errorf("fcm token endpoint %d: %s", resp.StatusCode, strings.TrimSpace(string(body))), 0)
	}
	var t struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
	}
	if err := json.Unmarshal(body, &t); err != nil || t.AccessToken == "" {
		return "", notify.Temporary(fmt.Errorf("fcm token endpoint: no access_token in %q", body), 0)
	}
	c.token, c.expires = t.AccessToken, now.Add(time.Duration(t.ExpiresIn)*time.Second)
	return c.token, nil
}

// forgetToken drops tok if it is still the cached one.
func (c *Client) forgetToken(tok string) {
	c.mu.Lock()
	if c.token == tok {
		c.token = ""
	}
	c.mu.Unlock()
}

// assertion is the signed JWT (RS256) exchanged for an access token.
func (c *Client) assertion(now time.Time) (string, error) {
	header := map[string]string{"alg": "RS256", "typ": "JWT"}
	claims := map[string]any{
		"iss": c.opts.Account.ClientEmail, "scope": Scope, "aud": c.opts.TokenURL,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
	h, _ := json.Marshal(header)
	p, _ := json.Marshal(claims)
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString(h) + "." + enc.EncodeToString(p)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, c.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("fcm: sign assertion: %w", err)
	}
	return signing + "." + enc.EncodeToString(sig), nil
}
