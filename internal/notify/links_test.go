package notify_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/notify"
)

// shortener replaces "https://" links by short ones, or fails.
type shortener struct{ fail bool }

func (s shortener) ShortenLinks(_ context.Context, id, body string) string {
	if s.fail {
		return body
	}
	return strings.ReplaceAll(body, "https://shop.test/orders/42", "https://sl.test/abc1234")
}

func (s shortener) Links(context.Context, string) ([]notify.Link, error) {
	return []notify.Link{{Code: "abc1234", ShortURL: "https://sl.test/abc1234", URL: "https://shop.test/orders/42", Clicks: 2}}, nil
}

func TestSMSLinksAreShortenedAndReported(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		fail     bool
		wantBody string
	}{
		{name: "shortened", wantBody: "track https://sl.test/abc1234"},
		{name: "shortener down: the long link goes out", fail: true, wantBody: "track https://shop.test/orders/42"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ls := shortener{fail: tt.fail}
			b := setup(t, func(o *notify.Options) {
				o.Links = ls
				o.Rewriters = []notify.Rewriter{notify.ShortenSMSLinks(ls, 0)}
			})
			tmpl := notify.Template{Type: "order.tracking", Category: notify.Orders, Channels: map[string]map[string]notify.Content{
				"default": {"en": {Subject: "Tracking", Body: "track {url}"}},
			}}
			if _, err := b.svc.PutTemplate(t.Context(), tmpl); err != nil {
				t.Fatal(err)
			}
			a := b.send(t, notify.Request{UserID: "u1", Type: "order.tracking", Data: json.RawMessage(`{"url":"https://shop.test/orders/42"}`),
				Channels: []notify.Channel{notify.SMS, notify.Email}})
			b.drain(t)
			bodies := map[notify.Channel]string{}
			for _, m := range b.prov.sent {
				bodies[m.Channel] = m.Body
			}
			if bodies[notify.SMS] != tt.wantBody || bodies[notify.Email] != "track https://shop.test/orders/42" {
				t.Errorf("bodies = %q, want SMS %q and email untouched", bodies, tt.wantBody)
			}
			ds := b.statuses(t, a.NotificationID)
			if len(ds[notify.SMS].Links) != 1 || ds[notify.SMS].Links[0].Clicks != 2 || len(ds[notify.Email].Links) != 0 {
				t.Errorf("links: SMS %+v, email %+v; want the SMS link's clicks only", ds[notify.SMS].Links, ds[notify.Email].Links)
			}
		})
	}
}

func TestEmailHTMLPartIsRenderedEscaped(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tmpl := notify.Template{Type: "order.note", Category: notify.Orders, Channels: map[string]map[string]notify.Content{
		"default": {"en": {Subject: "Note", Body: "Hi {name}", HTML: "<p>Hi {name}</p>"}},
	}}
	if _, err := b.svc.PutTemplate(t.Context(), tmpl); err != nil {
		t.Fatal(err)
	}
	b.send(t, notify.Request{UserID: "u1", Type: "order.note", Data: json.RawMessage(`{"name":"<Ann & co>"}`),
		Channels: []notify.Channel{notify.SMS, notify.Email}})
	b.drain(t)
	got := map[notify.Channel]notify.Message{}
	for _, m := range b.prov.sent {
		got[m.Channel] = m
	}
	if m := got[notify.Email]; m.Body != "Hi <Ann & co>" || m.HTML != "<p>Hi &lt;Ann &amp; co&gt;</p>" {
		t.Errorf("email body %q, html %q: want the text as is and the HTML escaped", m.Body, m.HTML)
	}
	if m := got[notify.SMS]; m.HTML != "" {
		t.Errorf("SMS carries an HTML part %q", m.HTML)
	}
}
