package notify

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// Content is one channel's text in one locale. Subject, Body and HTML may
// hold {placeholder} fields, filled from the notification's data.
type Content struct {
	Subject string `json:"subject"`
	Body    string `json:"body"`
	// HTML, for email, is the message's HTML part, sent beside Body as
	// multipart/alternative; its placeholders are escaped for HTML (see
	// RenderHTML). Empty sends Body alone.
	HTML string `json:"html,omitempty"`
}

// Template is the text of one notification type: per channel, per locale.
// The channel "default" is used for channels without their own entry, and
// the locale "en" for users whose locale has none.
type Template struct {
	Type     string
	Category Category
	Channels map[string]map[string]Content // channel or "default" -> locale -> content
	// Default reports a shipped template nobody has replaced.
	Default   bool
	UpdatedAt time.Time
	// Digest, when set, gathers the type's notifications into one message
	// per user and channel per window (see digest.go); nil sends each.
	Digest *DigestRule
	// Escalation, when set, holds channels back until the others went
	// unanswered for a while (see escalation.go); nil sends every channel
	// at once.
	Escalation *EscalationRule
	// TrackLinks turns the links of the type's email into tracked links,
	// as notify.email.track_links does for every type (see emailtrack.go).
	TrackLinks bool
}

// DefaultChannel and DefaultLocale are the fallbacks of a Template.
const (
	DefaultChannel = "default"
	DefaultLocale  = "en"
)

// Content returns the text for ch in locale, falling back to the default
// channel and to DefaultLocale, then to any locale in sorted order.
func (t Template) Content(ch Channel, locale string) (Content, bool) {
	for _, c := range []string{string(ch), DefaultChannel} {
		locales, ok := t.Channels[c]
		if !ok {
			continue
		}
		for _, l := range []string{locale, baseLocale(locale), DefaultLocale} {
			if content, ok := locales[l]; ok {
				return content, true
			}
		}
		for _, l := range sortedKeys(locales) {
			return locales[l], true
		}
	}
	return Content{}, false
}

// baseLocale turns "en-GB" into "en".
func baseLocale(l string) string {
	base, _, _ := strings.Cut(l, "-")
	return base
}

// defaultTypes maps each shipped type to its category.
var defaultTypes = map[string]Category{
	"otp": Critical, "password_reset": Critical, "login_alert": Critical, "payment_failed": Critical,
	"order.confirmed": Orders, "order.shipped": Orders, "order.delivered": Orders,
	"order.cancelled": Orders, "order.refunded": Orders,
	"flash_sale": Marketing, "price_drop": Marketing, "back_in_stock": Marketing, "abandoned_cart": Marketing,
}

// defaultText is the shipped English text per type: subject, then body. The
// SMS and push channels use the body alone, so it stands on its own.
var defaultText = map[string][2]string{
	"otp":             {"Your {app|verification} code", "Your {app|verification} code is {code}. It expires in {minutes|a few} minutes. Never share it."},
	"password_reset":  {"Reset your password", "Reset your password with this link: {no_track link}. If you did not ask, ignore this."},
	"login_alert":     {"New sign-in to your account", "New sign-in from {device|a new device} near {location|an unknown place} at {time|a recent time}. Not you? Secure your account: {link|open your account settings}"},
	"payment_failed":  {"Payment failed for order {order}", "Hi {name|there}, the payment for order {order} failed: {reason|the payment was declined}. Update it here: {link|see your account}"},
	"order.confirmed": {"Order {order} confirmed", "Hi {name|there}, thanks for your order {order}. We will tell you when it ships."},
	"order.shipped":   {"Order {order} shipped", "Hi {name|there}, order {order} is on its way. Track it: {link|see your orders page}"},
	"order.delivered": {"Order {order} delivered", "Hi {name|there}, order {order} was delivered. Enjoy!"},
	"order.cancelled": {"Order {order} cancelled", "Hi {name|there}, order {order} was cancelled. {reason|We are sorry for the trouble.}"},
	"order.refunded":  {"Refund for order {order}", "Hi {name|there}, we refunded {amount|the amount paid} for order {order}."},
	"flash_sale":      {"Flash sale: {discount|a lot} off", "{name|Hi}, a flash sale just started: {discount|a lot} off until {ends|it ends}. {link|Have a look in our shop.}"},
	"price_drop":      {"Price drop on {product|an item you watch}", "{product|An item you watch} is now {price|cheaper}. {link|Have a look in our shop.}"},
	"back_in_stock":   {"{product|An item you wanted} is back in stock", "{product|An item you wanted} is back in stock. {link|Have a look in our shop.}"},
	"abandoned_cart":  {"You left something in your cart", "{name|Hi}, your cart is waiting: {items|your items}. {link|Have a look in our shop.}"},
}

// DefaultTemplate returns the shipped template of typ.
func DefaultTemplate(typ string) (Template, bool) {
	cat, ok := defaultTypes[typ]
	if !ok {
		return Template{}, false
	}
	text := defaultText[typ]
	return Template{
		Type:     typ,
		Category: cat,
		Default:  true,
		Channels: map[string]map[string]Content{
			DefaultChannel: {DefaultLocale: {Subject: text[0], Body: text[1], HTML: defaultHTML(text[0], text[1])}},
			string(SMS):    {DefaultLocale: {Body: text[1]}},
		},
	}, true
}

// DefaultTypes lists the shipped types, sorted.
func DefaultTypes() []string { return sortedKeys(defaultTypes) }

// ValidateTemplate checks a template given by a user and names every bad
// field: a known category, known channel keys, locale names and text sizes.
func ValidateTemplate(t Template) []apperr.FieldError {
	var errs []apperr.FieldError
	if !validType(t.Type) {
		errs = append(errs, fe("type", "must be 1-100 letters, digits, '.', '_' or '-'"))
	}
	if def, ok := defaultTypes[t.Type]; ok && t.Category != "" && t.Category != def {
		errs = append(errs, fe("category", fmt.Sprintf("%s is a shipped type of category %s", t.Type, def)))
	} else if !t.Category.Valid() {
		errs = append(errs, fe("category", "must be critical, orders or marketing"))
	}
	if len(t.Channels) == 0 {
		errs = append(errs, fe("channels", "at least one channel (or \"default\") is required"))
	}
	errs = append(errs, validateRules(t)...)
	for _, ch := range sortedKeys(t.Channels) {
		if ch != DefaultChannel && !Channel(ch).Valid() {
			errs = append(errs, fe("channels."+ch, "unknown channel (want email, sms, push, webhook, inapp or default)"))
			continue
		}
		if len(t.Channels[ch]) == 0 {
			errs = append(errs, fe("channels."+ch, "at least one locale is required"))
		}
		for _, l := range sortedKeys(t.Channels[ch]) {
			c := t.Channels[ch][l]
			field := "channels." + ch + "." + l
			switch {
			case !validLocale(l):
				errs = append(errs, fe(field, "locale must look like en or pt-BR"))
			case c.Body == "":
				errs = append(errs, fe(field+".body", "is required"))
			case len(c.Subject) > 1000:
				errs = append(errs, fe(field+".subject", "must be at most 1000 bytes"))
			case len(c.Body) > 64<<10:
				errs = append(errs, fe(field+".body", "must be at most 64 KiB"))
			case c.HTML != "" && ch != string(Email) && ch != DefaultChannel:
				errs = append(errs, fe(field+".html", "only email (or default, used by email) has an HTML part"))
			case len(c.HTML) > MaxHTMLBytes:
				errs = append(errs, fe(field+".html", "must be at most 256 KiB"))
			}
		}
	}
	return errs
}

func validType(s string) bool {
	if s == "" || len(s) > 100 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

func validLocale(l string) bool {
	base, region, hasRegion := strings.Cut(l, "-")
	if len(base) < 2 || len(base) > 3 || !isLetters(base) {
		return false
	}
	return !hasRegion || (len(region) >= 2 && len(region) <= 4 && isAlnum(region))
}

func isLetters(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func isAlnum(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// Render fills every {name} in text with data's member name: strings as
// they are, other JSON values as their JSON text. {name|fallback} writes
// fallback instead when the member is absent, null or "" (the fallback is
// literal text without braces; {name|} names an optional part that may stay
// empty); a bare {name} without data writes "". Names are letters, digits,
// '_', '.' and '-'; any other brace is literal text, and "{{" writes a
// literal "{". {no_track name} renders as {name} does and marks the value
// as a link never to track (see NoTrackValues). Values are inserted
// verbatim, never re-scanned, so data cannot inject placeholders.
func Render(text string, data map[string]json.RawMessage) string {
	return fill(text, len(text), func(b *strings.Builder, _ int, p Placeholder) {
		v := dataString(data[p.Name])
		if v == "" {
			v = p.Fallback
		}
		b.WriteString(v)
	})
}

// fill copies text with "{{" written as "{" and each placeholder, which
// starts at text[i], replaced by what value writes. grow is the builder's
// first capacity.
func fill(text string, grow int, value func(b *strings.Builder, i int, p Placeholder)) string {
	if !strings.Contains(text, "{") {
		return text
	}
	var b strings.Builder
	b.Grow(grow)
	for i := 0; i < len(text); {
		if text[i] == '{' && i+1 < len(text) && text[i+1] == '{' {
			b.WriteByte('{')
			i += 2
			continue
		}
		p, n := placeholderAt(text, i)
		if n == 0 {
			b.WriteByte(text[i])
			i++
			continue
		}
		value(&b, i, p)
		i += n
	}
	return b.String()
}

// Placeholder is one {name} or {name|fallback} of a template text.
type Placeholder struct {
	Name     string
	Fallback string
	// Optional reports a fallback ({name|...}): the text reads well
	// without the data.
	Optional bool
	// NoTrack marks {no_track name}: the value is a link email tracking
	// must not rewrite (a password-reset link, say).
	NoTrack bool
}

// placeholderAt parses the placeholder starting at text[i] and returns it
// with its length, or a length of 0 when text[i] starts none.
func placeholderAt(text string, i int) (Placeholder, int) {
	if text[i] != '{' {
		return Placeholder{}, 0
	}
	end := strings.IndexByte(text[i+1:], '}')
	if end <= 0 {
		return Placeholder{}, 0
	}
	inner := text[i+1 : i+1+end]
	inner, noTrack := strings.CutPrefix(inner, noTrackPrefix)
	name, fallback, optional := strings.Cut(inner, "|")
	if name == "" || !validName(name) || strings.Contains(fallback, "{") {
		return Placeholder{}, 0
	}
	return Placeholder{Name: name, Fallback: fallback, Optional: optional, NoTrack: noTrack}, end + 2
}

// noTrackPrefix marks a placeholder whose value is a link never to be
// tracked: {no_track link}.
const noTrackPrefix = "no_track "

// NoTrackValues returns the values data gives the {no_track name}
// placeholders of texts: the links an email's tracking leaves alone.
func NoTrackValues(data map[string]json.RawMessage, texts ...string) []string {
	var out []string
	for _, text := range texts {
		for _, p := range Placeholders(text) {
			if v := dataString(data[p.Name]); p.NoTrack && v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}

// Placeholders lists the placeholders of text in order, as Render reads them.
func Placeholders(text string) []Placeholder {
	var out []Placeholder
	for i := 0; i < len(text); {
		if text[i] == '{' && i+1 < len(text) && text[i+1] == '{' {
			i += 2
			continue
		}
		if p, n := placeholderAt(text, i); n > 0 {
			out = append(out, p)
			i += n
			continue
		}
		i++
	}
	return out
}

// Missing names the placeholders of text without a fallback that data
// leaves empty (absent, null or ""): the gaps a rendered message would have.
func Missing(text string, data map[string]json.RawMessage) []string {
	var names []string
	for _, p := range Placeholders(text) {
		if !p.Optional && dataString(data[p.Name]) == "" {
			names = append(names, p.Name)
		}
	}
	return names
}

func validName(s string) bool {
	if len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return false
		}
	}
	return true
}

// dataString renders one data value: a JSON string unquoted, null and
// absent as "", anything else as compact JSON.
func dataString(v json.RawMessage) string {
	if len(v) == 0 || string(v) == "null" {
		return ""
	}
	if v[0] == '"' {
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s
		}
	}
	return string(v)
}

func fe(field, detail string) apperr.FieldError {
	return apperr.FieldError{Field: field, Detail: detail}
}
