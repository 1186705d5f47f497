package bench

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// NewHTTPClient returns a client for a closed loop of workers: one kept
// connection per worker (so connection setup is not measured), redirects
// not followed (a 302 is the answer a redirect benchmark wants), and a
// per-request timeout.
func NewHTTPClient(workers int, timeout time.Duration) *http.Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        workers * 2,
		MaxIdleConnsPerHost: workers * 2,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	return &http.Client{
		Transport:     tr,
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Expect judges an HTTP answer: nil when it is the one wanted.
type Expect func(status int, body []byte) error

// ExpectStatus accepts exactly the given status.
func ExpectStatus(want int) Expect {
	return func(status int, body []byte) error {
		if status != want {
			return &StatusError{Status: status, Body: string(body)}
		}
		return nil
	}
}

// ExpectSuccess accepts any 2xx or 3xx status: what another
// implementation's endpoint is held to in a comparison.
func ExpectSuccess(status int, body []byte) error {
	if status < 200 || status >= 400 {
		return &StatusError{Status: status, Body: string(body)}
	}
	return nil
}

// Request is one HTTP request of a scenario. Body, if not nil, is sent as
// JSON.
type Request struct {
	Method string
	URL    string
	Body   []byte
	// UserAgent, if set, is sent as User-Agent (else Go's default).
	UserAgent string
}

// HTTP returns operations that send reqs(seq) with hc and judge the answer
// with expect. apiKey, when set, goes in the Authorization header.
func HTTP(hc *http.Client, apiKey string, req func(seq int64) Request, expect Expect) func(worker int) Op {
	return func(int) Op {
		buf := new(bytes.Buffer)
		return func(ctx context.Context, seq int64) error {
			r := req(seq)
			var body io.Reader
			if r.Body != nil {
				body = bytes.NewReader(r.Body)
			}
			hr, err := http.NewRequestWithContext(ctx, r.Method, r.URL, body)
			if err != nil {
				return err
			}
			if r.Body != nil {
				hr.Header.Set("Content-Type", "application/json")
			}
			if r.UserAgent != "" {
				hr.Header.Set("User-Agent", r.UserAgent)
			}
			if apiKey != "" {
				hr.Header.Set("Authorization", "Bearer "+apiKey)
			}
			resp, err := hc.Do(hr)
			if err != nil {
				return err
			}
			buf.Reset()
			_, err = buf.ReadFrom(resp.Body)
			resp.Body.Close()
			if err != nil {
				return err
			}
			return expect(resp.StatusCode, buf.Bytes())
		}
	}
}

// ExpectDecision accepts a 200 rate limit decision and counts the refused
// ones in refused: a refusal is an answer, not an error.
func ExpectDecision(refused *atomic.Int64) Expect {
	ok := ExpectStatus(http.StatusOK)
	return func(status int, body []byte) error {
		if err := ok(status, body); err != nil {
			return err
		}
		if !bytes.Contains(body, []byte(`"allowed":true`)) {
			refused.Add(1)
		}
		return nil
	}
}
