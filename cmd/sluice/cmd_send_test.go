package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
)

func TestSendAndCampaignCommands(t *testing.T) {
	t.Parallel()
	n, env := startCLINode(t)
	code, out, errOut := runCLI(t, env, "send", "--user", "u1", "--type", "otp", "--data", "code=123456", "--request-id", "cli-1")
	if code != 0 || !strings.HasPrefix(strings.TrimSpace(out), "ntf_") {
		t.Fatalf("sluice send = %d %q %q", code, out, errOut)
	}
	id := strings.TrimSpace(out)
	if code, out2, errOut := runCLI(t, env, "send", "--user", "u1", "--type", "otp", "--data", "code=123456", "--request-id", "cli-1"); code != 0 ||
		strings.TrimSpace(out2) != id || !strings.Contains(errOut, "sent before") {
		t.Errorf("repeated sluice send = %d %q %q, want the same id and a note", code, out2, errOut)
	}
	if code, _, errOut := runCLI(t, env, "send", "--user", "u1", "--type", "nope"); code != 1 || !strings.Contains(errOut, "type") {
		t.Errorf("sluice send of an unknown type = %d %q, want exit 1 naming the field", code, errOut)
	}

	csv := filepath.Join(t.TempDir(), "users.csv")
	var b strings.Builder
	b.WriteString("user_id,name\n")
	// 200 users in batches of 50: several requests in flight and a
	// progress bar, with little enough work that a loaded machine running
	// the race detector finishes each request well inside the client's
	// 30s timeout (1,200 in batches of 500 ran at 6/s there: CPU, not the
	// node, which sends them at 400/s without the race detector).
	const users = 200
	for i := range users {
		fmt.Fprintf(&b, "c%d,Name %d\n", i, i)
	}
	if err := os.WriteFile(csv, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI(t, env, "campaign", "send", "--type", "flash_sale", "--users", csv, "--campaign", "spring", "--data", "discount=20%", "--batch", "50")
	t.Logf("campaign send: %s", strings.TrimSpace(out))
	if code != 0 || !strings.Contains(out, fmt.Sprintf("%d accepted, 0 duplicates, 0 refused", users)) || !strings.Contains(errOut, fmt.Sprintf("%d/%d 100%%", users, users)) {
		t.Fatalf("campaign send = %d %q %q", code, out, errOut)
	}
	code, out, _ = runCLI(t, env, "campaign", "send", "--type", "flash_sale", "--users", csv, "--campaign", "spring", "--data", "discount=20%", "--batch", "50")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("0 accepted, %d duplicates", users)) {
		t.Errorf("the same campaign again = %d %q, want every item a duplicate", code, out)
	}
	enginetest.EventuallyNil(t, 20*time.Second, "campaign text in the outbox", func() error {
		_, body := call(t, "GET", n.httpURL+"/v1/outbox?user_id=c7", "")
		return enginetest.State(strings.Contains(string(body), "Name 7, a flash sale just started: 20% off"), "%s", string(body))
	})
}
