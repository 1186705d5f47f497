package notify

import (
	"encoding/json"
	"html"
	"strings"
	"testing"
)

func TestRenderHTML(t *testing.T) {
	t.Parallel()
	data := map[string]json.RawMessage{
		"name": json.RawMessage(`"Ann <b>&</b>"`), "quote": json.RawMessage(`"x\" onmouseover=\"alert(1)"`),
		"link": json.RawMessage(`"https://shop.test/o?a=1&b=2"`), "js": json.RawMessage(`"javascript:alert(1)"`),
		"rel": json.RawMessage(`"/orders/42"`),
	}
	tests := []struct{ name, text, want string }{
		{"text is escaped", "<p>Hi {name}</p>", "<p>Hi Ann &lt;b&gt;&amp;&lt;/b&gt;</p>"},
		{"attribute cannot be ended", `<img alt="{quote}">`, `<img alt="x&#34; onmouseover=&#34;alert(1)">`},
		{"URL attribute keeps a web URL", `<a href="{link}">go</a>`, `<a href="https://shop.test/o?a=1&amp;b=2">go</a>`},
		{"URL attribute refuses javascript:", `<a href="{js}">go</a>`, `<a href="#">go</a>`},
		{"URL attribute keeps a relative URL", `<a href='{rel}'>go</a>`, `<a href='/orders/42'>go</a>`},
		{"URL in text becomes a link", "<p>Track: {link}</p>", `<p>Track: <a href="https://shop.test/o?a=1&amp;b=2">https://shop.test/o?a=1&amp;b=2</a></p>`},
		{"URL inside a link stays text", `<a href="{link}">{link}</a>`, `<a href="https://shop.test/o?a=1&amp;b=2">https://shop.test/o?a=1&amp;b=2</a>`},
		{"fallback is the author's HTML", "{missing|<i>there</i>}", "<i>there</i>"},
		{"double brace is a literal brace", "{{name}", "{name}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := RenderHTML(tt.text, data); got != tt.want {
				t.Errorf("RenderHTML(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}

func TestShippedTemplatesHaveHTML(t *testing.T) {
	t.Parallel()
	data := map[string]json.RawMessage{"order": json.RawMessage(`"<#42>"`), "link": json.RawMessage(`"https://shop.test/track/42"`)}
	for _, typ := range DefaultTypes() {
		tpl, _ := DefaultTemplate(typ)
		c, ok := tpl.Content(Email, "en")
		if !ok || !strings.HasPrefix(c.HTML, "<!doctype html>") {
			t.Fatalf("%s: email content has no HTML part: %q", typ, c.HTML)
		}
		if sms, _ := tpl.Content(SMS, "en"); sms.HTML != "" {
			t.Errorf("%s: the SMS text has an HTML part", typ)
		}
		if errs := ValidateTemplate(tpl); len(errs) > 0 {
			t.Errorf("%s: shipped template invalid: %v", typ, errs)
		}
		out := RenderHTML(c.HTML, data)
		if strings.Contains(out, "<#42>") || strings.Contains(out, "{") {
			t.Errorf("%s: rendered HTML has an unescaped value or a placeholder: %s", typ, out)
		}
	}
	tpl, _ := DefaultTemplate("order.shipped")
	c, _ := tpl.Content(Email, "en")
	if out := RenderHTML(c.HTML, data); !strings.Contains(out, `order &lt;#42&gt; is on its way. Track it: <a href="https://shop.test/track/42">`) {
		t.Errorf("order.shipped HTML = %s", out)
	}
}

func TestValidateTemplateHTML(t *testing.T) {
	t.Parallel()
	base := func(ch string, c Content) Template {
		return Template{Type: "t", Category: Orders, Channels: map[string]map[string]Content{ch: {"en": c}}}
	}
	tests := []struct {
		name  string
		t     Template
		field string
	}{
		{"email html", base("email", Content{Body: "b", HTML: "<p>b</p>"}), ""},
		{"default html", base("default", Content{Body: "b", HTML: "<p>b</p>"}), ""},
		{"sms html", base("sms", Content{Body: "b", HTML: "<p>b</p>"}), "channels.sms.en.html"},
		{"too large", base("email", Content{Body: "b", HTML: strings.Repeat("x", MaxHTMLBytes+1)}), "channels.email.en.html"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			errs := ValidateTemplate(tt.t)
			switch {
			case tt.field == "" && len(errs) > 0:
				t.Errorf("errors %v, want none", errs)
			case tt.field != "" && (len(errs) != 1 || errs[0].Field != tt.field):
				t.Errorf("errors %v, want one on %s", errs, tt.field)
			}
		})
	}
}

// FuzzRenderHTML: whatever a data value holds, it adds no markup of its
// own: in text only the link RenderHTML makes of a URL, in an attribute
// nothing that ends the attribute, in href no unsafe scheme.
func FuzzRenderHTML(f *testing.F) {
	for _, s := range []string{"Ann", "<script>alert(1)</script>", `x" onclick="y`, "https://shop.test/a?b=<c>", "javascript:alert(1)", " JaVaScRiPt:x", "&amp;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		raw, _ := json.Marshal(v)
		data := map[string]json.RawMessage{"v": raw}
		text := RenderHTML("<p>{v}</p>", data)
		if n := strings.Count(text, "<"); n != 2 && !(n == 4 && strings.HasPrefix(text, `<p><a href="`)) {
			t.Errorf("text %q: the value added markup", text)
		}
		attr := RenderHTML(`<a title="{v}" href="{v}">x</a>`, data)
		if strings.Count(attr, `"`) != 4 || strings.Count(attr, "<") != 2 || strings.Count(attr, ">") != 2 {
			t.Errorf("attribute %q: the value ended its attribute or tag", attr)
		}
		href := attr[strings.Index(attr, `href="`)+6:]
		href = strings.ToLower(strings.TrimSpace(html.UnescapeString(href[:strings.IndexByte(href, '"')])))
		for _, bad := range []string{"javascript:", "data:", "vbscript:"} {
			if strings.HasPrefix(href, bad) {
				t.Errorf("href %q kept an unsafe scheme", href)
			}
		}
	})
}
