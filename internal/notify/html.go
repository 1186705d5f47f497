package notify

import (
	"encoding/json"
	"html"
	"net/url"
	"regexp"
	"strings"
)

// MaxHTMLBytes bounds a template's HTML part.
const MaxHTMLBytes = 256 << 10

// RenderHTML fills the placeholders of an HTML template text as Render
// does, but escapes every value for where it stands, as html/template
// would for text and attributes:
//
//   - in text, a value is HTML-escaped; a value that is one http or https
//     URL, outside an <a> element, becomes a link to itself;
//   - in an attribute, it is HTML-escaped (quotes included), so it cannot
//     end the attribute or the tag;
//   - in an href or src attribute, a value whose scheme is not http,
//     https, mailto or tel (javascript:, data:) is replaced by "#".
//
// Fallbacks and the template's own text are the template author's HTML
// and are written as they are. Placeholders in <script> or <style> are
// escaped as text; mail clients drop both anyway.
func RenderHTML(text string, data map[string]json.RawMessage) string {
	return fill(text, len(text)+len(text)/4, func(b *strings.Builder, i int, p Placeholder) {
		if v := dataString(data[p.Name]); v != "" {
			b.WriteString(escapeIn(htmlContextAt(text, i), v))
		} else {
			b.WriteString(p.Fallback)
		}
	})
}

// htmlContext is where in an HTML text a placeholder stands.
type htmlContext int

const (
	inText htmlContext = iota
	inLink             // text inside <a>...</a>
	inAttr
	inURLAttr // the value of href or src
)

var urlAttrEnd = regexp.MustCompile(`(?i)\s(href|src)\s*=\s*["']?[^"'\s>]*$`)

// htmlContextAt reads the template text before i: inside a tag (a '<'
// after the last '>') is an attribute, else text, inside a link when an
// <a> opened after the last </a>.
func htmlContextAt(text string, i int) htmlContext {
	before := text[:i]
	lt, gt := strings.LastIndexByte(before, '<'), strings.LastIndexByte(before, '>')
	if lt > gt {
		if urlAttrEnd.MatchString(before[lt:]) {
			return inURLAttr
		}
		return inAttr
	}
	lower := strings.ToLower(before)
	open := max(strings.LastIndex(lower, "<a "), strings.LastIndex(lower, "<a>"), strings.LastIndex(lower, "<a\n"))
	if open >= 0 && open > strings.LastIndex(lower, "</a") {
		return inLink
	}
	return inText
}

func escapeIn(ctx htmlContext, v string) string {
	switch ctx {
	case inURLAttr:
		if !safeURL(v) {
			return "#"
		}
		return html.EscapeString(v)
	case inText:
		if isWebURL(v) {
			e := html.EscapeString(v)
			return `<a href="` + e + `">` + e + `</a>`
		}
	}
	return html.EscapeString(v)
}

// safeURL reports a relative URL or one whose scheme is http, https,
// mailto or tel.
func safeURL(v string) bool {
	u, err := url.Parse(strings.TrimSpace(v))
	if err != nil {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "", "http", "https", "mailto", "tel":
		return true
	}
	return false
}

// isWebURL reports a value that is one absolute http or https URL.
func isWebURL(v string) bool {
	if strings.ContainsAny(v, " \t\r\n<>\"") {
		return false
	}
	u, err := url.Parse(v)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// defaultHTML is the HTML part of a shipped template: its text, escaped
// and set in a plain layout (links in the data become links, see
// RenderHTML).
func defaultHTML(subject, body string) string {
	return `<!doctype html>
<html><head><meta charset="utf-8"><title>` + html.EscapeString(subject) + `</title></head>
<body style="margin:0;padding:24px;background:#f6f6f6">
<div style="max-width:560px;margin:0 auto;padding:24px;background:#ffffff;font:16px/1.5 -apple-system,Segoe UI,Helvetica,Arial,sans-serif;color:#222">
<p style="margin:0">` + escapeLiteral(body) + `</p>
</div>
</body></html>
`
}

// escapeLiteral HTML-escapes the literal text of a template, leaving its
// placeholders (and fallbacks) for RenderHTML.
func escapeLiteral(text string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(text); {
		if text[i] == '{' && i+1 < len(text) && text[i+1] == '{' {
			i += 2
			continue
		}
		if _, n := placeholderAt(text, i); n > 0 {
			b.WriteString(html.EscapeString(text[last:i]))
			b.WriteString(text[i : i+n])
			i += n
			last = i
			continue
		}
		i++
	}
	b.WriteString(html.EscapeString(text[last:]))
	return b.String()
}

// anchorTag matches an <a> or <area> start tag, and hrefAttr its href.
var (
	anchorTag = regexp.MustCompile(`(?is)<(?:a|area)\s[^>]*>`)
	hrefAttr  = regexp.MustCompile(`(?is)(\shref\s*=\s*)("[^"]*"|'[^']*'|[^\s"'>]+)`)
	noTrackAt = regexp.MustCompile(`(?i)\sdata-no-track(?:[\s=/>]|$)`)
)

// eachHref calls f with every <a>/<area> href of text (unescaped, without
// quotes) and whether its tag is marked data-no-track, and puts what f
// returns in its place (escaped); "" keeps the href.
func eachHref(text string, f func(href string, noTrack bool) string) string {
	if !strings.Contains(text, "href") {
		return text
	}
	return anchorTag.ReplaceAllStringFunc(text, func(tag string) string {
		noTrack := noTrackAt.MatchString(tag)
		return hrefAttr.ReplaceAllStringFunc(tag, func(attr string) string {
			m := hrefAttr.FindStringSubmatch(attr)
			v := m[2]
			if v[0] == '"' || v[0] == '\'' {
				v = v[1 : len(v)-1]
			}
			out := f(html.UnescapeString(v), noTrack)
			if out == "" {
				return attr
			}
			return m[1] + `"` + html.EscapeString(out) + `"`
		})
	})
}

// noTrackHrefs lists the hrefs of text's data-no-track links.
func noTrackHrefs(text string) []string {
	var out []string
	eachHref(text, func(href string, noTrack bool) string {
		if noTrack {
			out = append(out, href)
		}
		return ""
	})
	return out
}

// rewriteHrefs replaces each http(s) href of text's links not marked
// data-no-track by what shorten returns for it; an error keeps it.
func rewriteHrefs(text string, shorten func(url string) (string, error)) string {
	return eachHref(text, func(href string, noTrack bool) string {
		if noTrack || !isWebURL(href) {
			return ""
		}
		short, err := shorten(href)
		if err != nil {
			return ""
		}
		return short
	})
}

// addPixel puts a 1x1 image of src before text's </body>, or at its end.
func addPixel(text, src string) string {
	img := `<img src="` + html.EscapeString(src) + `" width="1" height="1" alt="" style="display:block;width:1px;height:1px;border:0">`
	if i := strings.LastIndex(strings.ToLower(text), "</body>"); i >= 0 {
		return text[:i] + img + text[i:]
	}
	return text + img
}
