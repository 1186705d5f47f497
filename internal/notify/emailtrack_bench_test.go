package notify_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/shorten"
)

// BenchmarkEmailTracking is the cost of tracked links and the open pixel
// per email: an HTML email with three distinct links (one of them twice)
// processed by 32 workers on SQLite, tracked and not. The difference per
// op is the rewriting, its token writes (one per distinct URL and one for
// the pixel, group-committed) included.
func BenchmarkEmailTracking(b *testing.B) {
	for _, track := range []bool{false, true} {
		name := "untracked"
		if track {
			name = "tracked"
		}
		b.Run(name, func(b *testing.B) {
			bb := setup(b, func(o *notify.Options) {
				o.Email = notify.EmailTracking{Store: o.Store.(notify.EmailLinkStore), BaseURL: "https://t.test/",
					TrackLinks: track, TrackOpens: track, ClassifyAgent: shorten.ClassifyHit, RewriteText: shorten.RewriteLinks}
			})
			tpl := notify.Template{Type: "news", Category: notify.Orders,
				Channels: map[string]map[string]notify.Content{"default": {"en": {Subject: "News",
					Body: "Read {url} and https://shop.test/b, then https://shop.test/c. Again: {url}",
					HTML: `<body><p>Read <a href="{url}">this</a>, <a href="https://shop.test/b">that</a>` +
						` and <a href="https://shop.test/c">the rest</a>.</p><p><a href="{url}">Again</a></p></body>`}}}}
			if _, err := bb.svc.PutTemplate(b.Context(), tpl); err != nil {
				b.Fatal(err)
			}
			st := notify.DefaultSettings()
			st.Contacts.Email = "reader@example.com"
			if _, err := bb.svc.PutSettings(b.Context(), "u1", st); err != nil {
				b.Fatal(err)
			}
			for range b.N {
				if _, err := bb.svc.Send(b.Context(), notify.Request{UserID: "u1", Type: "news", Channels: []notify.Channel{notify.Email},
					Data: []byte(`{"url":"https://shop.test/a"}`)}); err != nil {
					b.Fatal(err)
				}
			}
			jobs := bb.q.take()
			b.ResetTimer()
			processAll(b, bb.svc, jobs, 32)
			b.StopTimer()
			sent := bb.prov.sentOn(notify.Email)
			if len(sent) != b.N || track != strings.Contains(sent[0].HTML, "https://t.test/e/") {
				b.Fatalf("%d emails sent of %d; tracked %v: %.200s", len(sent), b.N, track, sent[0].HTML)
			}
		})
	}
}
