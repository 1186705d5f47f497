package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/enginetest"
)

// outboxBody is a page of GET /v1/outbox.
type outboxBody struct{ Items []client.OutboxEntry }

// TestKillNineInsideDigestWindowAndEscalation kills a process with SIGKILL
// while a digest's window is open and an escalation's timer is pending,
// starts another on the same data dir, and finds each sent exactly once
// when due: both live in the store, not in the process.
func TestKillNineInsideDigestWindowAndEscalation(t *testing.T) {
	enginetest.Faults(t)
	t.Parallel()
	dataDir := t.TempDir()
	c := startChild(t, dataDir)
	admin := c.adminKey(t)
	must := func(c *child, method, path, body string, want int) []byte {
		t.Helper()
		code, resp := c.request(t, method, path, admin, body)
		if code != want {
			t.Fatalf("%s %s = %d %s, want %d", method, path, code, resp, want)
		}
		return resp
	}
	must(c, "PUT", "/v1/templates/news", `{"category":"marketing","channels":{"default":{"en":{"subject":"{count} news","body":"{count} news:\n{items}"}}},`+
		`"digest":{"window":"8s","item":"- {title}"}}`, 200)
	must(c, "PUT", "/v1/templates/alert", `{"category":"orders","channels":{"default":{"en":{"subject":"Order {order}","body":"Order {order} needs you"}}},`+
		`"escalation":{"after":"8s","to":["sms"]}}`, 200)
	for _, title := range []string{"a", "b", "c"} {
		must(c, "POST", "/v1/notifications", fmt.Sprintf(`{"user_id":"u1","type":"news","data":{"title":%q},"channels":["email"]}`, title), 202)
	}
	must(c, "POST", "/v1/notifications", `{"user_id":"u2","type":"alert","data":{"order":"#7"},"channels":["email"]}`, 202)
	// The email goes out before the kill, so the SMS the timer sends after
	// the restart is the escalation of a delivery that was made. An email
	// still pending at the kill would wait for its claim to lapse, and the
	// timer could fire first.
	enginetest.EventuallyNil(t, 30*time.Second, "u2's email before the kill", func() error {
		var out outboxBody
		_ = json.Unmarshal(must(c, "GET", "/v1/outbox?user_id=u2&limit=100", "", 200), &out)
		return enginetest.State(len(out.Items) == 1, "%s", fmt.Sprint(out.Items))
	})
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.exited

	c2 := startChild(t, dataDir)
	outbox := func(user string) outboxBody {
		var out outboxBody
		if err := json.Unmarshal(must(c2, "GET", "/v1/outbox?user_id="+user+"&limit=100", "", 200), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	enginetest.EventuallyNil(t, 30*time.Second, "the digest and the escalated SMS after the restart", func() error {
		news, alerts := outbox("u1"), outbox("u2")
		return enginetest.State(len(news.Items) >= 1 && len(alerts.Items) >= 2, "%s", fmt.Sprint(news.Items, alerts.Items))
	})
	if news := outbox("u1"); len(news.Items) != 1 || news.Items[0].Body != "3 news:\n- a\n- b\n- c" {
		t.Errorf("u1's outbox = %+v; want one digest of the 3 events", news.Items)
	}
	channels := []string{}
	for _, it := range outbox("u2").Items {
		channels = append(channels, it.Channel)
	}
	if strings.Join(channels, ",") != "sms,email" {
		t.Errorf("u2's outbox channels (newest first) = %v; want the email, then one SMS", channels)
	}
	_ = c2.cmd.Process.Signal(syscall.SIGTERM)
	<-c2.exited
}
