package httpapi

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// FuzzNotificationBody feeds arbitrary bodies through the POST
// /v1/notifications decoding and validation: nothing may panic, every
// refusal is a client error naming a reason, and whatever passes is a
// request the pipeline can store.
func FuzzNotificationBody(f *testing.F) {
	for _, s := range []string{
		`{"request_id":"order-9001-shipped","user_id":"u1","type":"order.shipped","data":{"order":"#42"},"expires_at":"2026-12-01T10:00:00Z"}`,
		`{"user_id":"u1","type":"otp","channels":["email","sms"]}`,
		`{"user_id":"","type":""}`, `{"data":[1,2]}`, `{"expires_at":"soon"}`, `{"channels":["fax","fax"]}`,
		`{"user_id":"u\u0000","type":"otp","data":null}`, `[]`, `{`, ``, `{"user_id":"u1","type":"otp","extra":1}`,
	} {
		f.Add([]byte(s), "")
	}
	f.Add([]byte(`{"user_id":"u1","type":"otp"}`), "idem-1")
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body []byte, idemKey string) {
		var b notificationRequest
		err := decodeBody(body, &b)
		checkRefusal(t, err)
		if err != nil {
			return
		}
		req, err := b.toRequest(idemKey)
		checkRefusal(t, err)
		if err != nil {
			return
		}
		valid, err := req.Validate(now)
		checkRefusal(t, err)
		if err != nil {
			return
		}
		if valid.UserID == "" || valid.Type == "" || len(valid.Data) > 64<<10 || !json.Valid(valid.Data) || valid.Data[0] != '{' {
			t.Fatalf("accepted an unstorable request: %+v", valid)
		}
		if len(valid.RequestID) > 255 || (!valid.ExpiresAt.IsZero() && !valid.ExpiresAt.After(now)) {
			t.Fatalf("accepted a bad request_id or expiry: %+v", valid)
		}
	})
}

func checkRefusal(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	ae, ok := errors.AsType[*apperr.Error](err)
	if !ok {
		t.Fatalf("refusal %v is not an *apperr.Error", err)
	}
	if ae.Code != apperr.Invalid && ae.Code != apperr.Unprocessable {
		t.Fatalf("refusal %v has code %s, want invalid or unprocessable", err, ae.Code)
	}
	if ae.Message == "" && len(ae.Fields) == 0 {
		t.Fatalf("refusal %v says nothing", err)
	}
}
