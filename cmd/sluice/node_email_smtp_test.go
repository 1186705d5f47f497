package main

import (
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	gosmtp "github.com/emersion/go-smtp"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// mailSink is an SMTP server (emersion/go-smtp's) that keeps the
// messages it accepts.
type mailSink struct {
	mu   sync.Mutex
	msgs []*mail.Message
	addr string
}

func startMailSink(t *testing.T) *mailSink {
	t.Helper()
	sink := &mailSink{}
	s := gosmtp.NewServer(gosmtp.BackendFunc(func(*gosmtp.Conn) (gosmtp.Session, error) { return sinkSession{sink}, nil }))
	s.Domain, s.AllowInsecureAuth = "sink.test", true
	s.ReadTimeout, s.WriteTimeout = 10*time.Second, 10*time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sink.addr = ln.Addr().String()
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { s.Close() })
	return sink
}

type sinkSession struct{ sink *mailSink }

func (sinkSession) Mail(string, *gosmtp.MailOptions) error { return nil }
func (sinkSession) Rcpt(string, *gosmtp.RcptOptions) error { return nil }
func (sinkSession) Reset()                                 {}
func (sinkSession) Logout() error                          { return nil }
func (s sinkSession) Data(r io.Reader) error {
	m, err := mail.ReadMessage(r)
	if err != nil {
		return err
	}
	s.sink.mu.Lock()
	s.sink.msgs = append(s.sink.msgs, m)
	s.sink.mu.Unlock()
	return nil
}

// TestShippedHTMLEmailOverSMTP: a shipped template goes out over SMTP as
// multipart/alternative, text then HTML, with the data escaped in the
// HTML and its link tracked in both parts.
func TestShippedHTMLEmailOverSMTP(t *testing.T) {
	t.Parallel()
	sink := startMailSink(t)
	cfg := testConfig(t)
	cfg.Links.BaseURL = "https://sl.test"
	cfg.Notify.Email.TrackLinks = true
	p := &cfg.Notify.Providers
	p.SMTP.Addr, p.SMTP.TLS, p.SMTP.From = sink.addr, "none", "shop@shop.test"
	n := startNode(t, cfg)
	base := n.httpURL
	if code, resp := call(t, "PUT", base+"/v1/users/u8/settings", `{"contacts":{"email":"ann@example.test"}}`); code != 200 {
		t.Fatalf("PUT settings = %d %s", code, resp)
	}
	if code, resp := call(t, "POST", base+"/v1/notifications", `{"user_id":"u8","type":"order.shipped","channels":["email"],
		"data":{"order":"<#42>","name":"Ann & Bob","link":"https://shop.example/track/42"}}`); code != 202 {
		t.Fatalf("POST = %d %s", code, resp)
	}
	var m *mail.Message
	enginetest.Eventually(t, 10*time.Second, "the email at the relay", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		if len(sink.msgs) > 0 {
			m = sink.msgs[0]
		}
		return m != nil
	})
	mt, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		t.Fatalf("Content-Type = %q, want multipart/alternative", m.Header.Get("Content-Type"))
	}
	mr := multipart.NewReader(m.Body, params["boundary"])
	var parts []string
	for {
		part, err := mr.NextRawPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(quotedprintable.NewReader(part))
		parts = append(parts, part.Header.Get("Content-Type")+"\n"+string(b))
	}
	if len(parts) != 2 || !strings.HasPrefix(parts[0], "text/plain") || !strings.HasPrefix(parts[1], "text/html") {
		t.Fatalf("parts = %q, want text then HTML", parts)
	}
	if !strings.Contains(parts[0], "Hi Ann & Bob, order <#42> is on its way. Track it: https://sl.test/e/") {
		t.Errorf("text part = %q, want the data as is and the link tracked", parts[0])
	}
	if !strings.Contains(parts[1], "Hi Ann &amp; Bob, order &lt;#42&gt; is on its way. Track it: <a href=\"https://sl.test/e/") ||
		strings.Contains(parts[1], `href="https://shop.example`) {
		t.Errorf("HTML part = %q, want the data escaped and the link tracked", parts[1])
	}
}
