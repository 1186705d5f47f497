package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/enginetest"
)

// TestTopicsCLI: topics subscribe, list, subscribers and unsubscribe, then
// campaign send --topic, which the node's sender broadcasts to the
// subscribers, followed with broadcasts get.
func TestTopicsCLI(t *testing.T) {
	t.Parallel()
	_, env := startCLINode(t)
	run := func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, env, args...)
		if code != want {
			t.Fatalf("sluice %s = exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out, errOut)
		}
		return out
	}
	if out := run(0, "topics", "subscribe", "deals", "ana", "ben", "cy"); !strings.Contains(out, "subscribed 3 new of 3 to deals") {
		t.Errorf("topics subscribe = %q", out)
	}
	run(0, "topics", "subscribe", "deals", "ana")
	run(0, "topics", "unsubscribe", "deals", "cy")
	if out := run(0, "topics", "list"); !strings.Contains(out, "deals") || !strings.Contains(out, "2") {
		t.Errorf("topics list = %q", out)
	}
	if out := run(0, "topics", "subscribers", "deals"); out != "ana\nben\n" {
		t.Errorf("topics subscribers = %q, want ana and ben", out)
	}
	run(2, "topics", "subscribe", "deals")

	var sent struct {
		BroadcastID string `json:"broadcast_id"`
	}
	out := run(0, "campaign", "send", "--type", "flash_sale", "--topic", "deals", "--campaign", "spring", "--data", "discount=30%", "--json")
	if err := json.Unmarshal([]byte(out), &sent); err != nil || !strings.HasPrefix(sent.BroadcastID, "bc_") {
		t.Fatalf("campaign send --topic = %q, %v", out, err)
	}
	enginetest.EventuallyNil(t, 60*time.Second, "the broadcast done", func() error {
		var b client.Broadcast
		if err := json.Unmarshal([]byte(run(0, "broadcasts", "get", sent.BroadcastID, "--json")), &b); err != nil {
			return err
		}
		if b.Status != "done" || b.Accepted != 2 {
			return fmt.Errorf("broadcast %s, %d accepted", b.Status, b.Accepted)
		}
		return nil
	})
	if out := run(0, "campaign", "send", "--type", "flash_sale", "--topic", "deals", "--campaign", "spring", "--data", "discount=30%"); !strings.Contains(out, "already scheduled") {
		t.Errorf("the same campaign again = %q", out)
	}
	if out := run(0, "broadcasts", "list"); !strings.Contains(out, sent.BroadcastID) {
		t.Errorf("broadcasts list = %q", out)
	}
	run(2, "campaign", "send", "--type", "flash_sale", "--topic", "deals", "--campaign", "x", "--local", "09:00")
}
