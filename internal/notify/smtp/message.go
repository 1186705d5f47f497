package smtp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/textproto"
	"net/url"
	"strings"

	gosmtp "github.com/emersion/go-smtp"

	"github.com/sluicehq/sluice/internal/notify"
)

// compose builds the RFC 5322 message of m and returns it with its
// Message-ID (without angle brackets).
func (c *Client) compose(m notify.Message) ([]byte, string, error) {
	to, err := mail.ParseAddress(m.To)
	if err != nil || strings.ContainsAny(m.To, "\r\n") {
		return nil, "", fmt.Errorf("smtp: invalid recipient address %q", m.To)
	}
	id := messageID(m.IdempotencyKey, c.domain)
	from := mail.Address{Name: c.opts.FromName, Address: c.opts.From}
	var b bytes.Buffer
	h := func(k, v string) { header(&b, k, v) }
	h("From", from.String())
	h("To", to.String())
	h("Subject", mime.QEncoding.Encode("utf-8", oneLine(m.Subject)))
	h("Date", c.opts.Now().UTC().Format("Mon, 02 Jan 2006 15:04:05 -0700"))
	h("Message-ID", "<"+id+">")
	h("MIME-Version", "1.0")
	h("Auto-Submitted", "auto-generated")
	h("X-Sluice-Notification-ID", oneLine(m.NotificationID))
	if m.Category == notify.Marketing {
		c.unsubscribe(h, m)
	}
	if m.HTML == "" {
		h("Content-Type", "text/plain; charset=utf-8")
		h("Content-Transfer-Encoding", "quoted-printable")
		b.WriteString("\r\n")
		if err := writeQP(&b, m.Body); err != nil {
			return nil, "", err
		}
		return b.Bytes(), id, nil
	}
	// multipart/alternative (RFC 2046 5.1.4): the parts in increasing
	// order of preference, so text first and HTML last.
	mw := multipart.NewWriter(&b)
	h("Content-Type", mime.FormatMediaType("multipart/alternative", map[string]string{"boundary": mw.Boundary()}))
	b.WriteString("\r\n")
	for _, p := range []struct{ typ, text string }{{"text/plain", m.Body}, {"text/html", m.HTML}} {
		pw, err := mw.CreatePart(textproto.MIMEHeader{
			"Content-Type":              {p.typ + "; charset=utf-8"},
			"Content-Transfer-Encoding": {"quoted-printable"},
		})
		if err != nil {
			return nil, "", err
		}
		if err := writeQP(pw, p.text); err != nil {
			return nil, "", err
		}
	}
	if err := mw.Close(); err != nil {
		return nil, "", err
	}
	b.WriteString("\r\n")
	return b.Bytes(), id, nil
}

// writeQP writes text with CRLF line ends, quoted-printable (RFC 2045
// 6.7): no line longer than 76 characters, whatever the text's lines.
func writeQP(w io.Writer, text string) error {
	qp := quotedprintable.NewWriter(w)
	text = strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\n", "\r\n")
	if _, err := qp.Write([]byte(text)); err != nil {
		return err
	}
	if err := qp.Close(); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\r\n")
	return err
}

// unsubscribe adds RFC 2369 List-Unsubscribe and, for an https URL, RFC
// 8058's List-Unsubscribe-Post (one-click unsubscribe, which Gmail and
// Yahoo require of bulk senders).
func (c *Client) unsubscribe(h func(k, v string), m notify.Message) {
	var targets []string
	if c.opts.UnsubscribeURL != "" {
		u := strings.NewReplacer("{user_id}", url.QueryEscape(m.UserID),
			"{notification_id}", url.QueryEscape(m.NotificationID), "{type}", url.QueryEscape(m.Type)).Replace(c.opts.UnsubscribeURL)
		targets = append(targets, "<"+u+">")
	}
	mailto := c.opts.UnsubscribeMailto
	if mailto == "" {
		mailto = c.opts.From
	}
	targets = append(targets, "<mailto:"+mailto+"?subject=unsubscribe>")
	h("List-Unsubscribe", strings.Join(targets, ", "))
	if strings.HasPrefix(c.opts.UnsubscribeURL, "https://") {
		h("List-Unsubscribe-Post", "List-Unsubscribe=One-Click")
	}
}

// messageID derives the Message-ID from the delivery's idempotency key, so
// every attempt at a delivery sends the same one and receivers that dedupe
// on it show a retried message once.
func messageID(key, domain string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:12]) + "." + strings.NewReplacer(":", ".").Replace(key) + "@" + domain
}

// header writes the field k: v, folded at the value's spaces (between
// encoded words, after list commas) so no line passes 78 characters where
// the value allows it (RFC 5322 2.1.1, 2.2.3); a word longer than a line
// stays whole on its own line.
func header(b *bytes.Buffer, k, v string) {
	b.WriteString(k + ":")
	line := len(k) + 1
	for _, word := range strings.Split(v, " ") {
		if line+1+len(word) > 78 && word != "" {
			b.WriteString("\r\n")
			line = 0
		}
		b.WriteByte(' ')
		b.WriteString(word)
		line += 1 + len(word)
	}
	b.WriteString("\r\n")
}

func oneLine(s string) string { return strings.NewReplacer("\r", " ", "\n", " ").Replace(s) }

// classify turns an SMTP or network error into a notify.SendError.
func classify(err error) error {
	if se, ok := errors.AsType[*gosmtp.SMTPError](err); ok {
		wrapped := fmt.Errorf("smtp %d %s: %s", se.Code, enhanced(se.EnhancedCode), se.Message)
		if Permanent(se) {
			return notify.Permanent(wrapped)
		}
		if authRefused(se) {
			return notify.ProviderFault(wrapped, 0)
		}
		return notify.Temporary(wrapped, 0)
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return notify.Temporary(err, 0)
	}
	return notify.Temporary(err, 0)
}

// Permanent reports whether an SMTP reply is a permanent refusal of the
// message: a 5xx reply (or an enhanced 5.x.x code) other than the
// authentication and relay-access refusals that mean our relay settings
// are wrong (5.7.0, 5.7.8, 530, 535: temporary, so the breaker opens
// rather than every message being dead-lettered).
func Permanent(se *gosmtp.SMTPError) bool {
	class := se.Code / 100
	if se.EnhancedCode[0] == 4 || se.EnhancedCode[0] == 5 {
		class = se.EnhancedCode[0]
	}
	if class != 5 {
		return false
	}
	return !authRefused(se)
}

// authRefused reports an authentication or relay-access refusal (530,
// 535, 5.7.0, 5.7.8): our relay settings, not the message, are wrong.
func authRefused(se *gosmtp.SMTPError) bool {
	return se.Code == 530 || se.Code == 535 ||
		se.EnhancedCode == gosmtp.EnhancedCode{5, 7, 0} || se.EnhancedCode == gosmtp.EnhancedCode{5, 7, 8}
}

func enhanced(e gosmtp.EnhancedCode) string {
	if e == (gosmtp.EnhancedCode{}) || e == gosmtp.NoEnhancedCode {
		return "-"
	}
	return fmt.Sprintf("%d.%d.%d", e[0], e[1], e[2])
}
