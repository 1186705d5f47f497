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
// campaign, then sends OTPs: separate queues and workers per category, and
// the node's priority gate, send them while the campaign still drains.
// Marketing has one worker per channel, so its backlog lasts seconds
// however fast the machine: with 64 a quiet machine drained the 12,000
// messages before the OTPs went out, and the test proved nothing.
func TestCriticalNotDelayedByCampaign(t *testing.T) {
	enginetest.Faults(t)
	t.Parallel()
	const campaign = 6000 // 12,000 messages
	cfg := testConfig(t)
	cfg.Notify.WorkersMarketing = 1
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
	// The OTPs overtook the campaign: when the last of them was sent, the
	// campaign's backlog, accepted before any of them, was still draining.
	// Sharing its queue, they would have waited behind all of it. How long
	// they took is logged, not asserted (the machine's load decides it):
	// `sluice bench notify` measures it, docs/benchmarks.md has the figures.
	_, metrics := call(t, "GET", base+"/metrics", "")
	marketing := 0
	for line := range strings.Lines(string(metrics)) {
		if strings.HasPrefix(line, "sluice_notify_deliveries_total{") && strings.Contains(line, `category="marketing"`) {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
				marketing += int(v)
			}
		}
	}
	slices.Sort(latencies)
	p50, p99 := latencies[len(latencies)/2], latencies[len(latencies)-1]
	t.Logf("OTP accept-to-outbox latency during a %d-message campaign: p50 %v, max %v (campaign deliveries done by then: %d)",
		2*campaign, p50, p99, marketing)
	if marketing >= 2*campaign {
		t.Errorf("the campaign's %d deliveries were all done before the last OTP was sent: the OTPs waited behind them", marketing)
	}
}
