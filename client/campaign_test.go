package client

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func TestReadCampaignCSV(t *testing.T) {
	t.Parallel()
	common := map[string]any{"discount": "20%"}
	tests := []struct {
		name    string
		csv     string
		want    []Notification
		wantErr string
	}{
		{
			name: "ids only",
			csv:  "u1\n u2 \n\n  \nu3\n",
			want: []Notification{
				{RequestID: "spring:u1", UserID: "u1", Type: "flash_sale", Data: map[string]any{"discount": "20%"}},
				{RequestID: "spring:u2", UserID: "u2", Type: "flash_sale", Data: map[string]any{"discount": "20%"}},
				{RequestID: "spring:u3", UserID: "u3", Type: "flash_sale", Data: map[string]any{"discount": "20%"}},
			},
		},
		{
			name: "one column with its user_id header",
			csv:  "user_id\nid\n",
			want: []Notification{{RequestID: "spring:id", UserID: "id", Type: "flash_sale", Data: map[string]any{"discount": "20%"}}},
		},
		{
			name: "header names the data, over the common data",
			csv:  "User_ID, name, discount\nu1,Ann,30%\nu2,Bob\n",
			want: []Notification{
				{RequestID: "spring:u1", UserID: "u1", Type: "flash_sale", Data: map[string]any{"discount": "30%", "name": "Ann"}},
				{RequestID: "spring:u2", UserID: "u2", Type: "flash_sale", Data: map[string]any{"discount": "20%", "name": "Bob"}},
			},
		},
		{
			name: "user_id in any column",
			csv:  "name,user_id\nAnn,u1\n",
			want: []Notification{{RequestID: "spring:u1", UserID: "u1", Type: "flash_sale", Data: map[string]any{"discount": "20%", "name": "Ann"}}},
		},
		{name: "two columns without user_id", csv: "id,name\nu1,Ann\n", wantErr: "line 1: no user_id"},
		{name: "a second column further down", csv: "u1\nu2\n\nu3,extra\n", wantErr: "line 4: no user_id"},
		{name: "a header look-alike", csv: "id\nu1\n", wantErr: `line 1: "id" looks like a header`},
		{name: "Users look-alike", csv: "\nUser ID\nu1\n", wantErr: `line 2: "User ID" looks like a header`},
		{name: "a row without a user", csv: "user_id,name\nu1,Ann\n,Bob\n", wantErr: "line 3: no user_id"},
		{name: "a row too short for its user", csv: "name,user_id\nAnn,u1\nBob\n", wantErr: "line 3: no user_id"},
		{name: "a row longer than the header", csv: "user_id,name\nu1,Ann,extra\n", wantErr: "line 2: 3 cells, but the header names 2 columns"},
		{name: "an unnamed column", csv: "user_id,,name\nu1,x,Ann\n", wantErr: "line 1: column 2 of the header has no name"},
		{name: "a column twice", csv: "user_id,name,Name\nu1,a,b\n", wantErr: `line 1: the header names column "Name" twice`},
		{name: "header only", csv: "user_id,name\n", wantErr: "no users"},
		{name: "empty", csv: "", wantErr: "no users"},
		{name: "bad quoting", csv: "u1\n\"u2\n", wantErr: "parse error on line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ReadCampaignCSV(strings.NewReader(tt.csv), "flash_sale", "spring", common)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("ReadCampaignCSV(%q) = %v, want an error starting %q", tt.csv, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ReadCampaignCSV(%q) = %+v, want %+v", tt.csv, got, tt.want)
			}
		})
	}
	if common["discount"] != "20%" || len(common) != 1 {
		t.Errorf("ReadCampaignCSV changed the common data: %v", common)
	}
}

func FuzzReadCampaignCSV(f *testing.F) {
	f.Add("user_id,name\nu1,Ann\n")
	f.Add("u1\nu2,x,y\n\"u3\"\n")
	f.Fuzz(func(t *testing.T, in string) {
		ns, err := ReadCampaignCSV(strings.NewReader(in), "t", "c", nil)
		if err == nil && len(ns) == 0 {
			t.Errorf("ReadCampaignCSV(%q) = no users and no error", in)
		}
		for _, n := range ns {
			if n.UserID == "" || n.RequestID != "c:"+n.UserID {
				t.Errorf("ReadCampaignCSV(%q): notification %+v", in, n)
			}
		}
		if err != nil || len(ns) == 0 {
			return
		}
		// Nothing is dropped: every cell of a file it accepts is a user id,
		// a header cell or a value in some notification's data.
		want := 0
		for _, n := range ns {
			want += 1 + len(n.Data)
		}
		if cells, header := countCells(in); cells != want && cells != want+header {
			t.Errorf("ReadCampaignCSV(%q) kept %d values of %d cells", in, want, cells)
		}
	})
}

// countCells counts the cells of a CSV file's non-blank records, and
// those of the first one.
func countCells(in string) (cells, first int) {
	cr := csv.NewReader(strings.NewReader(in))
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	n := 0
	for {
		rec, err := cr.Read()
		if err != nil {
			return n, first
		}
		blank := true
		for _, c := range rec {
			blank = blank && strings.TrimSpace(c) == ""
		}
		if !blank && first == 0 {
			first = len(rec)
		}
		if !blank {
			n += len(rec)
		}
	}
}

// batchServer answers POST /v1/notifications/batch: items whose user id
// starts with "dup" are duplicates, "bad" refused, the rest accepted. A
// batch containing user "fail" gets a 500. It records the batch sizes.
type batchServer struct {
	mu    sync.Mutex
	sizes []int
}

func (s *batchServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Notifications []Notification `json:"notifications"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || r.URL.Path != "/v1/notifications/batch" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.sizes = append(s.sizes, len(in.Notifications))
	s.mu.Unlock()
	var out struct {
		Results []map[string]any `json:"results"`
	}
	for i, n := range in.Notifications {
		switch {
		case n.UserID == "fail":
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		case strings.HasPrefix(n.UserID, "dup"):
			out.Results = append(out.Results, map[string]any{"notification_id": fmt.Sprint("ntf_", i), "status": "duplicate"})
		case strings.HasPrefix(n.UserID, "bad"):
			out.Results = append(out.Results, map[string]any{"status": "refused",
				"error": map[string]any{"status": 422, "title": "Unprocessable Entity", "detail": "no contact for " + n.UserID}})
		default:
			out.Results = append(out.Results, map[string]any{"notification_id": fmt.Sprint("ntf_", i), "status": "accepted"})
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func users(ids ...string) []Notification {
	ns := make([]Notification, len(ids))
	for i, id := range ids {
		ns[i] = Notification{RequestID: "c:" + id, UserID: id, Type: "flash_sale"}
	}
	return ns
}

func TestSendCampaign(t *testing.T) {
	t.Parallel()
	var ids []string
	for i := range 10 {
		ids = append(ids, fmt.Sprint("u", i))
	}
	for i := range 7 {
		ids = append(ids, fmt.Sprint("bad", i))
	}
	ids = append(ids, "dup1", "dup2")
	srv := httptest.NewServer(&batchServer{})
	defer srv.Close()
	c := New(srv.URL, "")
	var mu sync.Mutex
	var progress []int
	res, err := c.SendCampaign(t.Context(), users(ids...), CampaignOptions{Batch: 4, Workers: 3, Progress: func(n int) {
		mu.Lock()
		progress = append(progress, n)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Done != 19 || res.Accepted != 10 || res.Refused != 7 || res.Duplicates != 2 || len(res.Refusals) != 5 {
		t.Errorf("SendCampaign = %+v, want 19 done: 10 accepted, 7 refused (5 reasons kept), 2 duplicates", res)
	}
	if len(res.Refusals) > 0 && !strings.Contains(res.Refusals[0].Error(), "no contact for bad") {
		t.Errorf("first refusal %v, want the server's reason", res.Refusals[0])
	}
	if len(progress) != 5 || progress[len(progress)-1] != 19 {
		t.Errorf("progress %v, want 5 reports ending at 19", progress)
	}
	for i := 1; i < len(progress); i++ {
		if progress[i] < progress[i-1] {
			t.Errorf("progress %v decreased", progress)
		}
	}
}

func TestSendCampaignStopsAtAFailedRequest(t *testing.T) {
	t.Parallel()
	bs := &batchServer{}
	srv := httptest.NewServer(bs)
	defer srv.Close()
	ns := users("u1", "u2", "fail", "u3", "u4", "u5", "u6")
	res, err := New(srv.URL, "").SendCampaign(t.Context(), ns, CampaignOptions{Batch: 2, Workers: 1})
	if !IsStatus(err, http.StatusInternalServerError) {
		t.Fatalf("SendCampaign = %v, want the 500", err)
	}
	if res.Done != 2 || res.Accepted != 2 {
		t.Errorf("SendCampaign = %+v, want the first batch's 2 accepted only", res)
	}
	if len(bs.sizes) != 2 {
		t.Errorf("server saw batches %v, want the campaign to stop after the failed second", bs.sizes)
	}
}

func TestSendCampaignOptions(t *testing.T) {
	t.Parallel()
	bs := &batchServer{}
	srv := httptest.NewServer(bs)
	defer srv.Close()
	c := New(srv.URL, "")
	ids := make([]string, 1200)
	for i := range ids {
		ids[i] = fmt.Sprint("u", i)
	}
	res, err := c.SendCampaign(t.Context(), users(ids...), CampaignOptions{})
	if err != nil || res.Done != 1200 || res.Accepted != 1200 {
		t.Fatalf("SendCampaign with zero options = %+v, %v; want 1200 accepted", res, err)
	}
	if len(bs.sizes) != 3 || max(bs.sizes[0], bs.sizes[1], bs.sizes[2]) != 500 {
		t.Errorf("batch sizes %v, want the default 500, 500, 200", bs.sizes)
	}
	for _, o := range []CampaignOptions{{Batch: 1001}, {Batch: -1}, {Workers: -1}} {
		if _, err := c.SendCampaign(t.Context(), users("u1"), o); err == nil {
			t.Errorf("SendCampaign(%+v) = nil error, want the options refused", o)
		}
	}
}
