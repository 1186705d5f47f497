package webhook

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
)

// receiver is a webhook endpoint that verifies what it gets the way a
// Standard Webhooks consumer would.
type receiver struct {
	mu     sync.Mutex
	key    []byte
	status int
	header http.Header
	got    []Payload
	ids    []string
	bad    []string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	id, tsText, sig := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature")
	ts, err := strconv.ParseInt(tsText, 10, 64)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	switch {
	case err != nil || time.Since(time.Unix(ts, 0)).Abs() > 5*time.Minute:
		rc.bad = append(rc.bad, "timestamp "+tsText)
	case !Verify(rc.key, id, ts, body, sig):
		rc.bad = append(rc.bad, "signature "+sig)
	}
	var p Payload
	if err := json.Unmarshal(body, &p); err != nil {
		rc.bad = append(rc.bad, "body "+string(body))
	}
	rc.got = append(rc.got, p)
	rc.ids = append(rc.ids, id)
	for k, v := range rc.header {
		w.Header()[k] = v
	}
	w.WriteHeader(rc.status)
}

func message(url string) notify.Message {
	return notify.Message{NotificationID: "ntf_1", Channel: notify.Webhook, UserID: "u1", Type: "order.shipped",
		Category: notify.Orders, To: url, Subject: "Order #42 shipped", Body: "on its way",
		Data: json.RawMessage(`{"order":"#42"}`), IdempotencyKey: "ntf_1:webhook", Attempt: 1}
}

func TestSendSignsAndClassifies(t *testing.T) {
	t.Parallel()
	secret := NewSecret()
	key, err := DecodeSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		status     int
		header     http.Header
		wantErr    bool
		permanent  bool
		retryAfter time.Duration
	}{
		{"200 is sent", 200, nil, false, false, 0},
		{"204 is sent", 204, nil, false, false, 0},
		{"410 is permanent", 410, nil, true, true, 0},
		{"400 is permanent", 400, nil, true, true, 0},
		{"404 is permanent", 404, nil, true, true, 0},
		{"408 is temporary", 408, nil, true, false, 0},
		{"429 honours Retry-After", 429, http.Header{"Retry-After": {"7"}}, true, false, 7 * time.Second},
		{"500 is temporary", 500, nil, true, false, 0},
		{"503 honours Retry-After", 503, http.Header{"Retry-After": {"120"}}, true, false, 2 * time.Minute},
		{"a redirect is not followed", 302, http.Header{"Location": {"http://example.com/"}}, true, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc := &receiver{key: key, status: tt.status, header: tt.header}
			srv := httptest.NewServer(rc)
			defer srv.Close()
			p, err := New(Options{Secret: secret, AllowPrivate: true, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Send(t.Context(), message(srv.URL+"/hook"))
			if (err != nil) != tt.wantErr {
				t.Fatalf("Send = %v, want error: %v", err, tt.wantErr)
			}
			if err != nil {
				se, ok := errors.AsType[*notify.SendError](err)
				if !ok || se.Permanent != tt.permanent || se.RetryAfter != tt.retryAfter {
					t.Errorf("Send = %#v, want permanent %v, retry after %v", err, tt.permanent, tt.retryAfter)
				}
			}
			rc.mu.Lock()
			defer rc.mu.Unlock()
			if len(rc.bad) > 0 || len(rc.got) != 1 {
				t.Fatalf("receiver saw %d requests, problems %v", len(rc.got), rc.bad)
			}
			if rc.ids[0] != "ntf_1:webhook" || rc.got[0].Type != "order.shipped" || rc.got[0].Data.NotificationID != "ntf_1" ||
				string(rc.got[0].Data.Data) != `{"order":"#42"}` || rc.got[0].Data.Body != "on its way" {
				t.Errorf("receiver got id %q, payload %+v", rc.ids[0], rc.got[0])
			}
		})
	}
}

func TestRefusesPrivateTargets(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	p, err := New(Options{Secret: NewSecret()})
	if err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{srv.URL, "http://localhost:1/", "http://[::1]:1/", "http://10.0.0.1:1/", "http://169.254.169.254/latest"} {
		_, err := p.Send(t.Context(), message(url))
		se, ok := errors.AsType[*notify.SendError](err)
		if !ok || !se.Permanent || !errors.Is(err, errPrivateTarget) {
			t.Errorf("Send(%s) = %v, want a permanent private-target refusal", url, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the loopback server was reached %d times", n)
	}
	for _, c := range []struct {
		ip      string
		private bool
	}{{"127.0.0.1", true}, {"192.168.1.1", true}, {"::ffff:10.1.2.3", true}, {"100.64.0.1", true}, {"0.0.0.0", true}, {"fe80::1", true},
		// IANA special-purpose ranges the first guard missed (internal/netguard has them all).
		{"64:ff9b::10.0.0.1", true}, {"64:ff9b:1::1", true}, {"2002:c0a8:101::1", true}, {"198.18.0.1", true},
		{"240.0.0.1", true}, {"192.0.0.8", true}, {"2001:db8::1", true}, {"fec0::1", true},
		{"93.184.216.34", false}, {"2606:2800:220:1::", false}, {"64:ff9b::93.184.216.34", false}} {
		if got := Private(netip.MustParseAddr(c.ip)); got != c.private {
			t.Errorf("Private(%s) = %v, want %v", c.ip, got, c.private)
		}
	}
}

func TestSignatureMatchesTheSpecExample(t *testing.T) {
	t.Parallel()
	// The example of the Standard Webhooks specification.
	key, err := DecodeSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"test": 2432232314}`)
	got := Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body)
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
	if !Verify(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body, "v1,bogus "+got) {
		t.Error("Verify refused a list holding the right signature")
	}
	if Verify(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265331, body, got) {
		t.Error("Verify accepted a signature for another timestamp")
	}
}

func TestSecretFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "data", "webhook-secret")
	s1, created, err := LoadOrCreateSecret(file)
	if err != nil || !created {
		t.Fatalf("first LoadOrCreateSecret = %v, %v", created, err)
	}
	s2, created, err := LoadOrCreateSecret(file)
	if err != nil || created || s2 != s1 {
		t.Errorf("second LoadOrCreateSecret = %q, %v, %v; want the same secret", s2, created, err)
	}
	for _, bad := range []string{"", "secret", "whsec_!!", "whsec_c2hvcnQ="} {
		if _, err := DecodeSecret(bad); err == nil {
			t.Errorf("DecodeSecret(%q) succeeded", bad)
		}
	}
}
