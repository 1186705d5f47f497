package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/enginetest"
)

// testClient is a client of the node whose exchanges the OpenAPI
// validator checks.
func testClient(base, key string) *client.Client {
	c := client.New(base, key)
	c.HTTPClient = &http.Client{Transport: apiTransport, Timeout: 30 * time.Second}
	return c
}

// visit follows the short link code as a phone's browser, without
// following the redirect, and returns the Location.
func visit(t *testing.T, base, code string) (int, *url.URL) {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/"+code, nil)
	req.Header.Set("User-Agent", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) Mobile/15E148")
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	return resp.StatusCode, loc
}

// TestClientLinks drives the link calls of package client against a node:
// a one-time link with a fallback and click ids, a conversion against its
// click, redirect rules, stats and the QR code.
func TestClientLinks(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Links.FlushInterval = 50 * time.Millisecond
	n := startNode(t, cfg)
	ctx := context.Background()
	c := testClient(n.httpURL, "")

	l, err := c.Shorten(ctx, client.LinkRequest{URL: "https://example.com/reset?t=1", Slug: "reset1", MaxVisits: 1,
		FallbackURL: "https://example.com/used", ClickIDs: true})
	if err != nil {
		t.Fatalf("Shorten: %v", err)
	}
	if l.MaxVisits == nil || *l.MaxVisits != 1 || l.FallbackURL != "https://example.com/used" || !l.ClickIDs || l.Visits != 0 {
		t.Fatalf("Shorten = %+v, want max_visits 1, the fallback and click ids", l)
	}
	code, loc := visit(t, n.httpURL, "reset1")
	cid := loc.Query().Get("sluice_cid")
	if code != http.StatusFound || loc.Path != "/reset" || cid == "" {
		t.Fatalf("first visit = %d %v, want the target with a sluice_cid", code, loc)
	}
	if code, loc := visit(t, n.httpURL, "reset1"); code != http.StatusFound || loc.String() != "https://example.com/used" {
		t.Errorf("second visit of a one-time link = %d %v, want the fallback", code, loc)
	}

	conv, err := c.RecordConversion(ctx, client.ConversionRequest{ClickID: cid, Event: "sale", Value: 30})
	if err != nil || conv.Duplicate || conv.Event != "sale" || conv.Value != 30 || conv.At.IsZero() {
		t.Fatalf("RecordConversion = %+v, %v; want a new sale of 30", conv, err)
	}
	again, err := c.RecordConversion(ctx, client.ConversionRequest{ClickID: cid, Event: "sale", Value: 99})
	if err != nil || !again.Duplicate || again.Value != 30 {
		t.Errorf("RecordConversion again = %+v, %v; want the first, as a duplicate", again, err)
	}
	if _, err := c.RecordConversion(ctx, client.ConversionRequest{ClickID: "nope", Event: "sale"}); !fieldRefused(err, 422, "click_id") {
		t.Errorf("RecordConversion(unknown click id) = %v, want 422 naming click_id", err)
	}

	rules := []client.LinkRule{
		{Name: "ios", If: &client.LinkConditions{OS: []string{"ios"}}, URL: "https://apps.example.com/ios"},
		{Name: "ab", Split: []client.SplitArm{{Name: "a", URL: "https://example.com/a", Weight: 1}, {Name: "b", URL: "https://example.com/b", Weight: 1}}},
	}
	if _, err := c.Shorten(ctx, client.LinkRequest{URL: "https://example.com/app", Slug: "app1"}); err != nil {
		t.Fatal(err)
	}
	ruled, err := c.PutLinkRules(ctx, "app1", rules)
	if err != nil || len(ruled.Rules) != 2 || ruled.Rules[0].Name != "ios" || len(ruled.Rules[1].Split) != 2 {
		t.Fatalf("PutLinkRules = %+v, %v; want both rules back", ruled.Rules, err)
	}
	if code, loc := visit(t, n.httpURL, "app1"); code != http.StatusFound || loc.String() != "https://apps.example.com/ios" {
		t.Errorf("an iPhone's visit of app1 = %d %v, want the ios rule's target", code, loc)
	}
	bad := []client.LinkRule{{Name: "x", If: &client.LinkConditions{OS: []string{"beos"}}, URL: "https://example.com/"}}
	if _, err := c.PutLinkRules(ctx, "app1", bad); !fieldRefused(err, 422, "rules[0].if.os[0]") {
		t.Errorf("PutLinkRules(unknown os) = %v, want 422 naming rules[0].if.os[0]", err)
	}
	if cleared, err := c.PutLinkRules(ctx, "app1", nil); err != nil || cleared.Rules != nil {
		t.Errorf("PutLinkRules(nil) = %+v, %v; want the rules removed", cleared.Rules, err)
	}
	if _, err := c.PutLinkRules(ctx, "nosuch", nil); !client.IsStatus(err, 404) {
		t.Errorf("PutLinkRules(unknown code) = %v, want 404", err)
	}

	// The second visit, of the used-up link, went to the fallback: no click.
	enginetest.EventuallyNil(t, 10*time.Second, "the click and the sale are in the stats", func() error {
		s, err := c.LinkStats(ctx, "reset1", client.StatsQuery{From: time.Now().Add(-time.Hour), By: "hour", Group: "os"})
		if err != nil {
			return enginetest.State(false, "%s", err.Error())
		}
		ok := s.Totals.Humans == 1 && s.Totals.Conversions == 1 && s.Totals.ConversionValue == 30 && s.By == "hour" && s.Group == "os" &&
			len(s.Groups) == 1 && s.Groups[0].Value == "ios" && len(s.Series) == 1
		return enginetest.State(ok, "%s", "stats: "+strings.ReplaceAll(strings.TrimSpace(fmtJSON(s)), "\n", " "))
	})
	if _, err := c.LinkStats(ctx, "reset1", client.StatsQuery{Group: "planet"}); !client.IsStatus(err, 400) && !client.IsStatus(err, 422) {
		t.Errorf("LinkStats(group planet) = %v, want refused", err)
	}

	png, ctype, err := c.LinkQR(ctx, "reset1", client.QROptions{})
	if err != nil || ctype != "image/png" || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("LinkQR = %d bytes of %q, %v; want a PNG", len(png), ctype, err)
	}
	svg, ctype, err := c.LinkQR(ctx, "reset1", client.QROptions{Format: "svg", Size: 512})
	if err != nil || ctype != "image/svg+xml" || !bytes.Contains(svg, []byte("<svg")) {
		t.Errorf("LinkQR(svg) = %q, %v; want an SVG", ctype, err)
	}
	if _, _, err := c.LinkQR(ctx, "reset1", client.QROptions{Size: 10}); !client.IsStatus(err, 400) && !client.IsStatus(err, 422) {
		t.Errorf("LinkQR(size 10) = %v, want refused", err)
	}
}

// fieldRefused reports whether err is an *Error of status naming field.
func fieldRefused(err error, status int, field string) bool {
	e, ok := err.(*client.Error)
	return ok && e.Status == status && slices.ContainsFunc(e.Errors, func(f client.FieldError) bool { return f.Field == field })
}

// TestClientNotifications drives the notification, event subscription and
// inbox calls of package client against a node.
func TestClientNotifications(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.AllowPrivate = true // the event receiver is on loopback
	n := startNode(t, cfg)
	ctx := context.Background()
	c := testClient(n.httpURL, "")

	a, err := c.Send(ctx, client.Notification{UserID: "u1", Type: "order.shipped", Channels: []string{"inapp"}, Data: map[string]any{"order": "#1"}})
	if err != nil {
		t.Fatal(err)
	}
	var page client.InboxPage
	enginetest.EventuallyNil(t, 10*time.Second, "the message reaches the inbox", func() error {
		page, err = c.Inbox(ctx, "u1", client.InboxQuery{Limit: 10})
		return enginetest.State(err == nil && len(page.Items) == 1 && page.Unread == 1, "%s", fmtJSON(page))
	})
	if m := page.Items[0]; m.ID != a.NotificationID || m.Seq != 1 || m.Read || m.Subject == "" {
		t.Errorf("Inbox item = %+v, want the unread notification %s", m, a.NotificationID)
	}
	m, unread, err := c.MarkInboxMessage(ctx, "u1", a.NotificationID, client.InboxRead)
	if err != nil || !m.Read || m.ReadAt == nil || unread != 0 {
		t.Errorf("MarkInboxMessage(read) = %+v, %d, %v; want read, 0 unread", m, unread, err)
	}
	if m, unread, err = c.MarkInboxMessage(ctx, "u1", a.NotificationID, client.InboxUnread); err != nil || m.Read || unread != 1 {
		t.Errorf("MarkInboxMessage(unread) = %+v, %d, %v; want unread, 1", m, unread, err)
	}
	if changed, unread, err := c.ReadAllInbox(ctx, "u1"); err != nil || changed != 1 || unread != 0 {
		t.Errorf("ReadAllInbox = %d, %d, %v; want 1 changed, 0 unread", changed, unread, err)
	}
	if m, _, err = c.MarkInboxMessage(ctx, "u1", a.NotificationID, client.InboxArchive); err != nil || m.ArchivedAt == nil {
		t.Errorf("MarkInboxMessage(archive) = %+v, %v; want archived", m, err)
	}
	if p, err := c.Inbox(ctx, "u1", client.InboxQuery{Archived: true}); err != nil || len(p.Items) != 1 {
		t.Errorf("Inbox(archived) = %+v, %v; want the archived message", p, err)
	}
	if _, _, err := c.MarkInboxMessage(ctx, "u1", "ntf_nope", client.InboxRead); !client.IsStatus(err, 404) {
		t.Errorf("MarkInboxMessage(unknown) = %v, want 404", err)
	}

	tok, err := c.InboxToken(ctx, "u1", time.Hour)
	if err != nil || !strings.HasPrefix(tok.Token, "ibx2.") || tok.UserID != "u1" || !strings.HasSuffix(tok.URL, "#t="+tok.Token) ||
		tok.ExpiresAt.Before(time.Now().Add(59*time.Minute)) {
		t.Fatalf("InboxToken = %+v, %v", tok, err)
	}
	user := testClient(n.httpURL, tok.Token)
	if _, err := user.Inbox(ctx, "u1", client.InboxQuery{}); err != nil {
		t.Errorf("Inbox with the user's token: %v", err)
	}
	if _, err := user.Inbox(ctx, "u2", client.InboxQuery{}); !client.IsStatus(err, 403) {
		t.Errorf("another user's inbox with the token = %v, want 403", err)
	}
	if err := c.RevokeInboxTokens(ctx, "u1"); err != nil {
		t.Fatalf("RevokeInboxTokens: %v", err)
	}
	if _, err := user.Inbox(ctx, "u1", client.InboxQuery{}); !client.IsStatus(err, 401) {
		t.Errorf("Inbox with a revoked token = %v, want 401", err)
	}

	canceled, err := c.CancelNotification(ctx, a.NotificationID)
	if err != nil || canceled.ID != a.NotificationID || !slices.Contains([]string{"canceled", "partly_canceled", "not_canceled"}, canceled.Outcome) {
		t.Errorf("CancelNotification = %+v, %v", canceled, err)
	}
	if _, err := c.CancelNotification(ctx, "ntf_nope"); !client.IsStatus(err, 404) {
		t.Errorf("CancelNotification(unknown) = %v, want 404", err)
	}

	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	t.Cleanup(hook.Close)
	failures := 3
	sub, err := c.CreateEventSubscription(ctx, client.EventSubscriptionRequest{URL: hook.URL + "/events",
		Events: []string{"delivery.failed", "delivery.dead"}, DisableAfter: "48h", DisableAfterFailures: &failures})
	if err != nil || !strings.HasPrefix(sub.Secret, "whsec_") || sub.DisableAfterFailures != 3 || sub.Status != "enabled" {
		t.Fatalf("CreateEventSubscription = %+v, %v", sub, err)
	}
	if _, err := c.CreateEventSubscription(ctx, client.EventSubscriptionRequest{URL: "ftp://x", Events: []string{"delivery.sent"}}); !client.IsStatus(err, 422) {
		t.Errorf("CreateEventSubscription(ftp) = %v, want 422", err)
	}
	subs, err := c.EventSubscriptions(ctx)
	if err != nil || len(subs) != 1 || subs[0].ID != sub.ID || subs[0].Secret != "" {
		t.Errorf("EventSubscriptions = %+v, %v; want the one, without its secret", subs, err)
	}
	if got, err := c.EventSubscription(ctx, sub.ID); err != nil || got.URL != hook.URL+"/events" {
		t.Errorf("EventSubscription = %+v, %v", got, err)
	}
	rec, err := c.RecoverEventSubscription(ctx, sub.ID, time.Now().Add(-time.Hour), true)
	if err != nil || rec.ID != sub.ID || rec.More {
		t.Errorf("RecoverEventSubscription = %+v, %v", rec, err)
	}
	if err := c.DeleteEventSubscription(ctx, sub.ID); err != nil {
		t.Fatalf("DeleteEventSubscription: %v", err)
	}
	if _, err := c.EventSubscription(ctx, sub.ID); !client.IsStatus(err, 404) {
		t.Errorf("EventSubscription after delete = %v, want 404", err)
	}
}

// TestLinksCLI runs the link commands against a node: shorten with a visit
// limit, a fallback and click ids, then rules from a file, stats, the QR
// code and a conversion.
func TestLinksCLI(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Links.FlushInterval = 50 * time.Millisecond
	n := startNode(t, cfg)
	env := map[string]string{"SLUICE_SERVER": n.httpURL}
	dir := t.TempDir()

	code, out, errs := runCLI(t, env, "shorten", "https://example.com/once", "--slug", "once", "--max-visits", "1",
		"--fallback-url", "https://example.com/gone", "--click-ids", "-v")
	if code != 0 || !strings.HasSuffix(strings.TrimSpace(out), "/once") || !strings.Contains(errs, "max visits 1") {
		t.Fatalf("shorten --max-visits = %d %q %q", code, out, errs)
	}
	if code, _, errs := runCLI(t, env, "shorten", "https://example.com/x", "--max-visits", "-1"); code != exitError || !strings.Contains(errs, "--max-visits") {
		t.Errorf("negative --max-visits = %d %q", code, errs)
	}
	code, out, _ = runCLI(t, env, "links", "get", "once", "--json")
	if code != 0 || !strings.Contains(out, `"max_visits": 1`) || !strings.Contains(out, `"click_ids": true`) || !strings.Contains(out, `"fallback_url": "https://example.com/gone"`) {
		t.Fatalf("links get = %d %q", code, out)
	}
	_, loc := visit(t, n.httpURL, "once")
	cid := loc.Query().Get("sluice_cid")

	rules := filepath.Join(dir, "rules.json")
	if err := os.WriteFile(rules, []byte(`{"rules": [{"name": "ios", "if": {"os": ["ios"]}, "url": "https://apps.example.com/ios"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runCLI(t, env, "links", "rules", "once", "--file", rules); code != 0 || !strings.Contains(out, "1 rules on once") || !strings.Contains(out, `"name":"ios"`) {
		t.Errorf("links rules = %d %q %q", code, out, errs)
	}
	if code, out, errs := runCLI(t, env, "links", "rules", "once", "--file", rules, "--json"); code != 0 || !strings.Contains(out, `"name": "ios"`) {
		t.Errorf("links rules --json = %d %q %q", code, out, errs)
	}
	if err := os.WriteFile(rules, []byte(`[{"name": "x", "if": {"os": ["beos"]}, "url": "https://example.com/"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI(t, env, "links", "rules", "once", "--file", rules); code != 1 || !strings.Contains(errs, "422") || !strings.Contains(errs, "rules[0].if.os[0]") {
		t.Errorf("links rules (bad os) = %d %q, want 422 naming the field", code, errs)
	}
	if err := os.WriteFile(rules, []byte(`{"rulez": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI(t, env, "links", "rules", "once", "--file", rules); code != exitError || !strings.Contains(errs, "rulez") {
		t.Errorf("links rules (unknown field) = %d %q", code, errs)
	}
	if code, _, errs := runCLI(t, env, "links", "rules", "once"); code != exitError || !strings.Contains(errs, "--file is required") {
		t.Errorf("links rules without --file = %d %q", code, errs)
	}

	if code, out, errs := runCLI(t, env, "links", "convert", "--click-id", cid, "--event", "lead", "--value", "5", "--json"); code != 0 || !strings.Contains(out, `"event": "lead"`) {
		t.Errorf("links convert = %d %q %q", code, out, errs)
	}
	if code, _, errs := runCLI(t, env, "links", "convert", "--click-id", cid, "--event", "lead"); code != 0 || !strings.Contains(errs, "recorded before") {
		t.Errorf("links convert again = %d %q", code, errs)
	}
	enginetest.EventuallyNil(t, 10*time.Second, "the stats show the click and the lead", func() error {
		code, out, errs := runCLI(t, env, "links", "stats", "once", "--from", "1h", "--by", "hour", "--group", "device", "--json")
		return enginetest.State(code == 0 && strings.Contains(out, `"value": "mobile"`) && strings.Contains(out, `"conversions": 1`), "%s", out+errs)
	})
	if code, _, errs := runCLI(t, env, "links", "stats", "once", "--from", "yesterday"); code != exitError || !strings.Contains(errs, "--from") {
		t.Errorf("links stats --from yesterday = %d %q", code, errs)
	}

	qr := filepath.Join(dir, "once.svg")
	if code, out, errs := runCLI(t, env, "links", "qr", "once", "--out", qr, "--format", "svg", "--size", "128"); code != 0 || !strings.Contains(out, "image/svg+xml") {
		t.Fatalf("links qr = %d %q %q", code, out, errs)
	}
	if b, err := os.ReadFile(qr); err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("the QR file: %v, want an SVG", err)
	}
	if code, _, errs := runCLI(t, env, "links", "qr", "once"); code != exitError || !strings.Contains(errs, "--out is required") {
		t.Errorf("links qr without --out = %d %q", code, errs)
	}
	if code, _, errs := runCLI(t, env, "links", "frob"); code != exitError || !strings.Contains(errs, "unknown subcommand") || !strings.Contains(errs, "rules CODE --file") {
		t.Errorf("links frob = %d %q", code, errs)
	}
	if code, _, errs := runCLI(t, env, "links", "get"); code != exitError || !strings.Contains(errs, "want CODE") {
		t.Errorf("links get without a code = %d %q", code, errs)
	}
}

// TestNotifyCLI runs the inbox, notification and event subscription
// commands against a node.
func TestNotifyCLI(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.AllowPrivate = true
	n := startNode(t, cfg)
	env := map[string]string{"SLUICE_SERVER": n.httpURL}

	code, out, errs := runCLI(t, env, "send", "--user", "u7", "--type", "order.shipped", "--channel", "inapp", "--data", "order=#7")
	if code != 0 {
		t.Fatalf("send = %d %q", code, errs)
	}
	id := strings.TrimSpace(out)
	enginetest.EventuallyNil(t, 10*time.Second, "the message reaches the inbox", func() error {
		_, out, errs := runCLI(t, env, "inbox", "list", "u7", "--limit", "5", "--json")
		return enginetest.State(strings.Contains(out, `"id": "`+id+`"`) && strings.Contains(out, `"unread": 1`), "%s", out+errs)
	})
	for _, tt := range []struct{ verb, want string }{{"read", "unread 0"}, {"unread", "unread 1"}, {"archive", "unread 0"}} {
		if code, out, errs := runCLI(t, env, "inbox", tt.verb, "u7", id); code != 0 || strings.TrimSpace(out) != tt.want {
			t.Errorf("inbox %s = %d %q %q, want %q", tt.verb, code, out, errs, tt.want)
		}
	}
	if code, out, _ := runCLI(t, env, "inbox", "list", "u7", "--archived"); code != 0 || !strings.Contains(out, id) {
		t.Errorf("inbox list --archived = %d %q", code, out)
	}
	if code, out, _ := runCLI(t, env, "inbox", "read-all", "u7"); code != 0 || strings.TrimSpace(out) != "changed 0, unread 0" {
		t.Errorf("inbox read-all = %d %q", code, out)
	}
	code, out, errs = runCLI(t, env, "inbox", "token", "u7", "--ttl", "1h", "-v")
	tok := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(tok, "ibx2.") || !strings.Contains(errs, "/ui/inbox#t="+tok) {
		t.Fatalf("inbox token = %d %q %q", code, out, errs)
	}
	userEnv := map[string]string{"SLUICE_SERVER": n.httpURL, "SLUICE_API_KEY": tok}
	if code, _, errs := runCLI(t, userEnv, "inbox", "list", "u7"); code != 0 {
		t.Errorf("inbox list with the user's token = %d %q", code, errs)
	}
	if code, _, errs := runCLI(t, env, "inbox", "revoke-tokens", "u7"); code != 0 || !strings.Contains(errs, "revoked") {
		t.Fatalf("inbox revoke-tokens = %d %q", code, errs)
	}
	if code, _, errs := runCLI(t, userEnv, "inbox", "list", "u7"); code != 1 || !strings.Contains(errs, "401") || !strings.Contains(errs, "revoked") {
		t.Errorf("inbox list with a revoked token = %d %q, want 401 revoked", code, errs)
	}

	// --json prints the API's answer: no zero times nor "channels": null
	// where the API leaves them out.
	if code, out, errs := runCLI(t, env, "notifications", "cancel", id, "--json"); code != 0 || !strings.Contains(out, `"outcome"`) || !strings.Contains(out, id) ||
		strings.Contains(out, "0001-01-01") || strings.Contains(out, "null") {
		t.Errorf("notifications cancel --json = %d %q %q", code, out, errs)
	}
	if code, out, errs := runCLI(t, env, "notifications", "cancel", id); code != 0 || !strings.Contains(out, "outcome") || !strings.Contains(out, "inapp") ||
		strings.Contains(out, "0001-01-01") {
		t.Errorf("notifications cancel = %d %q %q", code, out, errs)
	}
	if code, _, errs := runCLI(t, env, "notifications", "cancel", "ntf_nope"); code != 1 || !strings.Contains(errs, "404") {
		t.Errorf("notifications cancel (unknown) = %d %q", code, errs)
	}
	if code, out, _ := runCLI(t, env, "notifications", "get", id, "--json"); code != 0 || !strings.Contains(out, `"deliveries"`) {
		t.Errorf("notifications get = %d %q", code, out)
	}

	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	t.Cleanup(hook.Close)
	code, out, errs = runCLI(t, env, "events", "create", "--url", hook.URL, "--events", "delivery.failed", "--events", "delivery.dead",
		"--disable-after-failures", "0", "--json")
	if code != 0 || !strings.Contains(out, `"secret": "whsec_`) || !strings.Contains(out, `"disable_after_failures": 0`) {
		t.Fatalf("events create = %d %q %q", code, out, errs)
	}
	var sub client.EventSubscription
	if err := jsonUnmarshal(out, &sub); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := runCLI(t, env, "events", "list"); code != 0 || !strings.Contains(out, sub.ID) || strings.Contains(out, "whsec_") {
		t.Errorf("events list = %d %q", code, out)
	}
	if code, out, errs := runCLI(t, env, "events", "recover", sub.ID, "--since", "1h", "--json"); code != 0 || !strings.Contains(out, `"queued"`) {
		t.Errorf("events recover = %d %q %q", code, out, errs)
	}
	if code, _, errs := runCLI(t, env, "events", "recover", sub.ID); code != exitError || !strings.Contains(errs, "--since is required") {
		t.Errorf("events recover without --since = %d %q", code, errs)
	}
	if code, _, errs := runCLI(t, env, "events", "delete", sub.ID); code != 0 {
		t.Errorf("events delete = %d %q", code, errs)
	}
	if code, _, errs := runCLI(t, env, "events", "get", sub.ID); code != 1 || !strings.Contains(errs, "404") {
		t.Errorf("events get after delete = %d %q", code, errs)
	}
}

func fmtJSON(v any) string {
	var b bytes.Buffer
	_ = printJSON(&b, v)
	return b.String()
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
