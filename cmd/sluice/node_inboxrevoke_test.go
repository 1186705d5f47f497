package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/inbox"
)

// TestInboxTokenRevokedOnEveryNode: two nodes on one PostgreSQL. A token
// minted on A opens the inbox on B; after A revokes the user's tokens, A
// refuses the token at once and B within inbox.DefaultTokenCacheTTL, each
// with a 401 problem+json; a token minted after the revocation works on B
// at once.
func TestInboxTokenRevokedOnEveryNode(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	a, b := startTwoNodes(t, cfg)
	ctx := context.Background()
	admin := testClient(a.httpURL, "")

	old, err := admin.InboxToken(ctx, "rv", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	onA, onB := testClient(a.httpURL, old.Token), testClient(b.httpURL, old.Token)
	if _, err := onB.Inbox(ctx, "rv", client.InboxQuery{}); err != nil {
		t.Fatalf("the token on B before the revocation: %v", err)
	}
	if err := admin.RevokeInboxTokens(ctx, "rv"); err != nil {
		t.Fatalf("RevokeInboxTokens on A: %v", err)
	}
	revoked := func(err error) bool {
		e, ok := err.(*client.Error)
		return ok && e.Status == 401 && e.Type != "" && e.Detail == "this inbox token has been revoked; ask for a new one"
	}
	if _, err := onA.Inbox(ctx, "rv", client.InboxQuery{}); !revoked(err) {
		t.Errorf("the revoked token on A = %v, want a 401 problem: revoked", err)
	}
	start := time.Now()
	enginetest.EventuallyNil(t, inbox.DefaultTokenCacheTTL+20*time.Second, "B refuses the revoked token", func() error {
		_, err := onB.Inbox(ctx, "rv", client.InboxQuery{})
		return enginetest.State(revoked(err), "%s", "error: "+errString(err))
	})
	t.Logf("B refused the revoked token %v after the revocation (bound %v)", time.Since(start).Round(time.Millisecond), inbox.DefaultTokenCacheTTL)
	// The raw answer is problem+json, as the API's every error.
	code, raw := call(t, "GET", b.httpURL+"/v1/users/rv/inbox?token="+old.Token, "")
	var p struct {
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}
	if code != 401 || json.Unmarshal(raw, &p) != nil || p.Status != 401 {
		t.Errorf("GET with the revoked token on B = %d %s, want a 401 problem", code, raw)
	}

	fresh, err := admin.InboxToken(ctx, "rv", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testClient(b.httpURL, fresh.Token).Inbox(ctx, "rv", client.InboxQuery{}); err != nil {
		t.Errorf("a token minted after the revocation, on B: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return "none"
	}
	return err.Error()
}
