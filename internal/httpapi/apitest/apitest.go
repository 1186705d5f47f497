// Package apitest checks HTTP exchanges against Sluice's OpenAPI document
// (what GET /openapi.json serves), for tests: a Validator wraps a test
// client's http.RoundTripper (or is handed a recorded exchange) and
// validates, with kin-openapi's openapi3filter, every response against
// the operation it answers (status included: a status the document does
// not list fails) and every request that the server accepted.
//
// Requests that a test sends wrong on purpose (bad JSON, a wrong
// Content-Type, a missing key) are refused by the server, so their
// requests are not validated, only the refusals: a request is validated
// when its response is 2xx. Exchanges on paths or methods the document
// does not name (unknown routes, the gateway's upstream traffic, a
// webhook receiver) are counted as unrouted and not validated.
//
// Only tests import this package: it is not linked into the binary.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// Validator validates exchanges against one OpenAPI document. It is safe
// for concurrent use.
type Validator struct {
	router routers.Router
	opts   openapi3filter.Options

	exchanges, requests, unrouted atomic.Int64

	mu       sync.Mutex
	failures []string
}

// maxFailures bounds the failures a Validator keeps (each is counted).
const maxFailures = 200

// New parses doc (the served document; its servers are ignored, so any
// host matches) and returns a Validator for it.
func New(doc []byte) (*Validator, error) {
	var raw map[string]any
	if err := json.Unmarshal(doc, &raw); err != nil {
		return nil, fmt.Errorf("apitest: the document does not parse: %w", err)
	}
	delete(raw, "servers")
	doc, _ = json.Marshal(raw)
	spec, err := openapi3.NewLoader().LoadFromData(doc)
	if err != nil {
		return nil, fmt.Errorf("apitest: loading the document: %w", err)
	}
	if err := spec.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("apitest: the document is not valid OpenAPI: %w", err)
	}
	router, err := gorillamux.NewRouter(spec)
	if err != nil {
		return nil, fmt.Errorf("apitest: routing the document: %w", err)
	}
	// Text bodies other than JSON (a link's bot page, a QR code's SVG) are
	// checked as strings.
	for _, ct := range []string{"text/html", "image/svg+xml"} {
		openapi3filter.RegisterBodyDecoder(ct, openapi3filter.PlainBodyDecoder)
	}
	return &Validator{router: router, opts: openapi3filter.Options{
		IncludeResponseStatus: true,
		MultiError:            true,
		// Credentials are the server's to check: keyless loopback
		// servers accept requests without any, and the refusals (401,
		// 403) are validated as responses.
		AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
	}}, nil
}

// Must is New for a document known to be valid; it panics otherwise.
func Must(doc []byte) *Validator {
	v, err := New(doc)
	if err != nil {
		panic(err)
	}
	return v
}

// Stats counts what a Validator has seen.
type Stats struct {
	Exchanges int64 // responses validated
	Requests  int64 // requests validated (those answered 2xx)
	Unrouted  int64 // exchanges the document has no operation for, or not with the API
	Failures  int64 // exchanges that disagreed with the document
}

func (s Stats) String() string {
	return fmt.Sprintf("%d responses and %d requests validated against the OpenAPI document, %d exchanges not in it, %d disagreements",
		s.Exchanges, s.Requests, s.Unrouted, s.Failures)
}

// Stats returns the counts so far.
func (v *Validator) Stats() Stats {
	v.mu.Lock()
	n := int64(len(v.failures))
	v.mu.Unlock()
	return Stats{Exchanges: v.exchanges.Load(), Requests: v.requests.Load(), Unrouted: v.unrouted.Load(), Failures: n}
}

// Failures returns the disagreements recorded so far (at most 200).
func (v *Validator) Failures() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.failures...)
}

// Check validates one exchange: req (whose body, if any, is reqBody) and
// its response resp (whose body is respBody). It returns the disagreement,
// also recorded for Failures, or nil.
func (v *Validator) Check(req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) error {
	route, params, err := v.router.FindRoute(req)
	if err != nil || resp.Header.Get("X-Request-Id") == "" {
		v.unrouted.Add(1)
		return nil
	}
	req = req.Clone(req.Context())
	req.Body = io.NopCloser(bytes.NewReader(reqBody))
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: &v.opts}
	var errs []error
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		v.requests.Add(1)
		if err := openapi3filter.ValidateRequest(req.Context(), in); err != nil {
			errs = append(errs, fmt.Errorf("request: %w", err))
		}
	}
	v.exchanges.Add(1)
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(respBody)),
		Options:                &v.opts,
	}
	if err := openapi3filter.ValidateResponse(req.Context(), out); err != nil {
		errs = append(errs, fmt.Errorf("response %d: %w", resp.StatusCode, err))
	}
	if len(errs) == 0 {
		return nil
	}
	err = fmt.Errorf("%s %s (operation %s %s; Content-Type %q, %d body bytes): %w", req.Method, req.URL.RequestURI(), route.Method, route.Path,
		req.Header.Get("Content-Type"), len(reqBody), errors.Join(errs...))
	v.mu.Lock()
	if len(v.failures) < maxFailures {
		v.failures = append(v.failures, err.Error())
	}
	v.mu.Unlock()
	return err
}

// Transport returns next (http.DefaultTransport if nil) wrapped so that
// every exchange through it is checked; disagreements are recorded (see
// Failures), not returned, so the client sees the server's answer as is.
// A response whose body cannot be read whole, or that streams
// (text/event-stream), is passed on unchecked.
func (v *Validator) Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &transport{v: v, next: next}
}

type transport struct {
	v    *Validator
	next http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		reqBody = b
		// RoundTrip must not change req: send a copy with the body.
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.Body == nil || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, err
	}
	body, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	if rerr != nil {
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{rerr}))
		return resp, nil
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	_ = t.v.Check(req, reqBody, resp, body)
	return resp, nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
