package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/notify"
)

func setupTemplates(t *testing.T) *bundle {
	t.Helper()
	b := setup(t)
	svc := notify.NewService(notify.Options{Store: b.db})
	b.srv = New(Options{Logger: slog.New(slog.DiscardHandler), Keys: b.db, Notify: svc})
	return b
}

// listTemplateItems answers GET /v1/templates by type.
func listTemplateItems(t *testing.T, b *bundle, key string) map[string]templateItemJSON {
	t.Helper()
	resp := b.do(call{method: "GET", path: "/v1/templates", key: key})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/templates = %d", resp.StatusCode)
	}
	var page struct {
		Items []templateItemJSON `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	if !slices.IsSortedFunc(page.Items, func(a, b templateItemJSON) int { return strings.Compare(a.Type, b.Type) }) {
		t.Errorf("GET /v1/templates items are not sorted by type: %+v", page.Items)
	}
	out := map[string]templateItemJSON{}
	for _, it := range page.Items {
		out[it.Type] = it
	}
	return out
}

func TestTemplatesListAndReset(t *testing.T) {
	t.Parallel()
	b := setupTemplates(t)
	admin, reader := b.addKey(t, auth.ScopeAdmin), b.addKey(t, auth.ScopeNotifyRead)

	items := listTemplateItems(t, b, reader)
	if len(items) != len(notify.DefaultTypes()) {
		t.Errorf("GET /v1/templates lists %d types, want the %d shipped ones", len(items), len(notify.DefaultTypes()))
	}
	if otp := items["otp"]; !otp.Default || otp.Category != notify.Critical || !slices.Equal(otp.Locales, []string{"en"}) ||
		!slices.Contains(otp.Channels, "default") || otp.UpdatedAt != "" {
		t.Errorf("otp item = %+v; want default, critical, locale en, a default channel, no updated_at", otp)
	}

	// An override of a shipped type and a custom type.
	put := func(typ, body string) {
		t.Helper()
		if r := b.do(call{method: "PUT", path: "/v1/templates/" + typ, key: admin, body: body}); r.StatusCode != http.StatusOK {
			t.Fatalf("PUT /v1/templates/%s = %d: %+v", typ, r.StatusCode, decodeProblem(t, r))
		}
	}
	put("otp", `{"channels":{"sms":{"en":{"body":"code {code}"},"fr":{"body":"code {code}"}}}}`)
	put("invoice.ready", `{"category":"orders","channels":{"email":{"de":{"subject":"Rechnung","body":"{n}"}}}}`)
	items = listTemplateItems(t, b, reader)
	if otp := items["otp"]; otp.Default || !slices.Equal(otp.Channels, []string{"sms"}) || !slices.Equal(otp.Locales, []string{"en", "fr"}) || otp.UpdatedAt == "" {
		t.Errorf("overridden otp item = %+v; want not default, channels [sms], locales [en fr], updated_at", otp)
	}
	if inv := items["invoice.ready"]; inv.Default || inv.Shipped || !items["otp"].Shipped || inv.Category != notify.Orders || !slices.Equal(inv.Locales, []string{"de"}) {
		t.Errorf("custom item = %+v", inv)
	}

	// Reading needs notify:read; resetting needs admin.
	if r := b.do(call{method: "DELETE", path: "/v1/templates/otp", key: reader}); r.StatusCode != http.StatusForbidden {
		t.Errorf("DELETE with a notify:read key = %d, want 403", r.StatusCode)
	}
	if r := b.do(call{method: "DELETE", path: "/v1/templates/otp", key: admin}); r.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE /v1/templates/otp = %d, want 204", r.StatusCode)
	}
	resp := b.do(call{method: "GET", path: "/v1/templates/otp", key: reader})
	var got templateJSON
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || !got.Default || got.Channels["default"] == nil {
		t.Errorf("GET /v1/templates/otp after reset = %+v, %v; want the shipped template", got, err)
	}
	if r := b.do(call{method: "DELETE", path: "/v1/templates/otp", key: admin}); r.StatusCode != http.StatusNotFound {
		t.Errorf("DELETE of a shipped type with no override = %d, want 404", r.StatusCode)
	} else {
		decodeProblem(t, r)
	}

	if r := b.do(call{method: "DELETE", path: "/v1/templates/invoice.ready", key: admin}); r.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE /v1/templates/invoice.ready = %d, want 204", r.StatusCode)
	}
	if r := b.do(call{method: "GET", path: "/v1/templates/invoice.ready", key: reader}); r.StatusCode != http.StatusNotFound {
		t.Errorf("GET a removed custom type = %d, want 404", r.StatusCode)
	}
	r := b.do(call{method: "POST", path: "/v1/notifications", key: admin, body: `{"user_id":"u1","type":"invoice.ready"}`})
	if r.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("sending a removed custom type = %d, want 422", r.StatusCode)
	}
	if r := b.do(call{method: "DELETE", path: "/v1/templates/never.defined", key: admin}); r.StatusCode != http.StatusNotFound {
		t.Errorf("DELETE of an unknown type = %d, want 404", r.StatusCode)
	}
	items = listTemplateItems(t, b, reader)
	if _, ok := items["invoice.ready"]; ok || !items["otp"].Default || len(items) != len(notify.DefaultTypes()) {
		t.Errorf("GET /v1/templates after the deletes = %+v; want the shipped types only, all default", items)
	}
}
