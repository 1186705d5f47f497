package push

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/notify"
)

// recorder is a push service that accepts every message and records the
// tokens it was sent.
type recorder struct {
	name string
	mu   sync.Mutex
	to   []string
}

func (p *recorder) Name() string       { return p.name }
func (p *recorder) NeedsContact() bool { return true }
func (p *recorder) Send(_ context.Context, m notify.Message) (notify.Receipt, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.to = append(p.to, m.To)
	return notify.Receipt{ProviderMessageID: p.name + "-1"}, nil
}

func TestRouteByToken(t *testing.T) {
	t.Parallel()
	router := &Router{FCM: &recorder{name: "fcm"}, APNs: &recorder{name: "apns"}}
	hex64 := strings.Repeat("a1", 32)
	tests := []struct{ token, want, sent string }{
		{hex64, "apns", hex64},
		{"dGhpcyBpcyBhbiBGQ00gdG9rZW4:APA91b", "fcm", "dGhpcyBpcyBhbiBGQ00gdG9rZW4:APA91b"},
		{"apns:" + hex64[:10], "apns", hex64[:10]},
		{"fcm:" + hex64, "fcm", hex64},
	}
	for _, tt := range tests {
		g, sent := router.route(tt.token)
		if g == nil || g.Name() != tt.want || sent != tt.sent {
			t.Errorf("route(%q) = %v %q, want %s %q", tt.token, g, sent, tt.want, tt.sent)
		}
	}
}

func TestRouterSend(t *testing.T) {
	t.Parallel()
	hex64 := strings.Repeat("a1", 32)
	fcm, apns := &recorder{name: "fcm"}, &recorder{name: "apns"}
	tests := []struct {
		name     string
		router   *Router
		token    string
		wantName string // the router's name
		want     string // the service that sends; "" when none takes the token
		sent     string
	}{
		{name: "both, APNs token", router: &Router{FCM: fcm, APNs: apns}, token: hex64, wantName: "push", want: "apns", sent: hex64},
		{name: "both, FCM token", router: &Router{FCM: fcm, APNs: apns}, token: "reg:APA91b", wantName: "push", want: "fcm", sent: "reg:APA91b"},
		{name: "FCM only takes a hex token", router: &Router{FCM: fcm}, token: hex64, wantName: "fcm", want: "fcm", sent: hex64},
		{name: "APNs only takes any token", router: &Router{APNs: apns}, token: "reg:APA91b", wantName: "apns", want: "apns", sent: "reg:APA91b"},
		{name: "FCM only refuses an apns: token", router: &Router{FCM: fcm}, token: "apns:" + hex64, wantName: "fcm"},
		{name: "APNs only refuses an fcm: token", router: &Router{APNs: apns}, token: "fcm:reg", wantName: "apns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.router.Name(); got != tt.wantName {
				t.Errorf("Name() = %q, want %q", got, tt.wantName)
			}
			if !tt.router.NeedsContact() {
				t.Error("NeedsContact() = false, want true")
			}
			rc, err := tt.router.Send(t.Context(), notify.Message{To: tt.token})
			if tt.want == "" {
				var se *notify.SendError
				if !errors.As(err, &se) || !se.Permanent {
					t.Errorf("Send(%q) = %v, want a permanent error", tt.token, err)
				}
				return
			}
			if err != nil || rc.Provider != tt.want || rc.ProviderMessageID != tt.want+"-1" {
				t.Errorf("Send(%q) = %+v, %v; want sent by %s", tt.token, rc, err, tt.want)
			}
		})
	}
	// Each service got the token without its prefix.
	if !strings.Contains(strings.Join(apns.to, ","), hex64) || strings.Contains(strings.Join(fcm.to, ","), "apns:") {
		t.Errorf("APNs got %q, FCM got %q", apns.to, fcm.to)
	}
}
