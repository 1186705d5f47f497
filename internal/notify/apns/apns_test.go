package apns_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/notify/apns"
)

// apple is APNs over HTTP/2 with TLS: it checks the ES256 provider token
// against the team's public key, records headers and bodies, and answers
// the scripted status and reason.
type apple struct {
	*httptest.Server
	pub    *ecdsa.PublicKey
	mu     sync.Mutex
	good   map[string]bool // provider tokens verified (Apple caches them too)
	reqs   []seen
	answer func() (int, string)
}

type seen struct {
	proto  int
	path   string
	header http.Header
	body   map[string]any
}

func startApple(t testing.TB, pub *ecdsa.PublicKey) *apple {
	t.Helper()
	a := &apple{pub: pub, good: map[string]bool{}}
	a.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.verify(strings.TrimPrefix(r.Header.Get("authorization"), "bearer ")) {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"reason":"InvalidProviderToken"}`)
			return
		}
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		a.mu.Lock()
		a.reqs = append(a.reqs, seen{proto: r.ProtoMajor, path: r.URL.Path, header: r.Header.Clone(), body: body})
		answer := a.answer
		a.mu.Unlock()
		w.Header().Set("apns-id", r.Header.Get("apns-id"))
		if answer != nil {
			status, reason := answer()
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"reason":%q,"timestamp":%d}`, reason, time.Now().UnixMilli())
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	a.EnableHTTP2 = true
	a.StartTLS()
	a.Client().Timeout = 10 * time.Second // every call in a test has a deadline
	t.Cleanup(a.Close)
	return a
}

func (a *apple) verify(jwt string) bool {
	a.mu.Lock()
	ok := a.good[jwt]
	a.mu.Unlock()
	if ok {
		return true
	}
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return false
	}
	var header, claims map[string]any
	h, _ := base64.RawURLEncoding.DecodeString(parts[0])
	p, _ := base64.RawURLEncoding.DecodeString(parts[1])
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	if json.Unmarshal(h, &header) != nil || json.Unmarshal(p, &claims) != nil || len(sig) != 64 {
		return false
	}
	if header["alg"] != "ES256" || header["kid"] != "KEY123" || claims["iss"] != "TEAM42" {
		return false
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(a.pub, sum[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return false
	}
	a.mu.Lock()
	a.good[jwt] = true
	a.mu.Unlock()
	return true
}

func setup(t testing.TB) (*apple, *apns.Client) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	a := startApple(t, &key.PublicKey)
	c, err := apns.New(apns.Options{BaseURL: a.URL, KeyID: "KEY123", TeamID: "TEAM42", Topic: "com.shop.app",
		PrivateKey: string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), Client: a.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return a, c
}

func TestSendOverHTTP2WithHeaders(t *testing.T) {
	t.Parallel()
	a, c := setup(t)
	exp := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	m := notify.Message{NotificationID: "ntf_1", Channel: notify.Push, Type: "otp", Category: notify.Critical,
		To: "a1b2c3", Subject: "Code", Body: "123456", Data: []byte(`{"code":"123456"}`), IdempotencyKey: "ntf_1:push", ExpiresAt: exp}
	rc, err := c.Send(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Send(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	uuid := regexp.MustCompile(`^[0-9A-F]{8}-[0-9A-F]{4}-5[0-9A-F]{3}-[89AB][0-9A-F]{3}-[0-9A-F]{12}$`)
	if !uuid.MatchString(rc.ProviderMessageID) || rc.ProviderMessageID != again.ProviderMessageID {
		t.Errorf("apns-id %q then %q: want one v5 UUID per delivery", rc.ProviderMessageID, again.ProviderMessageID)
	}
	if apns.ID("ntf_2:push") == rc.ProviderMessageID {
		t.Error("two deliveries share an apns-id")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.reqs[0]
	if r.proto != 2 || r.path != "/3/device/a1b2c3" {
		t.Errorf("request HTTP/%d %s, want HTTP/2 /3/device/a1b2c3", r.proto, r.path)
	}
	want := map[string]string{"apns-topic": "com.shop.app", "apns-push-type": "alert", "apns-priority": "10",
		"apns-collapse-id": "ntf_1", "apns-expiration": fmt.Sprint(exp.Unix()), "apns-id": rc.ProviderMessageID}
	for k, v := range want {
		if got := r.header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	b, _ := json.Marshal(r.body)
	if !strings.Contains(string(b), `"alert":{"body":"123456","title":"Code"}`) || !strings.Contains(string(b), `"data":{"code":"123456"}`) {
		t.Errorf("payload = %s", b)
	}
}

func TestErrorClassification(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		status       int
		reason       string
		want         string
		unregistered bool
	}{
		{"unregistered", 410, "Unregistered", notify.ClassPermanent, true},
		{"bad device token", 400, "BadDeviceToken", notify.ClassPermanent, true},
		{"payload too large", 413, "PayloadTooLarge", notify.ClassPermanent, false},
		{"too many requests", 429, "TooManyRequests", notify.ClassTemporary, false},
		{"service unavailable", 503, "ServiceUnavailable", notify.ClassTemporary, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, c := setup(t)
			a.answer = func() (int, string) { return tt.status, tt.reason }
			_, err := c.Send(context.Background(), notify.Message{NotificationID: "n", To: "t", IdempotencyKey: "n:push"})
			if got := notify.ErrorClass(err); got != tt.want {
				t.Fatalf("Send = %v (%s), want %s", err, got, tt.want)
			}
			if errors.Is(err, notify.ErrUnregistered) != tt.unregistered {
				t.Errorf("errors.Is(%v, ErrUnregistered) = %v, want %v", err, !tt.unregistered, tt.unregistered)
			}
		})
	}
}

// BenchmarkSend measures messages per second to the in-process APNs (HTTP/2, one connection) over
// keep-alive connections.
func BenchmarkSend(b *testing.B) {
	_, c := setup(b)
	m := notify.Message{NotificationID: "ntf_1", Category: notify.Critical, To: "a1b2c3", Subject: "Code", Body: "123456", IdempotencyKey: "ntf_1:push"}
	enginetest.BenchSend(b, c, m)
}
