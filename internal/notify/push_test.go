package notify_test

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
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/notify/fcm"
	"github.com/sluicehq/sluice/internal/notify/push"
)

// fcmServer is FCM's HTTP v1 API and Google's OAuth token endpoint on
// their wire formats: a JWT bearer assertion verified with the service
// account's public key, then bearer-authenticated v1 sends. Tokens in gone
// are answered 404 UNREGISTERED, as FCM answers for an uninstalled app.
type fcmServer struct {
	*httptest.Server
	mu   sync.Mutex
	to   []string // tokens sent to, accepted or not
	gone map[string]bool
}

func startFCM(t *testing.T, gone ...string) (*fcmServer, *fcm.Client) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s := &fcmServer{gone: map[string]bool{}}
	for _, g := range gone {
		s.gone[g] = true
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" || !verifyRS256(&key.PublicKey, r.PostForm.Get("assertion")) {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant"}`)
			return
		}
		fmt.Fprint(w, `{"access_token":"at-1","expires_in":3600,"token_type":"Bearer"}`)
	})
	mux.HandleFunc("POST /v1/projects/shop/messages:send", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer at-1" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var body struct {
			Message struct {
				Token string `json:"token"`
			} `json:"message"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		s.mu.Lock()
		s.to = append(s.to, body.Message.Token)
		n := len(s.to)
		s.mu.Unlock()
		if s.gone[body.Message.Token] {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":{"code":404,"message":"Requested entity was not found.","status":"NOT_FOUND",
				"details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"UNREGISTERED"}]}}`)
			return
		}
		fmt.Fprintf(w, `{"name":"projects/shop/messages/%d"}`, n)
	})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	c, err := fcm.New(fcm.Options{
		Account: fcm.ServiceAccount{ProjectID: "shop", ClientEmail: "sender@shop.iam.gserviceaccount.com",
			PrivateKey: string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), TokenURI: s.URL + "/token"},
		BaseURL: s.URL, Client: s.Client(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func (s *fcmServer) sentTo() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(slices.Values(s.to))
}

func verifyRS256(pub *rsa.PublicKey, jwt string) bool {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return false
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return false
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	return rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig) == nil
}

// TestPushGoesToEveryToken: a user with three devices gets the push on
// each; the one FCM reports unregistered disappears from the settings, the
// delivery is sent, and its hops hold one result per token.
func TestPushGoesToEveryToken(t *testing.T) {
	t.Parallel()
	api, client := startFCM(t, "tok-gone-2222")
	b := setup(t, func(o *notify.Options) { o.Providers[notify.Push] = &push.Router{FCM: client} })
	st := notify.DefaultSettings()
	st.Contacts.PushTokens = []string{"tok-phone-1111", "tok-gone-2222", "tok-tablet-3333"}
	if _, err := b.svc.PutSettings(t.Context(), "u3", st); err != nil {
		t.Fatal(err)
	}
	a := b.send(t, notify.Request{UserID: "u3", Type: "order.shipped", Channels: []notify.Channel{notify.Push}})
	b.drain(t)
	if got, want := api.sentTo(), []string{"tok-gone-2222", "tok-phone-1111", "tok-tablet-3333"}; !slices.Equal(got, want) {
		t.Errorf("FCM was sent to %v, want %v", got, want)
	}
	got, err := b.svc.Settings(t.Context(), "u3")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"tok-phone-1111", "tok-tablet-3333"}; !slices.Equal(got.Contacts.PushTokens, want) {
		t.Errorf("push tokens = %v, want %v", got.Contacts.PushTokens, want)
	}
	d := b.statuses(t, a.NotificationID)[notify.Push]
	results := map[string]string{}
	for _, h := range d.Hops {
		results[h.To] = h.Result
	}
	want := map[string]string{notify.TokenRef("tok-phone-1111"): "ok", notify.TokenRef("tok-gone-2222"): "permanent",
		notify.TokenRef("tok-tablet-3333"): "ok"}
	if d.Status != notify.StatusSent || d.Attempts != 1 || fmt.Sprint(results) != fmt.Sprint(want) {
		t.Errorf("delivery = %s after %d attempts, hops %v; want sent after 1, hops %v", d.Status, d.Attempts, results, want)
	}
}

// byToken is a push provider whose answer depends on the token.
type byToken struct {
	mu      sync.Mutex
	answers map[string][]error // token -> answers in order; none left is success
	sent    []string
}

func (p *byToken) Name() string       { return "fcm" }
func (p *byToken) NeedsContact() bool { return true }
func (p *byToken) Send(_ context.Context, m notify.Message) (notify.Receipt, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	if a := p.answers[m.To]; len(a) > 0 {
		err, p.answers[m.To] = a[0], a[1:]
	}
	if err == nil {
		p.sent = append(p.sent, m.To)
	}
	return notify.Receipt{}, err
}

// TestPushRetriesOnlyTheTokensNotReached: one device's push fails
// temporarily; the retry goes to that device alone.
func TestPushRetriesOnlyTheTokensNotReached(t *testing.T) {
	t.Parallel()
	p := &byToken{answers: map[string][]error{"tok-b": {notify.Temporary(fmt.Errorf("fcm 503 UNAVAILABLE"), 0)}}}
	b := setup(t, func(o *notify.Options) { o.Providers[notify.Push] = p })
	st := notify.DefaultSettings()
	st.Contacts.PushTokens = []string{"tok-a", "tok-b"}
	if _, err := b.svc.PutSettings(t.Context(), "u4", st); err != nil {
		t.Fatal(err)
	}
	a := b.send(t, notify.Request{UserID: "u4", Type: "order.shipped", Channels: []notify.Channel{notify.Push}})
	b.rounds(t, 1, 10*time.Minute)
	if want := []string{"tok-a", "tok-b"}; !slices.Equal(p.sent, want) {
		t.Errorf("sent to %v, want %v (tok-b once, on the retry)", p.sent, want)
	}
	if d := b.statuses(t, a.NotificationID)[notify.Push]; d.Status != notify.StatusSent || d.Attempts != 2 {
		t.Errorf("delivery = %s after %d attempts, want sent after 2", d.Status, d.Attempts)
	}
}
