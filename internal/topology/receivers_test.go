package topology

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"regexp"
	"strings"
	"testing"
	"time"

	gosmtp "github.com/emersion/go-smtp"
)

// hookReceiver is the users' webhook endpoint: it records every delivery
// it receives as a Deliver op and answers 200.
type hookReceiver struct {
	*httptest.Server
}

func newHookReceiver(t *testing.T, h *History) *hookReceiver {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(r.Body)
		var p struct {
			Data struct {
				NotificationID string `json:"notification_id"`
				UserID         string `json:"user_id"`
				Category       string `json:"category"`
				Data           struct {
					Seq int `json:"seq"`
				} `json:"data"`
			} `json:"data"`
		}
		_ = json.Unmarshal(body, &p)
		h.Add(Op{Kind: Deliver, Start: at, End: at, Via: "webhook", Status: http.StatusOK,
			User: p.Data.UserID, Seq: p.Data.Data.Seq, Category: p.Data.Category, Channel: "webhook", ID: p.Data.NotificationID})
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return &hookReceiver{srv}
}

// smtpPeer is the SMTP relay every node sends email to: it records every
// message as a Deliver op, reading the user, sequence number and category
// from the body the workload's templates write ("[topo u3 17 critical]").
type smtpPeer struct {
	addr string
}

var topoLine = regexp.MustCompile(`\[topo (\S+) (\d+) (\S+)\]`)

func newSMTPPeer(t *testing.T, h *History) *smtpPeer {
	t.Helper()
	s := gosmtp.NewServer(gosmtp.BackendFunc(func(*gosmtp.Conn) (gosmtp.Session, error) {
		return &smtpSession{h: h}, nil
	}))
	s.Domain = "relay.test"
	s.EnableDSN = true
	s.ReadTimeout, s.WriteTimeout = 30*time.Second, 30*time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { s.Close() })
	return &smtpPeer{addr: ln.Addr().String()}
}

type smtpSession struct{ h *History }

func (s *smtpSession) Mail(string, *gosmtp.MailOptions) error { return nil }
func (s *smtpSession) Rcpt(string, *gosmtp.RcptOptions) error { return nil }
func (s *smtpSession) Reset()                                 {}
func (s *smtpSession) Logout() error                          { return nil }

func (s *smtpSession) Data(r io.Reader) error {
	at := time.Now()
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	op := Op{Kind: Deliver, Start: at, End: at, Via: "smtp", Status: http.StatusOK, Channel: "email"}
	if m, err := mail.ReadMessage(bytes.NewReader(raw)); err == nil {
		op.ID = strings.TrimSpace(m.Header.Get("X-Sluice-Notification-ID"))
		body, _ := io.ReadAll(quotedprintable.NewReader(m.Body))
		if f := topoLine.FindStringSubmatch(string(body)); f != nil {
			op.User, op.Seq, op.Category = f[1], atoi(f[2]), f[3]
		}
	}
	s.h.Add(op)
	return nil
}
