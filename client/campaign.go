package client

import (
	"cmp"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
)

// ReadCampaignCSV reads a campaign's users from CSV: a user id per row, in
// the first column. When the first row's first cell is user_id, that row is
// a header and the other columns of each row become template data named by
// it, over data, which every notification gets. Rows with an empty first
// cell are skipped. Each notification is of type typ with request id
// "<campaign>:<user>", so sending the same campaign again sends nothing
// twice. A CSV with no users is an error.
func ReadCampaignCSV(r io.Reader, typ, campaign string, data map[string]any) ([]Notification, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	var header []string
	var ns []Notification
	for line := 1; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("users csv: %w", err)
		}
		if len(rec) == 0 || strings.TrimSpace(rec[0]) == "" {
			continue
		}
		if line == 1 && strings.EqualFold(strings.TrimSpace(rec[0]), "user_id") {
			header = rec
			continue
		}
		user := strings.TrimSpace(rec[0])
		d := make(map[string]any, len(data)+len(rec))
		maps.Copy(d, data)
		for i := 1; i < len(rec) && i < len(header); i++ {
			d[strings.TrimSpace(header[i])] = rec[i]
		}
		ns = append(ns, Notification{RequestID: campaign + ":" + user, UserID: user, Type: typ, Data: d})
	}
	if len(ns) == 0 {
		return nil, errors.New("users csv: no users")
	}
	return ns, nil
}

// CampaignOptions tune SendCampaign. The zero value sends 500
// notifications per request, 4 requests at a time, without progress
// reports.
type CampaignOptions struct {
	// Batch is how many notifications each request carries, 1 to 1000.
	// If zero, 500.
	Batch int
	// Workers is how many requests are in flight at once. If zero, 4.
	Workers int
	// Progress, if not nil, is called after each answered request with the
	// number of notifications answered so far. Calls are serialized and
	// the number never decreases.
	Progress func(done int)
}

// maxRefusals is how many refusals a CampaignResult keeps.
const maxRefusals = 5

// CampaignResult counts what the server answered to a campaign.
type CampaignResult struct {
	// Done is how many notifications were in answered requests; it is less
	// than the number given when a request failed.
	Done int
	// Accepted, Duplicates and Refused split Done by the server's answer:
	// a duplicate's request id was seen before, so nothing new was sent.
	Accepted, Duplicates, Refused int
	// Refusals says why the first few (up to 5) refused items were
	// refused.
	Refusals []*Error
}

// SendCampaign sends ns with SendBatch, in batches of o.Batch from
// o.Workers goroutines. Items the server refuses are counted in the
// result, not returned as errors; the first request that fails (or ctx
// ending) stops the campaign and is returned, with the counts of the
// requests answered until then.
func (c *Client) SendCampaign(ctx context.Context, ns []Notification, o CampaignOptions) (CampaignResult, error) {
	batch, workers := cmp.Or(o.Batch, 500), cmp.Or(o.Workers, 4)
	if batch < 1 || batch > 1000 || workers < 1 {
		return CampaignResult{}, fmt.Errorf("campaign: batch %d and workers %d: want a batch of 1 to 1000 and at least 1 worker", batch, workers)
	}
	var (
		mu  sync.Mutex // guards res and serializes o.Progress
		res CampaignResult
	)
	batches := make(chan []Notification)
	errc := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for b := range batches {
				items, err := c.SendBatch(ctx, b)
				if err != nil {
					errc <- err
					return
				}
				mu.Lock()
				res.count(items)
				res.Done += len(b)
				if o.Progress != nil {
					o.Progress(res.Done)
				}
				mu.Unlock()
			}
		})
	}
	var err error
feed:
	for i := 0; i < len(ns); i += batch {
		select {
		case batches <- ns[i:min(i+batch, len(ns))]:
		case err = <-errc:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(batches)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errc:
		default:
		}
	}
	return res, err
}

// count adds one answered batch's items.
func (r *CampaignResult) count(items []BatchResult) {
	for _, it := range items {
		switch it.Status {
		case "accepted":
			r.Accepted++
		case "duplicate":
			r.Duplicates++
		default:
			r.Refused++
			if len(r.Refusals) < maxRefusals && it.Error != nil {
				r.Refusals = append(r.Refusals, it.Error)
			}
		}
	}
}
