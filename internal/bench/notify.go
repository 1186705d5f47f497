package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/client"
)

// Notification scenarios measure the pipeline through the API alone, so
// they work against any server: accepts are timed by the client, the drain
// by the server's sluice_notify_deliveries_total, and accept-to-delivery
// latency from a sample of records (created_at to the delivery's
// updated_at, both stamped by the server).

// notifySample is how many notifications' records are read back for the
// latency of delivery.
const notifySample = 200

// notify posts single notifications (order.confirmed, to users without
// settings, so every channel goes to the outbox) from the workers, then
// waits until every one is delivered. With NotifyMix all: email, sms and
// push (three deliveries each). With
// seeds, three in four name email and push and one in four email only:
// 1.75 provider calls per notification, the mix of the original design
// (docs/benchmarks.md).
func notify(ctx context.Context, s *Session) ([]Result, error) {
	run := rand.Text()[:8]
	before, err := s.delivered(ctx, "")
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var ids []string
	var deliveries int64
	start := time.Now()
	accept, err := Run(ctx, "notify-accept", targetSluice, s.Options, func(int) Op {
		return func(ctx context.Context, seq int64) error {
			chs, n := notifyChannels(s.NotifyMix, seq)
			a, err := s.c.Send(ctx, client.Notification{
				RequestID: "bench-" + run + "-" + strconv.FormatInt(seq, 10),
				UserID:    "bench-" + run + "-u" + strconv.FormatInt(seq%1000, 10),
				Type:      "order.confirmed",
				Data:      map[string]any{"order": "#" + strconv.FormatInt(seq, 10), "name": "Ann"},
				Channels:  chs,
			})
			if err == nil {
				mu.Lock()
				ids = append(ids, a.NotificationID)
				deliveries += n
				mu.Unlock()
			}
			return err
		}
	})
	if err != nil {
		return nil, err
	}
	out := []Result{accept}
	want := before + deliveries
	deliver, err := s.drain(ctx, "notify-deliver", "", want, start)
	deliver.OK = deliveries
	deliver.Latency = s.deliveryLatency(ctx, sample(ids, notifySample))
	deliver.Note = fmt.Sprintf("deliveries/s since the first accept (%.2f per notification); latency: accept to sent, %d sampled",
		float64(deliveries)/float64(max(len(ids), 1)), min(len(ids), notifySample))
	return append(out, deliver), err
}

// notifyChannels returns the channels the seq-th notification names under
// mix, and how many deliveries it makes.
func notifyChannels(mix string, seq int64) ([]string, int64) {
	if mix != "seeds" {
		// Named, so the inapp channel (on by default) stays out and the
		// figure stays comparable with earlier runs.
		return []string{"email", "sms", "push"}, 3
	}
	if seq%4 == 3 {
		return []string{"email"}, 1
	}
	return []string{"email", "push"}, 2
}

// campaign sends Session.Campaign marketing notifications (flash_sale,
// email and push) in batches of 1,000 from 4 senders while one caller posts
// an OTP (sms) every 10 ms, and reports the campaign's accept and drain
// rates and the OTPs' accept-to-delivery latency during it.
func campaign(ctx context.Context, s *Session) ([]Result, error) {
	run := rand.Text()[:8]
	before, err := s.delivered(ctx, "marketing")
	if err != nil {
		return nil, err
	}
	otpCtx, stopOTP := context.WithCancel(ctx)
	defer stopOTP()
	var otpIDs []string
	otpErrs := 0
	var otpWG sync.WaitGroup
	otpWG.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; otpCtx.Err() == nil; i++ {
			select {
			case <-otpCtx.Done():
				return
			case <-tick.C:
			}
			a, err := s.c.Send(otpCtx, client.Notification{UserID: "bench-" + run + "-otp" + strconv.Itoa(i%100), Type: "otp",
				Data: map[string]any{"code": fmt.Sprintf("%06d", i)}, Channels: []string{"sms"}})
			switch {
			case err == nil:
				otpIDs = append(otpIDs, a.NotificationID)
			case otpCtx.Err() == nil:
				otpErrs++
			}
		}
	})

	start := time.Now()
	const batch = 1000
	batches := (s.Campaign + batch - 1) / batch
	accept, err := Run(ctx, "campaign-accept", targetSluice, Options{Workers: 4, Requests: int64(batches)}, func(int) Op {
		return func(ctx context.Context, seq int64) error {
			from := int(seq) * batch
			ns := make([]client.Notification, 0, batch)
			for i := from; i < min(from+batch, s.Campaign); i++ {
				ns = append(ns, client.Notification{RequestID: "bench-" + run + "-m" + strconv.Itoa(i),
					UserID: "bench-" + run + "-m" + strconv.Itoa(i), Type: "flash_sale",
					Data: map[string]any{"discount": "30%", "name": "Ann"}, Channels: []string{"email", "push"}})
			}
			res, err := s.c.SendBatch(ctx, ns)
			if err != nil {
				return err
			}
			for _, r := range res {
				if r.Status != "accepted" {
					return fmt.Errorf("batch item %s: %v", r.Status, r.Error)
				}
			}
			return nil
		}
	})
	if err != nil {
		return nil, err
	}
	accept.Note = fmt.Sprintf("%d notifications in batches of %d: %.0f/s", s.Campaign, batch, float64(s.Campaign)/accept.Elapsed.Seconds())
	out := []Result{accept}
	drain, err := s.drain(ctx, "campaign-deliver", "marketing", before+2*int64(s.Campaign), start)
	drain.OK = 2 * int64(s.Campaign)
	drain.Note = "email + push per user; deliveries/s since the first batch"
	out = append(out, drain)
	stopOTP()
	otpWG.Wait()
	if err != nil {
		return out, err
	}
	otp := Result{Scenario: "campaign-otp", Target: targetSluice, Workers: 1, OK: int64(len(otpIDs)),
		Errors: int64(otpErrs), Elapsed: time.Since(start), Latency: s.deliveryLatency(ctx, otpIDs)}
	otp.Note = fmt.Sprintf("an OTP (sms) at most every 10ms during the campaign; latency: accept to sent, %d delivered", otp.Latency.Count())
	return append(out, otp), nil
}

// drain waits until the server has sent want deliveries of category
// (every category when empty), and returns a row whose Elapsed runs from
// start, so its rate is deliveries per second.
func (s *Session) drain(ctx context.Context, scenario, category string, want int64, start time.Time) (Result, error) {
	res := Result{Scenario: scenario, Target: targetSluice, Workers: 0, Latency: &Histogram{}}
	deadline := time.Now().Add(s.DrainTimeout)
	for {
		got, err := s.delivered(ctx, category)
		if err != nil {
			return res, err
		}
		if got >= want {
			res.Elapsed = time.Since(start)
			return res, nil
		}
		if time.Now().After(deadline) {
			res.Elapsed = time.Since(start)
			return res, fmt.Errorf("%d deliveries of %d after --drain-timeout %v", got, want, s.DrainTimeout)
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(50 * time.Millisecond): // polling interval
		}
	}
}

// delivered sums sluice_notify_deliveries_total{status="sent"} of
// category (all when empty) on the server's /metrics.
func (s *Session) delivered(ctx context.Context, category string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Server+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, &StatusError{Status: resp.StatusCode}
	}
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "sluice_notify_deliveries_total{") && strings.Contains(line, `status="sent"`) &&
			(category == "" || strings.Contains(line, `category="`+category+`"`)) {
			f, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			sum += f
		}
	}
	return int64(sum), sc.Err()
}

// deliveryLatency reads the records of ids and returns a histogram of the
// time from each record's creation to each sent delivery's last update.
func (s *Session) deliveryLatency(ctx context.Context, ids []string) *Histogram {
	h := &Histogram{}
	for _, id := range ids {
		rec, err := s.c.Notification(ctx, id)
		if err != nil {
			continue
		}
		for _, d := range rec.Deliveries {
			if d.Status == "sent" || d.Status == "delivered" {
				h.Record(d.UpdatedAt.Sub(rec.CreatedAt))
			}
		}
	}
	return h
}

// sample returns up to n of ids, evenly spread.
func sample(ids []string, n int) []string {
	if len(ids) <= n {
		return ids
	}
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, ids[i*len(ids)/n])
	}
	return out
}
