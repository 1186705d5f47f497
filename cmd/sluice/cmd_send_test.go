package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSendAndCampaignCommands(t *testing.T) {
	t.Parallel()
	n := startNode(t, testConfig(t))
	env := map[string]string{"SLUICE_SERVER": n.httpURL}
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
	for i := range 1200 {
		fmt.Fprintf(&b, "c%d,Name %d\n", i, i)
	}
	if err := os.WriteFile(csv, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI(t, env, "campaign", "send", "--type", "flash_sale", "--users", csv, "--campaign", "spring", "--data", "discount=20%")
	if code != 0 || !strings.Contains(out, "1200 accepted, 0 duplicates, 0 refused") || !strings.Contains(errOut, "1200/1200 100%") {
		t.Fatalf("campaign send = %d %q %q", code, out, errOut)
	}
	code, out, _ = runCLI(t, env, "campaign", "send", "--type", "flash_sale", "--users", csv, "--campaign", "spring", "--data", "discount=20%")
	if code != 0 || !strings.Contains(out, "0 accepted, 1200 duplicates") {
		t.Errorf("the same campaign again = %d %q, want every item a duplicate", code, out)
	}
	eventually(t, 20*time.Second, "campaign text in the outbox", func() (bool, string) {
		_, body := call(t, "GET", n.httpURL+"/v1/outbox?user_id=c7", "")
		return strings.Contains(string(body), "Name 7, a flash sale just started: 20% off"), string(body)
	})
}
