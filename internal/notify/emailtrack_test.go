package notify_test

import (
	"context"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/shorten"
)

const humanUA = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36"

// events records status events.
type events struct {
	mu  sync.Mutex
	got []notify.StatusEvent
}

func (e *events) of(typ string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.got {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// trackBundle is a bundle whose email links and opens are tracked on its
// SQLite store, with the shortener's bot rules and link finder.
func trackBundle(t *testing.T, mod func(*notify.EmailTracking)) (*bundle, *events) {
	t.Helper()
	ev := &events{}
	b := setup(t, func(o *notify.Options) {
		o.Email = notify.EmailTracking{Store: o.Store.(notify.EmailLinkStore), BaseURL: "https://t.test/",
			TrackLinks: true, TrackOpens: true, ClassifyAgent: shorten.ClassifyHit, RewriteText: shorten.RewriteLinks,
			Skip: func(u string) bool { return strings.HasPrefix(u, "https://shop.test/unsubscribe") }}
		if mod != nil {
			mod(&o.Email)
		}
		o.OnStatus = func(_ context.Context, e notify.StatusEvent) {
			ev.mu.Lock()
			ev.got = append(ev.got, e)
			ev.mu.Unlock()
		}
	})
	return b, ev
}

var trackedLink = regexp.MustCompile(`https://t\.test/e/([A-Za-z0-9_-]{16})`)

func promoTemplate(track bool, esc *notify.EscalationRule) notify.Template {
	return notify.Template{Type: "promo", Category: notify.Orders, TrackLinks: track, Escalation: esc,
		Channels: map[string]map[string]notify.Content{"default": {"en": {Subject: "Sale",
			Body: "Sale: {url} {url} reset {no_track reset} bye https://shop.test/unsubscribe?u=1",
			HTML: `<body><a href="{url}">Sale</a><a data-no-track href="https://shop.test/help">Help</a></body>`}}}}
}

func sendPromo(t *testing.T, b *bundle, chs ...notify.Channel) (string, notify.Message) {
	t.Helper()
	id := b.send(t, notify.Request{UserID: "u1", Type: "promo", Channels: chs,
		Data: []byte(`{"url":"https://shop.test/sale","reset":"https://shop.test/reset?t=1"}`)}).NotificationID
	b.drain(t)
	sent := b.prov.sentOn(notify.Email)
	if len(sent) != 1 {
		t.Fatalf("email sent %d times, want once", len(sent))
	}
	return id, sent[0]
}

func TestEmailLinksRewritten(t *testing.T) {
	t.Parallel()
	b, _ := trackBundle(t, nil)
	b.putTemplate(t, promoTemplate(false, nil))
	_, m := sendPromo(t, b, notify.Email, notify.SMS)
	text := trackedLink.FindAllStringSubmatch(m.Body, -1)
	if len(text) != 2 || text[0][1] != text[1][1] {
		t.Fatalf("text %q: want one tracked link for the two sale links", m.Body)
	}
	if !strings.Contains(m.Body, "reset https://shop.test/reset?t=1 bye https://shop.test/unsubscribe?u=1") {
		t.Errorf("text %q: the no_track and unsubscribe links must stay", m.Body)
	}
	if !strings.Contains(m.HTML, `<a href="https://t.test/e/`+text[0][1]+`">Sale</a>`) || !strings.Contains(m.HTML, `href="https://shop.test/help"`) {
		t.Errorf("HTML %q: want the sale link tracked (the same one) and the data-no-track link alone", m.HTML)
	}
	if n := len(trackedLink.FindAllString(m.HTML, -1)); n != 2 || !strings.Contains(m.HTML, `width="1" height="1"`) {
		t.Errorf("HTML %q: want the sale link and an open pixel", m.HTML)
	}
	if sms := b.prov.sentOn(notify.SMS); len(sms) != 1 || strings.Contains(sms[0].Body, "t.test") {
		t.Errorf("SMS %+v: email tracking must leave it alone", sms)
	}
}

func TestEmailTrackingPerType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		typeTracks  bool
		wantTracked bool
	}{
		{"off everywhere", false, false},
		{"the type asks for it", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, _ := trackBundle(t, func(e *notify.EmailTracking) { e.TrackLinks, e.TrackOpens = false, false })
			b.putTemplate(t, promoTemplate(tt.typeTracks, nil))
			_, m := sendPromo(t, b, notify.Email)
			if got := trackedLink.MatchString(m.Body); got != tt.wantTracked {
				t.Errorf("text %q tracked = %v, want %v", m.Body, got, tt.wantTracked)
			}
			if strings.Contains(m.HTML, `width="1"`) {
				t.Errorf("HTML %q has an open pixel with track_opens off", m.HTML)
			}
		})
	}
}

// TestEmailBotHits: a scanner's user agent, a scanner network and a
// person within the bot window are bot hits; a person later is a click,
// which emits delivery.clicked and delivery.opened once and cancels an
// escalation waiting on clicked.
func TestEmailBotHits(t *testing.T) {
	t.Parallel()
	b, ev := trackBundle(t, func(e *notify.EmailTracking) {
		e.BotNetworks = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}
	})
	b.putTemplate(t, promoTemplate(false, &notify.EscalationRule{After: "10m", Unless: []string{"clicked"}, To: []notify.Channel{notify.SMS}}))
	id, m := sendPromo(t, b)
	token := trackedLink.FindStringSubmatch(m.Body)[1]
	b.clock.Advance(1234567 * time.Nanosecond) // a clock finer than the store's microseconds
	person := netip.MustParseAddr("203.0.113.9")
	hits := []struct {
		name  string
		after time.Duration
		hit   notify.EmailHit
	}{
		{"a person's browser within the window", time.Second, notify.EmailHit{UserAgent: humanUA, Client: person}},
		{"a scanner's user agent", time.Minute, notify.EmailHit{UserAgent: "Mozilla/5.0 (compatible; Mimecast)", Client: person}},
		{"HEAD", 0, notify.EmailHit{Head: true, UserAgent: humanUA, Client: person}},
		{"Microsoft's scanner network", 0, notify.EmailHit{UserAgent: humanUA, Client: netip.MustParseAddr("40.107.22.1")}},
		{"a configured network", 0, notify.EmailHit{UserAgent: humanUA, Client: netip.MustParseAddr("198.51.100.7")}},
	}
	for i, h := range hits {
		b.clock.Advance(h.after)
		l, err := b.svc.EmailHit(t.Context(), token, h.hit)
		if err != nil || l.URL != "https://shop.test/sale" {
			t.Fatalf("%s: EmailHit = %+v, %v", h.name, l, err)
		}
		d := b.statuses(t, id)[notify.Email]
		if !d.ClickedAt.IsZero() || !d.OpenedAt.IsZero() || len(d.Links) != 1 || d.Links[0].BotHits != int64(i+1) || d.Links[0].Clicks != 0 {
			t.Fatalf("%s: delivery %+v; want a bot hit, no click", h.name, d)
		}
	}
	if n := ev.of(notify.EventDeliveryClicked); n != 0 {
		t.Fatalf("%d delivery.clicked events for bot hits", n)
	}
	clickAt := b.clock.Now().Truncate(time.Microsecond)
	for range 2 {
		if _, err := b.svc.EmailHit(t.Context(), token, notify.EmailHit{UserAgent: humanUA, Client: person}); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Second)
	}
	d := b.statuses(t, id)[notify.Email]
	if !d.ClickedAt.Equal(clickAt) || !d.OpenedAt.Equal(clickAt) || d.Links[0].Clicks != 2 {
		t.Errorf("delivery %+v; want clicked and opened at %v, two clicks", d, clickAt)
	}
	if c, o := ev.of(notify.EventDeliveryClicked), ev.of(notify.EventDeliveryOpened); c != 1 || o != 1 {
		t.Errorf("events: %d delivery.clicked, %d delivery.opened; want one of each", c, o)
	}
	b.clock.Advance(10 * time.Minute)
	if _, err := b.svc.QueueDue(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	b.drain(t)
	if sms := b.statuses(t, id)[notify.SMS]; sms.Status != notify.StatusSuppressed || sms.Error != "engaged: clicked" {
		t.Errorf("SMS %s %q, want suppressed engaged: clicked", sms.Status, sms.Error)
	}
	if _, err := b.svc.EmailHit(t.Context(), "AAAAAAAAAAAAAAAA", notify.EmailHit{UserAgent: humanUA}); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("unknown token: %v, want NotFound", err)
	}
}

// TestEmailOpenCancelsEscalation: a person loading the open pixel is an
// open, which an escalation waiting on opened ends on; a bot's load is not.
func TestEmailOpenCancelsEscalation(t *testing.T) {
	t.Parallel()
	for _, human := range []bool{false, true} {
		b, ev := trackBundle(t, nil)
		b.putTemplate(t, promoTemplate(false, &notify.EscalationRule{After: "10m", Unless: []string{"opened"}, To: []notify.Channel{notify.SMS}}))
		id, m := sendPromo(t, b)
		links := trackedLink.FindAllStringSubmatch(m.HTML, -1)
		pixel := links[len(links)-1][1]
		b.clock.Advance(time.Minute)
		ua := "Mozilla/5.0 (compatible; Barracuda Sentinel)"
		if human {
			ua = humanUA
		}
		if l, err := b.svc.EmailHit(t.Context(), pixel, notify.EmailHit{UserAgent: ua}); err != nil || !l.Pixel() {
			t.Fatalf("EmailHit(pixel) = %+v, %v", l, err)
		}
		d := b.statuses(t, id)[notify.Email]
		if d.OpenedAt.IsZero() == human || !d.ClickedAt.IsZero() {
			t.Errorf("human %v: delivery %+v", human, d)
		}
		b.clock.Advance(10 * time.Minute)
		if _, err := b.svc.QueueDue(t.Context(), 10); err != nil {
			t.Fatal(err)
		}
		b.drain(t)
		sms := b.statuses(t, id)[notify.SMS]
		if human && (sms.Error != "engaged: opened" || ev.of(notify.EventDeliveryOpened) != 1) {
			t.Errorf("after an open: SMS %s %q, %d delivery.opened; want suppressed engaged: opened, one event", sms.Status, sms.Error, ev.of(notify.EventDeliveryOpened))
		}
		if !human && sms.Status != notify.StatusSent {
			t.Errorf("after a bot's load: SMS %s %q, want sent", sms.Status, sms.Error)
		}
	}
}

// downLinks is an email link store whose writes fail.
type downLinks struct{ notify.EmailLinkStore }

func (downLinks) PutEmailLinks(context.Context, []notify.EmailLink) ([]notify.EmailLink, error) {
	return nil, apperr.New(apperr.Unavailable, "database down")
}

func TestEmailTrackingDownSendsUntracked(t *testing.T) {
	t.Parallel()
	b, _ := trackBundle(t, func(e *notify.EmailTracking) { e.Store = downLinks{e.Store} })
	b.putTemplate(t, promoTemplate(false, nil))
	_, m := sendPromo(t, b, notify.Email)
	if trackedLink.MatchString(m.Body) || trackedLink.MatchString(m.HTML) || !strings.Contains(m.Body, "Sale: https://shop.test/sale") {
		t.Errorf("with the store down: body %q, HTML %q; want the message as rendered", m.Body, m.HTML)
	}
}
