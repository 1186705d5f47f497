package fcm_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/notify/fcm"
)

// google is FCM's HTTP v1 API and Google's OAuth token endpoint, speaking
// their wire formats: a JWT bearer assertion verified with the service
// account's public key, bearer tokens, v1 messages and Google error bodies.
type google struct {
	*httptest.Server
	pub       *rsa.PublicKey
	mu        sync.Mutex
	exchanges int
	messages  []map[string]any
	answer    func() (int, http.Header, string)
	revoke    bool // answer the next send 401 once
}

func startGoogle(t testing.TB, pub *rsa.PublicKey) *google {
	t.Helper()
	g := &google{pub: pub}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" || !g.verify(r.PostForm.Get("assertion")) {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant"}`)
			return
		}
		g.mu.Lock()
		g.exchanges++
		n := g.exchanges
		g.mu.Unlock()
		fmt.Fprintf(w, `{"access_token":"at-%d","expires_in":3600,"token_type":"Bearer"}`, n)
	})
	mux.HandleFunc("POST /v1/projects/shop/messages:send", func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.revoke {
			g.revoke = false
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":{"code":401,"message":"token revoked","status":"UNAUTHENTICATED"}}`)
			return
		}
		if r.Header.Get("Authorization") != fmt.Sprintf("Bearer at-%d", g.exchanges) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var body struct {
			Message map[string]any `json:"message"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		g.messages = append(g.messages, body.Message)
		if g.answer != nil {
			status, h, b := g.answer()
			for k, v := range h {
				w.Header()[k] = v
			}
			w.WriteHeader(status)
			fmt.Fprint(w, b)
			return
		}
		fmt.Fprintf(w, `{"name":"projects/shop/messages/%d"}`, len(g.messages))
	})
	g.Server = httptest.NewServer(mux)
	g.Client().Timeout = 10 * time.Second // every call in a test has a deadline
	t.Cleanup(g.Close)
	return g
}

// verify checks an RS256 JWT's signature and claims.
func (g *google) verify(jwt string) bool {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return false
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return false
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(g.pub, crypto.SHA256, sum[:], sig) != nil {
		return false
	}
	var claims map[string]any
	raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
	_ = json.Unmarshal(raw, &claims)
	return claims["iss"] == "sender@shop.iam.gserviceaccount.com" && claims["scope"] == fcm.Scope &&
		strings.HasSuffix(claims["aud"].(string), "/token")
}

func setup(t testing.TB, now time.Time) (*google, *fcm.Client) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	g := startGoogle(t, &key.PublicKey)
	c, err := fcm.New(fcm.Options{
		Account: fcm.ServiceAccount{ProjectID: "shop", ClientEmail: "sender@shop.iam.gserviceaccount.com",
			PrivateKey: string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), TokenURI: g.URL + "/token"},
		BaseURL: g.URL, Client: g.Client(), Now: func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	return g, c
}

func msg(now time.Time) notify.Message {
	return notify.Message{NotificationID: "ntf_1", Channel: notify.Push, Type: "order.shipped", Category: notify.Critical,
		To: "tok-1", Subject: "Shipped", Body: "Order #42 is on its way", Data: []byte(`{"order":"#42","n":3}`),
		IdempotencyKey: "ntf_1:push", ExpiresAt: now.Add(90 * time.Second)}
}

func TestSendAuthenticatesOnceAndBuildsV1Message(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	g, c := setup(t, now)
	for i := range 3 {
		rc, err := c.Send(context.Background(), msg(now))
		if err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
		if want := fmt.Sprintf("projects/shop/messages/%d", i+1); rc.ProviderMessageID != want {
			t.Errorf("ProviderMessageID = %q, want %q", rc.ProviderMessageID, want)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.exchanges != 1 {
		t.Errorf("token exchanges = %d, want 1 (cached)", g.exchanges)
	}
	m := g.messages[0]
	b, _ := json.Marshal(m)
	for _, want := range []string{`"token":"tok-1"`, `"title":"Shipped"`, `"order":"#42"`, `"n":"3"`, `"notification_id":"ntf_1"`,
		`"ttl":"90s"`, `"priority":"high"`, fmt.Sprintf(`"apns-expiration":"%d"`, now.Add(90*time.Second).Unix())} {
		if !strings.Contains(string(b), want) {
			t.Errorf("message %s lacks %s", b, want)
		}
	}
}

func TestRevokedTokenIsFetchedAgain(t *testing.T) {
	t.Parallel()
	now := time.Now()
	g, c := setup(t, now)
	if _, err := c.Send(context.Background(), msg(now)); err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	g.revoke = true
	g.mu.Unlock()
	if _, err := c.Send(context.Background(), msg(now)); err != nil {
		t.Fatalf("Send after a revoked token: %v", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.exchanges != 2 {
		t.Errorf("exchanges = %d, want 2", g.exchanges)
	}
}

func TestErrorClassification(t *testing.T) {
	t.Parallel()
	fcmErr := func(code int, status, errorCode string) string {
		return fmt.Sprintf(`{"error":{"code":%d,"message":"m","status":%q,"details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":%q}]}}`,
			code, status, errorCode)
	}
	tests := []struct {
		name         string
		status       int
		retryAfter   string
		body         string
		want         string
		unregistered bool
		wantWait     time.Duration
	}{
		{name: "unregistered", status: 404, body: fcmErr(404, "NOT_FOUND", "UNREGISTERED"), want: notify.ClassPermanent, unregistered: true},
		{name: "invalid argument", status: 400, body: fcmErr(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT"), want: notify.ClassPermanent},
		{name: "quota exceeded", status: 429, retryAfter: "30", body: fcmErr(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED"), want: notify.ClassTemporary, wantWait: 30 * time.Second},
		{name: "unavailable", status: 503, retryAfter: "5", body: fcmErr(503, "UNAVAILABLE", "UNAVAILABLE"), want: notify.ClassTemporary, wantWait: 5 * time.Second},
		{name: "bare 500", status: 500, body: `oops`, want: notify.ClassTemporary},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			now := time.Now()
			g, c := setup(t, now)
			g.answer = func() (int, http.Header, string) {
				h := http.Header{}
				if tt.retryAfter != "" {
					h.Set("Retry-After", tt.retryAfter)
				}
				return tt.status, h, tt.body
			}
			_, err := c.Send(context.Background(), msg(now))
			if got := notify.ErrorClass(err); got != tt.want {
				t.Fatalf("Send = %v (%s), want %s", err, got, tt.want)
			}
			if errors.Is(err, notify.ErrUnregistered) != tt.unregistered {
				t.Errorf("errors.Is(%v, ErrUnregistered) = %v, want %v", err, !tt.unregistered, tt.unregistered)
			}
			var se *notify.SendError
			if errors.As(err, &se) && se.RetryAfter != tt.wantWait {
				t.Errorf("RetryAfter = %v, want %v", se.RetryAfter, tt.wantWait)
			}
		})
	}
}

// BenchmarkSend measures messages per second to the in-process FCM v1 API over
// keep-alive connections.
func BenchmarkSend(b *testing.B) {
	now := time.Now()
	g, c := setup(b, now)
	g.Client().Transport.(*http.Transport).MaxIdleConnsPerHost = 64
	m := msg(now)
	enginetest.BenchSend(b, c, m)
}
