package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestPreferencePageChangesSettings mints a preference link on a running
// node, changes a switch through it as the page does, and finds the change
// in the user's settings; turning critical off is refused with 422.
func TestPreferencePageChangesSettings(t *testing.T) {
	t.Parallel()
	n := startNode(t, testConfig(t))
	do := func(method, path, token, body string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, n.httpURL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("X-Preference-Token", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}

	code, body := do("POST", "/v1/users/ann/preference-link", "", "")
	if code != 200 {
		t.Fatalf("mint link = %d %s", code, body)
	}
	var link struct{ URL, Token string }
	if err := json.Unmarshal(body, &link); err != nil || link.Token == "" || !strings.Contains(link.URL, "#t="+link.Token) {
		t.Fatalf("link = %s (%v)", body, err)
	}

	if code, _ := do("GET", "/v1/preferences", "forged.0.token", ""); code != 401 {
		t.Errorf("forged token: status %d, want 401", code)
	}
	code, body = do("GET", "/v1/preferences", link.Token, "")
	if code != 200 || !strings.Contains(string(body), `"marketing":true`) {
		t.Fatalf("preferences = %d %s, want marketing on by default", code, body)
	}
	code, body = do("PUT", "/v1/preferences", link.Token, `{"categories":{"marketing":false},"channels":{"sms":false}}`)
	if code != 200 {
		t.Fatalf("turn marketing off = %d %s", code, body)
	}
	code, body = do("PUT", "/v1/preferences", link.Token, `{"categories":{"critical":false}}`)
	if code != 422 || !strings.Contains(string(body), "critical") {
		t.Errorf("turn critical off = %d %s, want 422 naming critical", code, body)
	}

	code, body = do("GET", "/v1/users/ann/settings", "", "")
	if code != 200 {
		t.Fatalf("settings = %d %s", code, body)
	}
	var st struct {
		Channels   map[string]bool
		Categories map[string]bool
	}
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	if st.Categories["marketing"] || !st.Categories["critical"] || st.Channels["sms"] || !st.Channels["email"] {
		t.Errorf("settings after the page = %s; want marketing and sms off, critical and email on", body)
	}
}
