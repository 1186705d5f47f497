package client

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestStatsTotalsHaveNoStart: totals span the whole range, so their JSON
// (as `sluice links stats` prints it) carries no zero "start".
func TestStatsTotalsHaveNoStart(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(LinkStats{Totals: StatsBucket{Humans: 2}, Series: []StatsBucket{{Start: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Humans: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.Contains(s, `"totals":{"humans":2,`) || !strings.Contains(s, `"series":[{"start":"2026-12-01T00:00:00Z"`) {
		t.Errorf("stats JSON %s, want a start on the series bucket only", s)
	}
}
