package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice/client"
)

// This example sends a campaign read from CSV. A stand-in for a Sluice
// server accepts every notification.
func ExampleClient_SendCampaign() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Notifications []client.Notification `json:"notifications"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		results := make([]client.BatchResult, len(in.Notifications))
		for i := range results {
			results[i].Status = "accepted"
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"results": results})
	}))
	defer srv.Close()

	users := "user_id,name\nu1,Ann\nu2,Bob\nu3,Cem\n"
	ns, err := client.ReadCampaignCSV(strings.NewReader(users), "flash_sale", "spring-sale", map[string]any{"discount": "20%"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ns[0].RequestID, ns[0].Data["name"], ns[0].Data["discount"])

	c := client.New(srv.URL, "")
	res, err := c.SendCampaign(context.Background(), ns, client.CampaignOptions{Batch: 2})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d sent: %d accepted, %d duplicates, %d refused\n", res.Done, res.Accepted, res.Duplicates, res.Refused)
	// Output:
	// spring-sale:u1 Ann 20%
	// 3 sent: 3 accepted, 0 duplicates, 0 refused
}

// standIn answers a few routes as a Sluice server would, for the examples
// (cmd/sluice/cmd_client_test.go runs every call against a real node).
func standIn() *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/links", func(w http.ResponseWriter, r *http.Request) {
		var in client.LinkRequest
		_ = json.NewDecoder(r.Body).Decode(&in)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"code": "k3Xq9aB", "short_url": "https://sho.rt/k3Xq9aB", "url": in.URL,
			"max_visits": in.MaxVisits, "fallback_url": in.FallbackURL, "click_ids": in.ClickIDs})
	})
	mux.HandleFunc("PUT /v1/links/{code}/rules", func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Rules []client.LinkRule }
		_ = json.NewDecoder(r.Body).Decode(&in)
		_ = json.NewEncoder(w).Encode(map[string]any{"code": r.PathValue("code"), "rules": in.Rules})
	})
	mux.HandleFunc("GET /v1/links/{code}/stats", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"code": r.PathValue("code"), "by": r.FormValue("by"), "group": r.FormValue("group"),
			"groups": []map[string]any{{"value": "mobile", "humans": 412, "bots": 37}}, "totals": map[string]any{"humans": 412, "bots": 37, "conversions": 9}})
	})
	mux.HandleFunc("GET /v1/links/{code}/qr", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/svg+xml")
		_, _ = w.Write([]byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`))
	})
	mux.HandleFunc("POST /v1/conversions", func(w http.ResponseWriter, r *http.Request) {
		var in client.ConversionRequest
		_ = json.NewDecoder(r.Body).Decode(&in)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"click_id": in.ClickID, "event": in.Event, "value": in.Value, "at": time.Now()})
	})
	mux.HandleFunc("POST /v1/users/{id}/inbox-token", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"user_id": r.PathValue("id"), "token": "ibx2.dTE.1764550000.0.Q2x", "url": "https://sho.rt/ui/inbox#t=ibx2.dTE.1764550000.0.Q2x"})
	})
	revoked := false
	mux.HandleFunc("DELETE /v1/users/{id}/inbox-tokens", func(w http.ResponseWriter, r *http.Request) {
		revoked = true
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /v1/users/{id}/inbox", func(w http.ResponseWriter, r *http.Request) {
		if revoked {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"status":401,"title":"Unauthorized","detail":"this inbox token has been revoked; ask for a new one"}`))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"items": []any{}, "unread": 0})
	})
	return httptest.NewServer(mux)
}

// This example makes a one-time link that goes to a fallback page once
// used, with click ids for conversions.
func ExampleClient_Shorten() {
	srv := standIn()
	defer srv.Close()
	c := client.New(srv.URL, os.Getenv("SLUICE_API_KEY"))
	l, err := c.Shorten(context.Background(), client.LinkRequest{URL: "https://example.com/reset?t=9f2c",
		MaxVisits: 1, FallbackURL: "https://example.com/link-used", ClickIDs: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(l.ShortURL, *l.MaxVisits, l.FallbackURL, l.ClickIDs)
	// Output: https://sho.rt/k3Xq9aB 1 https://example.com/link-used true
}

// This example sends iPhones to the App Store and splits everyone else
// 70/30 between two landing pages.
func ExampleClient_PutLinkRules() {
	srv := standIn()
	defer srv.Close()
	c := client.New(srv.URL, "")
	l, err := c.PutLinkRules(context.Background(), "spring", []client.LinkRule{
		{Name: "ios", If: &client.LinkConditions{OS: []string{"ios"}}, URL: "https://apps.apple.com/app/id123"},
		{Name: "ab", Split: []client.SplitArm{{Name: "a", URL: "https://example.com/a", Weight: 70}, {Name: "b", URL: "https://example.com/b", Weight: 30}}},
	})
	if err != nil {
		log.Fatal(err) // a 422 names the rule and field: rules[1].split[0].weight
	}
	fmt.Println(l.Code, len(l.Rules), l.Rules[0].Name, l.Rules[1].Split[0].Weight)
	// Output: spring 2 ios 70
}

// This example reads a week of a link's hits by device, and its
// conversions.
func ExampleClient_LinkStats() {
	srv := standIn()
	defer srv.Close()
	c := client.New(srv.URL, "")
	s, err := c.LinkStats(context.Background(), "spring", client.StatsQuery{From: time.Now().Add(-7 * 24 * time.Hour), By: "day", Group: "device"})
	if err != nil {
		log.Fatal(err)
	}
	for _, g := range s.Groups {
		fmt.Printf("%s: %d humans, %d bots\n", g.Value, g.Humans, g.Bots)
	}
	fmt.Println("conversions:", s.Totals.Conversions)
	// Output:
	// mobile: 412 humans, 37 bots
	// conversions: 9
}

// This example fetches a link's QR code as SVG, to write to a file.
func ExampleClient_LinkQR() {
	srv := standIn()
	defer srv.Close()
	c := client.New(srv.URL, "")
	img, contentType, err := c.LinkQR(context.Background(), "spring", client.QROptions{Format: "svg", Size: 512})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(contentType, strings.HasPrefix(string(img), "<svg"))
	// Output: image/svg+xml true
}

// This example reports a sale against the click id (sluice_cid) a link
// with click ids appended to the shop's URL.
func ExampleClient_RecordConversion() {
	srv := standIn()
	defer srv.Close()
	c := client.New(srv.URL, "")
	conv, err := c.RecordConversion(context.Background(), client.ConversionRequest{ClickID: "AAAAAAAAAAdlq8W3", Event: "sale", Value: 30})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(conv.Event, conv.Value, conv.Duplicate)
	// Output: sale 30 false
}

// This example mints an inbox token for a user's browser, then revokes
// every token of the user (a lost device): the token is refused with 401.
func ExampleClient_RevokeInboxTokens() {
	srv := standIn()
	defer srv.Close()
	ctx := context.Background()
	c := client.New(srv.URL, os.Getenv("SLUICE_API_KEY"))
	tok, err := c.InboxToken(ctx, "u1", time.Hour)
	if err != nil {
		log.Fatal(err)
	}
	browser := client.New(srv.URL, tok.Token) // the token works as the user's key to the inbox
	if _, err := browser.Inbox(ctx, "u1", client.InboxQuery{}); err != nil {
		log.Fatal(err)
	}
	if err := c.RevokeInboxTokens(ctx, "u1"); err != nil {
		log.Fatal(err)
	}
	_, err = browser.Inbox(ctx, "u1", client.InboxQuery{})
	fmt.Println(client.IsStatus(err, http.StatusUnauthorized))
	fmt.Println(err)
	// Output:
	// true
	// 401 Unauthorized: this inbox token has been revoked; ask for a new one
}
