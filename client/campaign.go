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

// ReadCampaignCSV reads a campaign's users from CSV, and refuses the whole
// file, naming the line, before anything is sent when it is not one of
// these two shapes:
//
//   - One column: a user id per line. A first line user_id is a header
//     and skipped. A first line that only looks like a header (id, user,
//     userid, uid, username...) is refused, since sending to a user
//     called "id" is never what was meant; put a user_id line above it
//     to send to such a user.
//   - More columns: the first line is a header that names a user_id
//     column (in any position). Every other column becomes template data
//     of that row's notification, named by its header cell, over data,
//     which every notification gets. A row with an empty user_id, or with
//     more cells than the header, is refused; a shorter row leaves the
//     missing columns to data.
//
// Header cells are matched without regard to case or surrounding spaces;
// blank lines are skipped. Each notification is of type typ with request
// id "<campaign>:<user>", so sending the same campaign again sends nothing
// twice. A file with no users is an error.
func ReadCampaignCSV(r io.Reader, typ, campaign string, data map[string]any) ([]Notification, error) {
	rows, err := readRows(r)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, errors.New("no users")
	}
	var users []campaignUser
	if col := userIDColumn(rows[0].cells); col >= 0 {
		users, err = headedUsers(rows, col)
	} else {
		users, err = userIDList(rows)
	}
	if err != nil {
		return nil, err
	}
	if len(users) == 0 {
		return nil, errors.New("no users")
	}
	ns := make([]Notification, len(users))
	for i, u := range users {
		d := make(map[string]any, len(data)+len(u.data))
		maps.Copy(d, data)
		maps.Copy(d, u.data)
		ns[i] = Notification{RequestID: campaign + ":" + u.id, UserID: u.id, Type: typ, Data: d}
	}
	return ns, nil
}

// csvRow is one non-blank record of a users file, with its line number.
type csvRow struct {
	line  int
	cells []string
}

// campaignUser is one user of a campaign and the data of their row.
type campaignUser struct {
	id   string
	data map[string]any
}

// readRows reads every record that has a non-blank cell, cells trimmed.
func readRows(r io.Reader) ([]csvRow, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	var rows []csvRow
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		blank := true
		for i := range rec {
			rec[i] = strings.TrimSpace(rec[i])
			blank = blank && rec[i] == ""
		}
		if !blank {
			rows = append(rows, csvRow{line: line, cells: rec})
		}
	}
}

// userIDColumn returns the index of the header cell user_id, or -1.
func userIDColumn(header []string) int {
	for i, c := range header {
		if strings.EqualFold(c, "user_id") {
			return i
		}
	}
	return -1
}

// headedUsers reads the rows after the header rows[0], whose column col
// is user_id.
func headedUsers(rows []csvRow, col int) ([]campaignUser, error) {
	header := rows[0].cells
	seen := make(map[string]bool, len(header))
	for i, name := range header {
		switch key := strings.ToLower(name); {
		case name == "":
			return nil, fmt.Errorf("line %d: column %d of the header has no name", rows[0].line, i+1)
		case seen[key]:
			return nil, fmt.Errorf("line %d: the header names column %q twice", rows[0].line, name)
		default:
			seen[key] = true
		}
	}
	users := make([]campaignUser, 0, len(rows)-1)
	for _, row := range rows[1:] {
		if len(row.cells) > len(header) {
			return nil, fmt.Errorf("line %d: %d cells, but the header names %d columns", row.line, len(row.cells), len(header))
		}
		if col >= len(row.cells) || row.cells[col] == "" {
			return nil, fmt.Errorf("line %d: no user_id", row.line)
		}
		u := campaignUser{id: row.cells[col], data: make(map[string]any, len(row.cells)-1)}
		for i, v := range row.cells {
			if i != col {
				u.data[header[i]] = v
			}
		}
		users = append(users, u)
	}
	return users, nil
}

// userIDList reads a one-column file of user ids with no user_id header.
func userIDList(rows []csvRow) ([]campaignUser, error) {
	if first := rows[0]; len(first.cells) == 1 && looksLikeHeader(first.cells[0]) {
		return nil, fmt.Errorf("line %d: %q looks like a header: name the column user_id (if %q is a user, put a line user_id above it)",
			first.line, first.cells[0], first.cells[0])
	}
	users := make([]campaignUser, 0, len(rows))
	for _, row := range rows {
		if len(row.cells) > 1 {
			return nil, fmt.Errorf("line %d: no user_id: a file with more than one column needs a header line naming user_id", row.line)
		}
		users = append(users, campaignUser{id: row.cells[0]})
	}
	return users, nil
}

// looksLikeHeader reports whether the first cell of a headerless file is
// more likely a column name than a user id.
func looksLikeHeader(cell string) bool {
	key := strings.NewReplacer("_", "", "-", "", " ", "").Replace(strings.ToLower(cell))
	switch key {
	case "id", "ids", "uid", "user", "users", "userid", "userids", "username", "customer", "customerid", "recipient":
		return true
	}
	return false
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
