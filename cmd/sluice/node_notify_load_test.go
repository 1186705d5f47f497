package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// TestCriticalNotDelayedByCampaign floods the marketing queues with a
// campaign and measures how long OTPs take from acceptance to the outbox
// meanwhile: a separate queue and workers per category keep it short.
func TestCriticalNotDelayedByCampaign(t *testing.T) {
	t.Parallel()
	const campaign = 6000 // 12,000 messages: still draining when the OTPs go out, even at load
	cfg := testConfig(t)
	n := startNode(t, cfg)
	base := n.httpURL

	var wg sync.WaitGroup
	batches := make(chan int, campaign/500) // every batch: no send waits on a worker
	for range 4 {
		wg.Go(func() {
			for start := range batches {
				var b strings.Builder
				b.WriteString(`{"notifications":[`)
				for i := start; i < start+500; i++ {
					if i > start {
						b.WriteByte(',')
					}
					fmt.Fprintf(&b, `{"user_id":"m%d","type":"flash_sale","data":{"discount":"30%%"},"channels":["email","push"]}`, i)
				}
				b.WriteString(`]}`)
				code, body, err := tryCall("POST", base+"/v1/notifications/batch", b.String())
				if err != nil || code != 200 || !strings.Contains(string(body), `"refused":0`) {
					t.Errorf("batch = %d %.300s %v", code, body, err)
				}
			}
		})
	}
	for start := 0; start < campaign; start += 500 {
		batches <- start
	}
	close(batches)
	wg.Wait()

	var latencies []time.Duration
	var ids []string
	for i := range 20 {
		code, body := call(t, "POST", base+"/v1/notifications", fmt.Sprintf(`{"user_id":"otp%d","type":"otp","data":{"code":"%06d"},"channels":["sms"]}`, i, i))
		var a struct {
			NotificationID string `json:"notification_id"`
		}
		if code != 202 || json.Unmarshal(body, &a) != nil {
			t.Fatalf("OTP = %d %s", code, body)
		}
		ids = append(ids, a.NotificationID)
	}
	for _, id := range ids {
		var got notificationBody
		enginetest.EventuallyNil(t, 30*time.Second, "OTP sent", func() error {
			got = getNotification(t, base, id)
			return enginetest.State(got.settled(), "%s", fmt.Sprint(got.Deliveries))
		})
		latencies = append(latencies, got.Deliveries[0].UpdatedAt.Sub(got.CreatedAt))
	}
	// The campaign must still have been draining when the OTPs went out.
	_, body := call(t, "GET", base+"/v1/outbox?user_id=m"+fmt.Sprint(campaign-1), "")
	stillDraining := !strings.Contains(string(body), `"channel":"email"`)
	slices.Sort(latencies)
	p50, p99 := latencies[len(latencies)/2], latencies[len(latencies)-1]
	t.Logf("OTP accept-to-outbox latency during a %d-message campaign: p50 %v, max %v (campaign still draining: %v)",
		2*campaign, p50, p99, stillDraining)
	// An OTP goes out within 5 s even during a campaign: critical
	// notifications have queues of their own (docs/notifications.md).
	if p99 > 5*time.Second {
		t.Errorf("OTP latency during the campaign: max %v, want under 5s", p99)
	}
}
