package notify

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	t.Parallel()
	data := map[string]json.RawMessage{
		"name": json.RawMessage(`"Ann"`), "order": json.RawMessage(`"#42"`), "n": json.RawMessage(`3`),
		"obj": json.RawMessage(`{"a":1}`), "null": json.RawMessage(`null`), "inject": json.RawMessage(`"{name}"`),
		"esc": json.RawMessage(`"a\"b\u00e9"`),
	}
	tests := []struct{ name, text, want string }{
		{"plain", "hello", "hello"},
		{"strings", "Hi {name}, order {order}", "Hi Ann, order #42"},
		{"numbers and objects as JSON", "{n} {obj}", `3 {"a":1}`},
		{"absent and null are empty", "[{missing}][{null}]", "[][]"},
		{"values are not re-scanned", "{inject}", "{name}"},
		{"escapes decoded", "{esc}", `a"bé`},
		{"double brace is a literal brace", "{{name}", "{name}"},
		{"unclosed brace is literal", "a {name", "a {name"},
		{"empty braces are literal", "a {} b", "a {} b"},
		{"bad name is literal", "{na me} {name}", "{na me} Ann"},
		{"adjacent", "{name}{order}", "Ann#42"},
		{"fallback when absent", "Hi {who|there}", "Hi there"},
		{"fallback when null", "[{null|none}]", "[none]"},
		{"fallback unused with data", "Hi {name|there}", "Hi Ann"},
		{"empty fallback is an optional part", "a{missing|}b", "ab"},
		{"fallback keeps punctuation", "{missing|a, b: c.}", "a, b: c."},
		{"brace in a fallback is literal", "{missing|a{b}", "{missing|a"},
		{"no name before the bar is literal", "{|x} {name}", "{|x} Ann"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Render(tt.text, data); got != tt.want {
				t.Errorf("Render(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}

func TestMissing(t *testing.T) {
	t.Parallel()
	data := map[string]json.RawMessage{"name": json.RawMessage(`"Ann"`), "empty": json.RawMessage(`""`)}
	got := Missing("{name} {order} {link|x} {empty} {code|}", data)
	if strings.Join(got, ",") != "order,empty" {
		t.Errorf("Missing = %v, want [order empty]", got)
	}
}

// TestShippedTemplatesReadWell renders every shipped template with only
// its essential data: each other placeholder has a fallback, so no message
// has a gap ("Track it: " with nothing after it).
func TestShippedTemplatesReadWell(t *testing.T) {
	t.Parallel()
	essential := map[string][]string{"otp": {"code"}, "password_reset": {"link"}}
	for _, typ := range DefaultTypes() {
		tpl, _ := DefaultTemplate(typ)
		c, _ := tpl.Content(Email, "en")
		need := essential[typ]
		if strings.HasPrefix(typ, "order.") || typ == "payment_failed" {
			need = []string{"order"}
		}
		data := map[string]json.RawMessage{}
		for _, n := range need {
			data[n] = json.RawMessage(`"X1"`)
		}
		for _, text := range []string{c.Subject, c.Body} {
			if m := Missing(text, data); len(m) > 0 {
				t.Errorf("%s: %q leaves %v empty without data; give them a fallback", typ, text, m)
			}
			out := Render(text, data)
			if strings.Contains(out, "  ") || strings.Contains(out, " .") || strings.HasSuffix(out, ": ") ||
				strings.HasSuffix(out, " ") || strings.Contains(out, "{") {
				t.Errorf("%s: %q renders as %q, with a gap", typ, text, out)
			}
		}
	}
}

func FuzzRender(f *testing.F) {
	for _, s := range []string{"Hi {name}", "{name|there}", "{a|}", "{{", "{", "}{", "{a}{b}{{c}}", "{\xff}", strings.Repeat("{x}", 10)} {
		f.Add(s, `"v"`)
	}
	f.Fuzz(func(t *testing.T, text, value string) {
		if !json.Valid([]byte(value)) {
			value = `"v"`
		}
		data := map[string]json.RawMessage{"name": json.RawMessage(value), "x": json.RawMessage(value)}
		out := Render(text, data)
		if !strings.Contains(text, "{") && out != text {
			t.Fatalf("Render(%q) = %q; text without braces must come back unchanged", text, out)
		}
		// Rendering is a function of the text: the same input, the same output.
		if again := Render(text, data); again != out {
			t.Fatalf("Render(%q) not deterministic: %q then %q", text, out, again)
		}
	})
}

func TestDefaultTemplatesCoverTheThirteenTypes(t *testing.T) {
	t.Parallel()
	want := map[string]Category{
		"otp": Critical, "password_reset": Critical, "login_alert": Critical, "payment_failed": Critical,
		"order.confirmed": Orders, "order.shipped": Orders, "order.delivered": Orders, "order.cancelled": Orders, "order.refunded": Orders,
		"flash_sale": Marketing, "price_drop": Marketing, "back_in_stock": Marketing, "abandoned_cart": Marketing,
	}
	if got := DefaultTypes(); len(got) != len(want) {
		t.Fatalf("DefaultTypes() = %q, want the %d default types", got, len(want))
	}
	for typ, cat := range want {
		tpl, ok := DefaultTemplate(typ)
		if !ok || tpl.Category != cat {
			t.Errorf("DefaultTemplate(%q) = %v, %v; want category %s", typ, tpl.Category, ok, cat)
			continue
		}
		if errs := ValidateTemplate(tpl); len(errs) > 0 {
			t.Errorf("shipped template %q is invalid: %v", typ, errs)
		}
		for _, ch := range Channels {
			if c, ok := tpl.Content(ch, "de-AT"); !ok || c.Body == "" {
				t.Errorf("template %q has no body for %s in an unknown locale", typ, ch)
			}
		}
	}
}

func TestTemplateContentFallbacks(t *testing.T) {
	t.Parallel()
	tpl := Template{Channels: map[string]map[string]Content{
		"default": {"en": {Body: "default en"}, "de": {Body: "default de"}},
		"sms":     {"pt-BR": {Body: "sms pt-BR"}, "fr": {Body: "sms fr"}},
	}}
	tests := []struct {
		ch     Channel
		locale string
		want   string
	}{
		{Email, "de", "default de"},
		{Email, "de-CH", "default de"},
		{Email, "ja", "default en"},
		{SMS, "pt-BR", "sms pt-BR"},
		{SMS, "fr-CA", "sms fr"},
		{SMS, "ja", "sms fr"}, // the channel's own text in any locale beats the default channel
	}
	for _, tt := range tests {
		if c, _ := tpl.Content(tt.ch, tt.locale); c.Body != tt.want {
			t.Errorf("Content(%s, %s) = %q, want %q", tt.ch, tt.locale, c.Body, tt.want)
		}
	}
}

func TestValidateTemplate(t *testing.T) {
	t.Parallel()
	ok := map[string]map[string]Content{"default": {"en": {Subject: "s", Body: "b"}}}
	tests := []struct {
		name  string
		t     Template
		field string // "" for valid
	}{
		{"valid new type", Template{Type: "invoice.ready", Category: Orders, Channels: ok}, ""},
		{"shipped type keeps its category", Template{Type: "otp", Category: Marketing, Channels: ok}, "category"},
		{"unknown category", Template{Type: "x", Category: "urgent", Channels: ok}, "category"},
		{"no channels", Template{Type: "x", Category: Orders}, "channels"},
		{"unknown channel", Template{Type: "x", Category: Orders, Channels: map[string]map[string]Content{"fax": {"en": {Body: "b"}}}}, "channels.fax"},
		{"bad locale", Template{Type: "x", Category: Orders, Channels: map[string]map[string]Content{"email": {"english": {Body: "b"}}}}, "channels.email.english"},
		{"empty body", Template{Type: "x", Category: Orders, Channels: map[string]map[string]Content{"email": {"en": {Subject: "s"}}}}, "channels.email.en.body"},
		{"bad type", Template{Type: "a b", Category: Orders, Channels: ok}, "type"},
	}
	for _, tt := range tests {
		errs := ValidateTemplate(tt.t)
		switch {
		case tt.field == "" && len(errs) > 0:
			t.Errorf("%s: ValidateTemplate = %v, want valid", tt.name, errs)
		case tt.field != "" && (len(errs) == 0 || errs[0].Field != tt.field):
			t.Errorf("%s: ValidateTemplate = %v, want an error on %s", tt.name, errs, tt.field)
		}
	}
}
