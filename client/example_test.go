package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

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
