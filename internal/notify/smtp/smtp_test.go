package smtp_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	gosmtp "github.com/emersion/go-smtp"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/notify/smtp"
)

// relay is a real SMTP server (emersion/go-smtp's) run inside the test:
// STARTTLS, AUTH PLAIN and LOGIN, DSN; it records what it accepted and
// answers the replies scripted per recipient.
type relay struct {
	addr    string
	roots   *x509.CertPool
	mu      sync.Mutex
	got     []received
	conns   int             // distinct client connections
	seen    map[string]bool // client addresses (a session starts at every EHLO)
	authed  []string        // mechanisms used
	replies map[string]*gosmtp.SMTPError
}

type received struct {
	from, to   string
	envID      string
	ret        gosmtp.DSNReturn
	notify     []gosmtp.DSNNotify
	tls        bool
	msg        *mail.Message
	body       string
	raw        string // the message as the relay read it
	authedUser string
}

func startRelay(t testing.TB) *relay {
	t.Helper()
	cert, roots := selfSigned(t)
	r := &relay{roots: roots, replies: map[string]*gosmtp.SMTPError{}, seen: map[string]bool{}}
	s := gosmtp.NewServer(gosmtp.BackendFunc(func(c *gosmtp.Conn) (gosmtp.Session, error) {
		r.mu.Lock()
		if a := c.Conn().RemoteAddr().String(); !r.seen[a] {
			r.seen[a] = true
			r.conns++
		}
		r.mu.Unlock()
		return &session{r: r, c: c}, nil
	}))
	s.Domain = "relay.test"
	s.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	s.EnableDSN = true
	s.ReadTimeout, s.WriteTimeout = 10*time.Second, 10*time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { s.Close() })
	return r
}

type session struct {
	r    *relay
	c    *gosmtp.Conn
	cur  received
	user string
}

func (s *session) AuthMechanisms() []string { return []string{sasl.Plain, sasl.Login} }

func (s *session) Auth(mech string) (sasl.Server, error) {
	check := func(user, pass string) error {
		if user != "sluice" || pass != "secret" {
			return gosmtp.ErrAuthFailed
		}
		s.user = user
		s.r.mu.Lock()
		s.r.authed = append(s.r.authed, mech)
		s.r.mu.Unlock()
		return nil
	}
	if mech == sasl.Plain {
		return sasl.NewPlainServer(func(_, user, pass string) error { return check(user, pass) }), nil
	}
	return &loginServer{check: check}, nil
}

func (s *session) Mail(from string, o *gosmtp.MailOptions) error {
	if s.user == "" {
		return gosmtp.ErrAuthRequired
	}
	_, isTLS := s.c.TLSConnectionState()
	s.cur = received{from: from, tls: isTLS, authedUser: s.user}
	if o != nil {
		s.cur.envID, s.cur.ret = o.EnvelopeID, o.Return
	}
	return nil
}

func (s *session) Rcpt(to string, o *gosmtp.RcptOptions) error {
	s.r.mu.Lock()
	reply := s.r.replies[to]
	s.r.mu.Unlock()
	if reply != nil {
		return reply
	}
	s.cur.to = to
	if o != nil {
		s.cur.notify = o.Notify
	}
	return nil
}

func (s *session) Data(rd io.Reader) error {
	raw, err := io.ReadAll(rd)
	if err != nil {
		return err
	}
	s.cur.raw = string(raw)
	msg, err := mail.ReadMessage(strings.NewReader(s.cur.raw))
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(msg.Body)
	s.cur.msg, s.cur.body = msg, string(body)
	s.r.mu.Lock()
	s.r.got = append(s.r.got, s.cur)
	s.r.mu.Unlock()
	return nil
}

func (s *session) Reset()        { s.cur = received{} }
func (s *session) Logout() error { return nil }

// loginServer is SASL LOGIN's server side (go-sasl has only the client).
type loginServer struct {
	check func(user, pass string) error
	step  int
	user  string
}

func (l *loginServer) Next(resp []byte) ([]byte, bool, error) {
	l.step++
	switch l.step {
	case 1:
		if resp != nil { // initial response carries the user name
			l.user = string(resp)
			l.step++
			return []byte("Password:"), false, nil
		}
		return []byte("Username:"), false, nil
	case 2:
		l.user = string(resp)
		return []byte("Password:"), false, nil
	default:
		return nil, true, l.check(l.user, string(resp))
	}
}

func (r *relay) received() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

func (r *relay) reply(to string, e *gosmtp.SMTPError) {
	r.mu.Lock()
	r.replies[to] = e
	r.mu.Unlock()
}

func selfSigned(t testing.TB) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

func newClient(t *testing.T, r *relay, mod func(*smtp.Options)) *smtp.Client {
	t.Helper()
	o := smtp.Options{Addr: r.addr, TLSConfig: &tls.Config{RootCAs: r.roots, ServerName: "127.0.0.1"},
		Username: "sluice", Password: "secret", From: "noreply@shop.test", FromName: "Shop",
		UnsubscribeURL: "https://shop.test/unsubscribe?u={user_id}"}
	if mod != nil {
		mod(&o)
	}
	c, err := smtp.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func message(to string, cat notify.Category) notify.Message {
	return notify.Message{NotificationID: "ntf_1", Channel: notify.Email, UserID: "u 1", Type: "flash_sale",
		Category: cat, To: to, Subject: "Sale: 50% off — today", Body: "Hi Ann,\nit's on.", IdempotencyKey: "ntf_1:email"}
}

func TestSendHeadersEnvelopeAndReuse(t *testing.T) {
	t.Parallel()
	r := startRelay(t)
	c := newClient(t, r, nil)
	ctx := context.Background()
	for i, cat := range []notify.Category{notify.Marketing, notify.Critical} {
		rc, err := c.Send(ctx, message("ann@example.test", cat))
		if err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
		if rc.ProviderMessageID == "" || !strings.HasSuffix(rc.ProviderMessageID, "@shop.test") {
			t.Errorf("ProviderMessageID = %q", rc.ProviderMessageID)
		}
	}
	got := r.received()
	if len(got) != 2 {
		t.Fatalf("relay received %d messages, want 2", len(got))
	}
	m := got[0]
	if !m.tls || m.authedUser != "sluice" || m.from != "noreply@shop.test" || m.to != "ann@example.test" {
		t.Errorf("envelope = %+v", m)
	}
	if m.envID != "ntf_1:email" || m.ret != gosmtp.DSNReturnHeaders || len(m.notify) != 2 {
		t.Errorf("DSN: envid %q ret %q notify %v", m.envID, m.ret, m.notify)
	}
	subj, _ := new(mime.WordDecoder).DecodeHeader(m.msg.Header.Get("Subject"))
	if subj != "Sale: 50% off — today" {
		t.Errorf("Subject = %q", subj)
	}
	if id := m.msg.Header.Get("Message-ID"); id != got[1].msg.Header.Get("Message-ID") || !strings.Contains(id, "ntf_1.email@shop.test") {
		t.Errorf("Message-ID %q, then %q: want the same, derived from the delivery", id, got[1].msg.Header.Get("Message-ID"))
	}
	if lu := m.msg.Header.Get("List-Unsubscribe"); !strings.Contains(lu, "<https://shop.test/unsubscribe?u=u+1>") || !strings.Contains(lu, "mailto:") {
		t.Errorf("List-Unsubscribe = %q", lu)
	}
	if p := m.msg.Header.Get("List-Unsubscribe-Post"); p != "List-Unsubscribe=One-Click" {
		t.Errorf("List-Unsubscribe-Post = %q", p)
	}
	if lu := got[1].msg.Header.Get("List-Unsubscribe"); lu != "" {
		t.Errorf("critical mail has List-Unsubscribe %q", lu)
	}
	if !strings.Contains(m.body, "Hi Ann,\r\nit's on.") {
		t.Errorf("body = %q", m.body)
	}
	r.mu.Lock()
	conns := r.conns
	r.mu.Unlock()
	if conns != 1 {
		t.Errorf("relay saw %d connections for 2 messages, want 1 (reuse)", conns)
	}
}

func TestAuthMechanismsAndTLSModes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		auth    string
		want    string
		badPass bool
		wantErr string
	}{
		{name: "plain chosen when offered", want: sasl.Plain},
		{name: "login forced", auth: "login", want: sasl.Login},
		{name: "wrong password is temporary (a relay setting, not the message)", badPass: true, wantErr: notify.ClassTemporary},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := startRelay(t)
			c := newClient(t, r, func(o *smtp.Options) {
				o.Auth = tt.auth
				if tt.badPass {
					o.Password = "nope"
				}
			})
			_, err := c.Send(context.Background(), message("ann@example.test", notify.Orders))
			if tt.wantErr != "" {
				if notify.ErrorClass(err) != tt.wantErr {
					t.Fatalf("Send = %v, want a %s error", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.authed) != 1 || r.authed[0] != tt.want {
				t.Errorf("mechanisms used = %v, want [%s]", r.authed, tt.want)
			}
		})
	}
}

func TestReplyClassification(t *testing.T) {
	t.Parallel()
	r := startRelay(t)
	c := newClient(t, r, nil)
	tests := []struct {
		name  string
		reply *gosmtp.SMTPError
		want  string
	}{
		{"mailbox unavailable", &gosmtp.SMTPError{Code: 550, EnhancedCode: gosmtp.EnhancedCode{5, 1, 1}, Message: "no such user"}, notify.ClassPermanent},
		{"greylisted", &gosmtp.SMTPError{Code: 451, EnhancedCode: gosmtp.EnhancedCode{4, 7, 1}, Message: "try later"}, notify.ClassTemporary},
		{"mailbox full, temporary", &gosmtp.SMTPError{Code: 452, EnhancedCode: gosmtp.EnhancedCode{4, 2, 2}, Message: "full"}, notify.ClassTemporary},
		{"5xx with a 4.x.x enhanced code", &gosmtp.SMTPError{Code: 550, EnhancedCode: gosmtp.EnhancedCode{4, 4, 1}, Message: "odd"}, notify.ClassTemporary},
		{"relay access denied by policy", &gosmtp.SMTPError{Code: 550, EnhancedCode: gosmtp.EnhancedCode{5, 7, 0}, Message: "auth needed"}, notify.ClassTemporary},
	}
	for i, tt := range tests {
		to := strings.NewReplacer(" ", ".", ",", "").Replace(tt.name) + "@example.test"
		r.reply(to, tt.reply)
		_, err := c.Send(context.Background(), message(to, notify.Orders))
		if got := notify.ErrorClass(err); got != tt.want {
			t.Errorf("%d %s: Send = %v (%s), want %s", i, tt.name, err, got, tt.want)
		}
	}
	// The session survives refusals: one more good message on it.
	if _, err := c.Send(context.Background(), message("ann@example.test", notify.Orders)); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conns != 1 {
		t.Errorf("connections = %d, want 1: refusals must not drop the session", r.conns)
	}
}

func TestInvalidAddressIsPermanentAndUnreachableRelayTemporary(t *testing.T) {
	t.Parallel()
	r := startRelay(t)
	c := newClient(t, r, nil)
	if _, err := c.Send(context.Background(), message("not an address", notify.Orders)); notify.ErrorClass(err) != notify.ClassPermanent {
		t.Errorf("Send(bad address) = %v, want permanent", err)
	}
	addr := enginetest.RefusedAddr(t) // held: no other test can listen there
	down := newClient(t, r, func(o *smtp.Options) { o.Addr = addr })
	_, err := down.Send(context.Background(), message("ann@example.test", notify.Orders))
	if notify.ErrorClass(err) != notify.ClassTemporary {
		t.Errorf("Send(relay down) = %v, want temporary", err)
	}
	var se *notify.SendError
	if !errors.As(err, &se) {
		t.Errorf("error %T is not a *notify.SendError", err)
	}
}

func TestStaleKeptConnectionIsReplaced(t *testing.T) {
	t.Parallel()
	r := startRelay(t)
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c := newClient(t, r, func(o *smtp.Options) { o.Now = clock; o.IdleTimeout = time.Minute })
	ctx := context.Background()
	if _, err := c.Send(ctx, message("ann@example.test", notify.Orders)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute) // past IdleTimeout: the kept connection is closed, not used
	mu.Unlock()
	if _, err := c.Send(ctx, message("ann@example.test", notify.Orders)); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conns != 2 {
		t.Errorf("connections = %d, want 2", r.conns)
	}
}

// BenchmarkSend measures messages per second to the in-process relay over
// kept STARTTLS connections.
func BenchmarkSend(b *testing.B) {
	r := startRelay(b)
	c, err := smtp.New(smtp.Options{Addr: r.addr, TLSConfig: &tls.Config{RootCAs: r.roots, ServerName: "127.0.0.1"},
		Username: "sluice", Password: "secret", From: "noreply@shop.test", MaxIdle: 16})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	m := message("ann@example.test", notify.Orders)
	enginetest.BenchSend(b, c, m)
}

func TestHTMLIsMultipartAlternative(t *testing.T) {
	t.Parallel()
	r := startRelay(t)
	c := newClient(t, r, nil)
	m := message("ann@example.test", notify.Marketing)
	m.Subject = strings.Repeat("Grand sale, everything must go — ", 6)
	long := strings.Repeat("ünïcode and a very long line without breaks ", 10)
	m.Body = "Hi Ann,\n" + long + "\nhttps://shop.test/sale"
	m.HTML = `<p>Hi Ann, <a href="https://shop.test/sale?a=1&amp;b=2">` + long + `</a></p>`
	if _, err := c.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	got := r.received()
	if len(got) != 1 {
		t.Fatalf("relay received %d messages, want 1", len(got))
	}
	msg := got[0]
	mt, params, err := mime.ParseMediaType(msg.msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" || params["boundary"] == "" {
		t.Fatalf("Content-Type = %q (%v), want multipart/alternative with a boundary", msg.msg.Header.Get("Content-Type"), err)
	}
	if subj, _ := new(mime.WordDecoder).DecodeHeader(msg.msg.Header.Get("Subject")); subj != m.Subject {
		t.Errorf("Subject = %q, want %q", subj, m.Subject)
	}
	head, _, _ := strings.Cut(msg.raw, "\r\n\r\n")
	for i, line := range strings.Split(head, "\r\n") {
		if len(line) > 78 {
			t.Errorf("header line %d is %d characters: %q", i, len(line), line)
		}
	}
	for i, line := range strings.Split(msg.body, "\r\n") {
		if len(line) > 76 {
			t.Errorf("body line %d is %d characters: %q", i, len(line), line)
		}
	}
	mr := multipart.NewReader(strings.NewReader(msg.body), params["boundary"])
	want := []struct{ typ, text string }{{"text/plain", "Hi Ann,\r\n" + long + "\r\nhttps://shop.test/sale"}, {"text/html", m.HTML}}
	for i, w := range want {
		p, err := mr.NextRawPart()
		if err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
		if ct := p.Header.Get("Content-Type"); ct != w.typ+"; charset=utf-8" {
			t.Errorf("part %d Content-Type = %q, want %s; charset=utf-8", i, ct, w.typ)
		}
		if cte := p.Header.Get("Content-Transfer-Encoding"); cte != "quoted-printable" {
			t.Errorf("part %d Content-Transfer-Encoding = %q", i, cte)
		}
		text, err := io.ReadAll(quotedprintable.NewReader(p))
		if err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
		if got := strings.TrimRight(string(text), "\r\n"); got != w.text {
			t.Errorf("part %d = %q, want %q", i, got, w.text)
		}
	}
	if _, err := mr.NextRawPart(); err != io.EOF {
		t.Errorf("after two parts: %v, want EOF", err)
	}
}

func TestPlainTextStaysSinglePart(t *testing.T) {
	t.Parallel()
	r := startRelay(t)
	c := newClient(t, r, nil)
	if _, err := c.Send(context.Background(), message("ann@example.test", notify.Orders)); err != nil {
		t.Fatal(err)
	}
	got := r.received()
	if len(got) != 1 {
		t.Fatalf("relay received %d messages", len(got))
	}
	if ct := got[0].msg.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Errorf("Content-Type = %q, want text/plain; charset=utf-8", ct)
	}
}
