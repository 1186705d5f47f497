package notify

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/internal/apperr"
)

// FuzzTemplate feeds arbitrary PUT /v1/templates bodies (and type names)
// through decoding and ValidateTemplate: no panic, and a template that
// passes has content for every channel that renders.
func FuzzTemplate(f *testing.F) {
	f.Add("order.shipped", []byte(`{"category":"orders","channels":{"default":{"en":{"subject":"Shipped","body":"Order {order} is on its way"}}}}`))
	f.Add("otp", []byte(`{"category":"marketing","channels":{"sms":{"en":{"body":"{code}"}}}}`))
	f.Add("x", []byte(`{"category":"orders","channels":{"fax":{"en":{"body":"b"}},"email":{}}}`))
	f.Fuzz(func(t *testing.T, typ string, body []byte) {
		var b struct {
			Category Category                      `json:"category"`
			Channels map[string]map[string]Content `json:"channels"`
		}
		if json.Unmarshal(body, &b) != nil {
			return
		}
		tpl := Template{Type: typ, Category: b.Category, Channels: b.Channels}
		if errs := ValidateTemplate(tpl); len(errs) > 0 {
			for _, e := range errs {
				if e.Field == "" || e.Detail == "" {
					t.Fatalf("ValidateTemplate(%q, %s) gave an unnamed problem %+v", typ, body, e)
				}
			}
			return
		}
		data := map[string]json.RawMessage{"name": json.RawMessage(`"Ann"`)}
		for _, ch := range Channels {
			c, ok := tpl.Content(ch, "pt-BR")
			if _, own := tpl.Channels[string(ch)]; (own || tpl.Channels[DefaultChannel] != nil) && !ok {
				t.Fatalf("valid template %s has no content for %s", body, ch)
			}
			_ = Render(c.Subject, data)
			_ = Render(c.Body, data)
		}
	})
}

// FuzzSettings feeds arbitrary settings through Normalize: every refusal
// is a 422 naming fields, and settings that pass keep critical on, at least
// one channel on, and pass again unchanged.
func FuzzSettings(f *testing.F) {
	f.Add([]byte(`{"Channels":{"email":true,"sms":false},"Categories":{"marketing":false},"Contacts":{"email":"ann@example.com","phone":"+14155550100"},"Locale":"en","Timezone":"Europe/Berlin","QuietHours":{"start":"22:00","end":"07:00"}}`))
	f.Add([]byte(`{"Categories":{"critical":false}}`))
	f.Add([]byte(`{"Channels":{"email":false,"sms":false,"push":false,"webhook":false}}`))
	f.Add([]byte(`{"Timezone":"Local","Locale":"xx_YY","QuietHours":{"start":"25:00","end":"7"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var s Settings
		if json.Unmarshal(body, &s) != nil {
			return
		}
		if err := s.Normalize(); err != nil {
			ae, ok := errors.AsType[*apperr.Error](err)
			if !ok || ae.Code != apperr.Unprocessable || len(ae.Fields) == 0 {
				t.Fatalf("Normalize(%s) = %v, want a 422 naming fields", body, err)
			}
			return
		}
		if !s.Categories[Critical] || !slices.ContainsFunc(Channels, func(ch Channel) bool { return s.Channels[ch] }) {
			t.Fatalf("Normalize(%s) accepted %+v: critical off or every channel off", body, s)
		}
		again := s.Clone()
		if err := again.Normalize(); err != nil {
			t.Fatalf("normalized settings %+v refused on a second pass: %v", s, err)
		}
	})
}
