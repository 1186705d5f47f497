package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSMSGuardAPI: a node with allowed countries answers a notification
// to a number elsewhere with a 422 problem naming the reason, stores
// nothing, counts the refusal in /metrics, and refuses the batch item
// alone.
func TestSMSGuardAPI(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Notify.SMSGuard.AllowedCountries = []string{"US", "GB", "DE"}
	n := startNode(t, cfg)
	base := n.httpURL
	for user, phone := range map[string]string{"ok": "+4915112345678", "ng": "+2348031234567", "premium": "+449098790000"} {
		if code, body := call(t, "PUT", base+"/v1/users/"+user+"/settings", `{"contacts":{"phone":"`+phone+`"}}`); code != 200 {
			t.Fatalf("PUT settings %s = %d %s", user, code, body)
		}
	}
	if code, body := call(t, "POST", base+"/v1/notifications", `{"user_id":"ok","type":"otp","data":{"code":"1"}}`); code != 202 {
		t.Errorf("POST to a DE number = %d %s, want 202", code, body)
	}
	for user, reason := range map[string]string{"ng": "country_not_allowed", "premium": "number_type"} {
		code, body := call(t, "POST", base+"/v1/notifications", `{"user_id":"`+user+`","type":"otp","data":{"code":"1"},"channels":["email","sms"]}`)
		var p struct {
			Type   string
			Detail string
			Errors []struct{ Field, Detail string }
		}
		if err := json.Unmarshal(body, &p); code != 422 || err != nil || len(p.Errors) != 1 || p.Errors[0].Field != "sms" ||
			!strings.HasPrefix(p.Errors[0].Detail, reason) {
			t.Errorf("POST for %s = %d %s, want 422 naming %s", user, code, body, reason)
		}
		if code, body := call(t, "GET", base+"/v1/users/"+user+"/notifications", ""); code != 200 || !strings.Contains(string(body), `"items":[]`) {
			t.Errorf("history of %s = %d %s, want nothing stored", user, code, body)
		}
	}
	code, body := call(t, "POST", base+"/v1/notifications/batch",
		`{"notifications":[{"user_id":"ok","type":"otp","data":{"code":"2"}},{"user_id":"ng","type":"otp","data":{"code":"2"}}]}`)
	var batch struct{ Accepted, Refused int }
	if err := json.Unmarshal(body, &batch); code != 200 || err != nil || batch.Accepted != 1 || batch.Refused != 1 {
		t.Errorf("batch = %d %s, want one accepted, one refused", code, body)
	}
	_, metrics := get(t, base+"/metrics")
	for _, want := range []string{`sluice_notify_sms_guard_refusals_total{reason="country_not_allowed"} 2`,
		`sluice_notify_sms_guard_refusals_total{reason="number_type"} 1`, `sluice_notify_sms_guard_refusals_total{reason="user_velocity"} 0`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestSMSGuardRefusesUnknownCountry: a country code with no numbering
// plan (UK for GB, a common slip) stops the node at start, saying so.
func TestSMSGuardRefusesUnknownCountry(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Notify.SMSGuard.AllowedCountries = []string{"US", "UK"}
	var n node
	n.cfg = cfg
	_, err := n.smsGuard(cfg.Notify.SMSGuard)
	if err == nil || !strings.Contains(err.Error(), "UK") || !strings.Contains(err.Error(), "GB") {
		t.Errorf("smsGuard(UK) = %v, want an error naming UK and GB", err)
	}
}
