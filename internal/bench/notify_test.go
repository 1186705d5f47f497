package bench

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// notifyServer stands in for Sluice's notification API: it accepts POST
// /v1/notifications and at once counts a sent delivery per channel (email,
// sms and push when none are named), which GET /metrics reports as
// sluice_notify_deliveries_total, as a server does once its workers have
// sent them.
type notifyServer struct {
	mu   sync.Mutex
	sent map[string]int // channel: sent deliveries
	n    int
}

func startNotifyServer(t *testing.T) *httptest.Server {
	t.Helper()
	ns := &notifyServer{sent: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/notifications", func(w http.ResponseWriter, r *http.Request) {
		var n struct {
			Channels []string `json:"channels"`
		}
		if err := json.NewDecoder(r.Body).Decode(&n); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		chs := n.Channels
		if len(chs) == 0 {
			chs = []string{"email", "sms", "push"}
		}
		ns.mu.Lock()
		ns.n++
		id := ns.n
		for _, ch := range chs {
			ns.sent[ch]++
		}
		ns.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, `{"notification_id":"ntf_%d","status":"accepted"}`, id)
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		ns.mu.Lock()
		defer ns.mu.Unlock()
		for _, ch := range []string{"email", "sms", "push"} {
			fmt.Fprintf(w, "sluice_notify_deliveries_total{category=\"orders\",channel=%q,status=\"sent\"} %d\n", ch, ns.sent[ch])
			fmt.Fprintf(w, "sluice_notify_deliveries_total{category=\"orders\",channel=%q,status=\"failed\"} 5\n", ch)
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestNotifyMixDrain: with NotifyMix seeds, three notifications in four
// go to email and push and one to email only: 40 requests make 70
// deliveries, and the drain waits for exactly those.
func TestNotifyMixDrain(t *testing.T) {
	t.Parallel()
	srv := startNotifyServer(t)
	s := &Session{Options: Options{Workers: 4, Requests: 40}, Server: srv.URL, NotifyMix: "seeds", DrainTimeout: 30 * time.Second}
	scenarios, err := PickScenarios([]string{"notify"})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := s.Run(t.Context(), &out, scenarios); err != nil {
		t.Fatalf("Run = %v\n%s", err, out.String())
	}
	ok := map[string]string{}
	for _, row := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
		if f := strings.Fields(row); len(f) > 3 {
			ok[f[0]] = f[3]
		}
	}
	if ok["notify-accept"] != "40" || ok["notify-deliver"] != "70" {
		t.Errorf("OK counts %v, want notify-accept 40 and notify-deliver 70\n%s", ok, out.String())
	}
}

func TestNotifyChannels(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		mix        string
		seq        int64
		want       []string
		deliveries int64
	}{
		{"all names email, sms and push", "all", 3, []string{"email", "sms", "push"}, 3},
		{"seeds, email and push", "seeds", 0, []string{"email", "push"}, 2},
		{"seeds, fourth email only", "seeds", 3, []string{"email"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, n := notifyChannels(tt.mix, tt.seq)
			if !slices.Equal(got, tt.want) || n != tt.deliveries {
				t.Errorf("notifyChannels(%q, %d) = %v, %d, want %v, %d", tt.mix, tt.seq, got, n, tt.want, tt.deliveries)
			}
		})
	}
}
