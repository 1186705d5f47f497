package twilio_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/notify/twilio"
)

const (
	sid   = "AC0123456789"
	token = "s3cret"
)

// api is a Twilio Messages API speaking the real wire format: form body,
// Basic auth, JSON answers and Twilio's error bodies.
type api struct {
	*httptest.Server
	mu     sync.Mutex
	forms  []url.Values
	answer func(form url.Values) (status int, header http.Header, body any)
}

func startAPI(t testing.TB) *api {
	t.Helper()
	a := &api{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/2010-04-01/Accounts/"+sid+"/Messages.json" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		if u, p, ok := r.BasicAuth(); !ok || u != sid || p != token {
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(map[string]any{"code": 20003, "message": "Authenticate", "status": 401})
			return
		}
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		a.mu.Lock()
		a.forms = append(a.forms, r.PostForm)
		answer := a.answer
		a.mu.Unlock()
		status, header, body := http.StatusCreated, http.Header{}, any(map[string]any{"sid": "SM" + r.PostForm.Get("To")[1:], "status": "queued"})
		if answer != nil {
			status, header, body = answer(r.PostForm)
		}
		for k, v := range header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	}))
	a.Client().Timeout = 10 * time.Second // every call in a test has a deadline
	t.Cleanup(a.Close)
	return a
}

func newClient(t testing.TB, a *api, now time.Time) *twilio.Client {
	t.Helper()
	c, err := twilio.New(twilio.Options{BaseURL: a.URL, AccountSID: sid, AuthToken: token, From: "+15550001111",
		CallbackURL: "https://sluice.test/v1/providers/twilio/callbacks", Client: a.Client(), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSendForm(t *testing.T) {
	t.Parallel()
	a := startAPI(t)
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	c := newClient(t, a, now)
	m := notify.Message{NotificationID: "ntf_1", Channel: notify.SMS, To: "+4915112345678", Body: "Your code is 123456",
		IdempotencyKey: "ntf_1:sms", ExpiresAt: now.Add(5 * time.Minute)}
	rc, err := c.Send(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	if rc.ProviderMessageID != "SM4915112345678" {
		t.Errorf("ProviderMessageID = %q", rc.ProviderMessageID)
	}
	f := a.forms[0]
	want := map[string]string{"To": "+4915112345678", "From": "+15550001111", "Body": "Your code is 123456",
		"ValidityPeriod": "300", "StatusCallback": "https://sluice.test/v1/providers/twilio/callbacks?delivery=ntf_1%3Asms"}
	for k, v := range want {
		if f.Get(k) != v {
			t.Errorf("form %s = %q, want %q", k, f.Get(k), v)
		}
	}
}

func TestErrorClassification(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		status     int
		code       int
		retryAfter string
		want       string
		wantWait   time.Duration
	}{
		{name: "invalid number", status: 400, code: 21211, want: notify.ClassPermanent},
		{name: "unsubscribed", status: 400, code: 21610, want: notify.ClassPermanent},
		{name: "not a mobile", status: 400, code: 21614, want: notify.ClassPermanent},
		{name: "too many requests", status: 429, code: 20429, retryAfter: "7", want: notify.ClassTemporary, wantWait: 7 * time.Second},
		{name: "server error", status: 503, code: 20503, want: notify.ClassTemporary},
		{name: "unreachable handset", status: 400, code: 30003, want: notify.ClassTemporary},
		{name: "unknown 4xx", status: 400, code: 21999, want: notify.ClassPermanent},
		{name: "bad credentials", status: 401, code: 20003, want: notify.ClassTemporary},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := startAPI(t)
			a.answer = func(url.Values) (int, http.Header, any) {
				h := http.Header{}
				if tt.retryAfter != "" {
					h.Set("Retry-After", tt.retryAfter)
				}
				return tt.status, h, map[string]any{"code": tt.code, "message": tt.name, "status": tt.status}
			}
			c := newClient(t, a, time.Now())
			_, err := c.Send(context.Background(), notify.Message{To: "+15551234567", Body: "x", IdempotencyKey: "n:sms"})
			if got := notify.ErrorClass(err); got != tt.want {
				t.Fatalf("Send = %v (%s), want %s", err, got, tt.want)
			}
			var se *notify.SendError
			if errors.As(err, &se) && se.RetryAfter != tt.wantWait {
				t.Errorf("RetryAfter = %v, want %v", se.RetryAfter, tt.wantWait)
			}
		})
	}
}

func TestSignatureMatchesTwilioDocs(t *testing.T) {
	t.Parallel()
	// The worked example of Twilio's webhook security docs (both callers
	// appear in its SDKs' test suites).
	tests := []struct{ caller, want string }{
		{"+14158675309", "RSOYDt4T1cUTdK1PDd93/VVr8B8="},
		{"+14158675310", "GvWf1cFY/Q7PnoempGyD5oXAezc="},
	}
	for _, tt := range tests {
		form := url.Values{"CallSid": {"CA1234567890ABCDE"}, "Caller": {tt.caller}, "Digits": {"1234"},
			"From": {tt.caller}, "To": {"+18005551212"}}
		if got := twilio.Signature("12345", "https://mycompany.com/myapp.php?foo=1&bar=2", form); got != tt.want {
			t.Errorf("Signature(caller %s) = %q, want %q", tt.caller, got, tt.want)
		}
	}
}

func TestParseCallback(t *testing.T) {
	t.Parallel()
	a := startAPI(t)
	c := newClient(t, a, time.Now())
	const full = "https://sluice.test/v1/providers/twilio/callbacks?delivery=ntf_1%3Asms"
	tests := []struct {
		name    string
		form    url.Values
		sign    string // URL signed; "" for full
		tamper  bool
		want    notify.Status
		wantErr error
		wantMsg string
	}{
		{name: "delivered", form: url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"delivered"}}, want: notify.StatusDelivered},
		{name: "undelivered", form: url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"undelivered"}, "ErrorCode": {"30003"}},
			want: notify.StatusFailed, wantMsg: "twilio undelivered code 30003: unreachable destination handset"},
		{name: "sent is not final", form: url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"sent"}}, want: notify.StatusSent},
		{name: "tampered body", form: url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"delivered"}}, tamper: true, wantErr: notify.ErrBadSignature},
		{name: "another delivery's URL", form: url.Values{"MessageStatus": {"delivered"}}, sign: strings.Replace(full, "ntf_1", "ntf_2", 1), wantErr: notify.ErrBadSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			signed := full
			if tt.sign != "" {
				signed = tt.sign
			}
			sig := twilio.Signature(token, signed, tt.form)
			form := tt.form
			if tt.tamper {
				form = url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"failed"}}
			}
			cb := notify.Callback{RequestURI: "/v1/providers/twilio/callbacks?delivery=ntf_1%3Asms",
				Header: http.Header{"X-Twilio-Signature": {sig}}, Form: form}
			rs, err := c.ParseCallback(cb)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ParseCallback = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r := rs[0]
			if r.Key != (notify.DeliveryKey{NotificationID: "ntf_1", Channel: notify.SMS}) || r.Status != tt.want || r.Error != tt.wantMsg {
				t.Errorf("report = %+v, want %s %q", r, tt.want, tt.wantMsg)
			}
		})
	}
}

// BenchmarkSend measures messages per second to the in-process Messages API over
// keep-alive connections.
func BenchmarkSend(b *testing.B) {
	a := startAPI(b)
	a.Client().Transport.(*http.Transport).MaxIdleConnsPerHost = 64
	c := newClient(b, a, time.Now())
	m := notify.Message{To: "+4915112345678", Body: "Your code is 123456", IdempotencyKey: "ntf_1:sms"}
	enginetest.BenchSend(b, c, m)
}

// FuzzParseCallback feeds arbitrary callback URLs, bodies and signatures:
// no panic, and a report only for a callback signed with the auth token.
func FuzzParseCallback(f *testing.F) {
	f.Add("/v1/providers/twilio/callbacks?delivery=ntf_1%3Asms", "MessageSid=SM1&MessageStatus=delivered", "")
	f.Add("/v1/providers/twilio/callbacks?delivery=%zz", "MessageStatus=failed&ErrorCode=30003", "abc=")
	f.Add("/cb?delivery=a:b:c&delivery=x", "", "GvWf1cFY/Q7PnoempGyD5oXAezc=")
	f.Add("/cb?delivery=ntf_2%3Asms", "MessageStatus=undelivered&ErrorCode=21610", "sign")
	c, err := twilio.New(twilio.Options{AccountSID: "AC1", AuthToken: token, From: "+1555", CallbackURL: "https://sluice.test/cb"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, uri, body, sig string) {
		form, err := url.ParseQuery(body)
		if err != nil {
			return
		}
		_, query, _ := strings.Cut(uri, "?")
		full := "https://sluice.test/cb"
		if query != "" {
			full += "?" + query
		}
		signed := sig == "sign"
		if signed {
			sig = twilio.Signature(token, full, form)
		}
		rs, err := c.ParseCallback(notify.Callback{RequestURI: uri, Header: http.Header{"X-Twilio-Signature": {sig}}, Form: form})
		if err == nil && !signed && sig != twilio.Signature(token, full, form) {
			t.Fatalf("accepted a callback with a wrong signature: %+v", rs)
		}
	})
}
