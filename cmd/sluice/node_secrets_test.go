package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/enginetest"
)

// TestSecretsNeverLogged runs a node configured with every kind of
// secret (an API key, the webhook signing secret, SMTP and Twilio
// credentials, an FCM private key, the dashboard secret), drives it
// through failed and good authentications, a sign-in, failing email and
// webhook deliveries and /readyz, then greps its debug log and the
// /readyz answers for each secret.
func TestSecretsNeverLogged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.LogLevel, cfg.LogFormat = "debug", "json"
	const (
		webhookSecret = "whsec_c2VjcmV0LXdlYmhvb2stc2lnbmluZy1rZXktOTk5"
		smtpPassword  = "smtp-Pa55word-never-logged-7781"
		twilioToken   = "twilio-auth-token-never-logged-4410"
		uiSecret      = "dashboard-secret-never-logged-0123456789abcdef"
	)
	cfg.Notify.Webhook.Secret = webhookSecret
	cfg.AllowPrivate = true // the webhook goes to a local port that hangs up, signed
	pc := &cfg.Notify.Providers
	pc.SMTP.Addr, pc.SMTP.TLS, pc.SMTP.From = enginetest.DeadAddr(t), "none", "noreply@shop.test"
	pc.SMTP.Username, pc.SMTP.Password = "mailer", smtpPassword
	pc.Twilio.BaseURL, pc.Twilio.AccountSID, pc.Twilio.AuthToken, pc.Twilio.From = "http://"+enginetest.DeadAddr(t), "AC1", twilioToken, "+15550001"
	fcmFile, _ := keyFiles(t)
	pc.FCM.CredentialsFile = fcmFile
	cfg.UI.Secret = uiSecret
	fcmKey := fcmPrivateKeyLine(t, fcmFile)

	// An admin key, made as `sluice keys create` makes it.
	db, err := openStore(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	apiKey, key, err := auth.NewKey("ops", []auth.Scope{auth.ScopeAdmin}, time.Now(), nil)
	if err != nil || db.CreateAPIKey(ctx, key) != nil || db.Close() != nil {
		t.Fatalf("create key: %v", err)
	}

	logs := &enginetest.LogBuffer{}
	runCtx, stop := context.WithCancel(ctx)
	addrs := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve(runCtx, cfg, newLogger(logs, cfg), func(b bound) { addrs <- "http://" + b.HTTP })
	}()
	var base string
	select {
	case base = <-addrs:
	case err := <-done:
		stop()
		t.Fatalf("serve: %v\n%s", err, logs)
	}
	stopped := false
	defer func() {
		if !stopped {
			stop()
			<-done
		}
	}()

	do := func(method, path, bearer, body string, header ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := apiClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	var presented []string
	var readyz []string
	_, r1 := do("GET", "/readyz", "", "")
	_, r2 := do("GET", "/readyz", apiKey, "")
	readyz = append(readyz, r1, r2)

	// Deliveries that use the secrets, each failing and logged: email
	// through the SMTP relay, SMS through Twilio and a signed webhook, all
	// to local ports that hang up.
	hook := "http://" + enginetest.DeadAddr(t) + "/hook"
	if code, body := do("PUT", "/v1/users/u1/settings", apiKey, `{"channels":{"email":true,"sms":true,"push":false,"webhook":true},
		"contacts":{"email":"ann@example.com","phone":"+14155550100","webhook_url":"`+hook+`"}}`); code != 200 {
		t.Fatalf("settings = %d %s", code, body)
	}
	code, body := do("POST", "/v1/notifications", apiKey, `{"request_id":"secrets-1","user_id":"u1","type":"order.shipped","data":{"order":"#42","name":"Ann"}}`)
	if code != 202 {
		t.Fatalf("notification = %d %s", code, body)
	}
	var accepted struct {
		NotificationID string `json:"notification_id"`
	}
	_ = json.Unmarshal([]byte(body), &accepted)
	enginetest.EventuallyNil(t, 30*time.Second, "email, SMS and webhook each attempted", func() error {
		_, body := do("GET", "/v1/notifications/"+accepted.NotificationID, apiKey, "")
		var n struct {
			Deliveries []struct {
				Channel  string
				Attempts int
			}
		}
		_ = json.Unmarshal([]byte(body), &n)
		tried := 0
		for _, d := range n.Deliveries {
			if d.Attempts > 0 {
				tried++
			}
		}
		return enginetest.State(tried >= 3, "%s", body)
	})
	_, r3 := do("GET", "/readyz", apiKey, "")
	readyz = append(readyz, r3)

	// Wrong keys until this client is limited: 401s, then 429s, the
	// valid key included.
	var codes []int
	for i := range cfg.AuthFailures + 2 {
		wrong := fmt.Sprintf("sk_wrongGuess%03dQQ", i)
		presented = append(presented, wrong)
		code, _ := do("GET", "/v1/keys", wrong, "")
		codes = append(codes, code)
	}
	if codes[0] != 401 || codes[len(codes)-1] != 429 {
		t.Errorf("wrong-key statuses = %v, want 401s then 429", codes)
	}
	wrongSignIn := "sk_wrongSignInQQ"
	presented = append(presented, wrongSignIn)
	if code, _ := do("POST", "/v1/session", "", `{"key":"`+wrongSignIn+`"}`, "Sec-Fetch-Site", "same-origin"); code != 429 {
		t.Errorf("sign-in from the limited client = %d, want 429", code)
	}
	if code, body := do("GET", "/v1/keys", apiKey, ""); code != 429 {
		t.Errorf("valid key from the limited client = %d %s, want 429", code, body)
	}
	_, r4 := do("GET", "/readyz", "", "")
	readyz = append(readyz, r4)

	stop()
	if err := <-done; err != nil {
		t.Errorf("serve: %v", err)
	}
	stopped = true
	checkNoSecrets(t, logs.String(), readyz, apiKey, presented, webhookSecret, smtpPassword, twilioToken, uiSecret, fcmKey)
}

// fcmPrivateKeyLine returns a line from the middle of the FCM service
// account's private key, which only a leak of the key would show.
func fcmPrivateKeyLine(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var sa struct {
		PrivateKey string `json:"private_key"`
	}
	if err := json.Unmarshal(b, &sa); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(sa.PrivateKey, "\n")
	return lines[len(lines)/2]
}

// checkNoSecrets fails for every secret (or a telling part of it) found in
// the log or a /readyz answer.
func checkNoSecrets(t *testing.T, log string, readyz []string, apiKey string, presented []string, secrets ...string) {
	t.Helper()
	if !strings.Contains(log, "authentication failed") || !strings.Contains(log, "delivery") {
		t.Errorf("the log lacks the failed authentications or the deliveries; is it the node's?\n%s", log)
	}
	// A key's first characters are its public prefix; past them, any run
	// of 12 would identify it.
	needles := append([]string{apiKey, apiKey[len(apiKey)-12:]}, secrets...)
	needles = append(needles, presented...)
	for _, r := range readyz {
		if !strings.Contains(r, "database") {
			t.Errorf("/readyz answer %s: want the engines named", r)
		}
	}
	for _, s := range needles {
		if strings.Contains(log, s) {
			t.Errorf("the log holds the secret %q", s)
		}
		for _, r := range readyz {
			if strings.Contains(r, s) {
				t.Errorf("/readyz holds the secret %q: %s", s, r)
			}
		}
	}
}
