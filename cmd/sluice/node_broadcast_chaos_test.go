package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the checker reads the notifications table

	"github.com/sluicehq/sluice/internal/enginetest"
)

// TestBroadcastSurvivesKill: a `sluice serve` on a private PostgreSQL and
// NATS sends a broadcast to a topic of 10,000 users, 100 a batch; it is
// killed with SIGKILL mid-broadcast, and a second node, started then,
// claims the broadcast once the first one's lease lapses and resumes at
// its checkpoint. The checker reads the notifications table: every member
// has exactly one notification with request_id bc:<broadcast id>:<user>,
// and no one else any.
func TestBroadcastSurvivesKill(t *testing.T) {
	enginetest.Faults(t)
	t.Parallel()
	pg, nats := enginetest.StartPostgres(t), enginetest.StartNATSCluster(t, 1)
	flags := []string{"--database-url", pg.URL(), "--nats-url", nats.URL(), "--broadcast-lease", "2s",
		"--broadcast-batch", "100", "--broadcast-tick", "50ms"}
	a := startOTPNode(t, t.TempDir(), flags)
	if a == nil {
		t.FailNow()
	}
	const users = 10_000
	for i := 0; i < users; i += 1000 {
		ids := make([]string, 1000)
		for j := range ids {
			ids[j] = fmt.Sprintf(`"m%05d"`, i+j)
		}
		if code, resp := a.do(t, "POST", "/v1/topics/flash/subscribers", `{"user_ids":[`+strings.Join(ids, ",")+`]}`); code != 200 {
			t.Fatalf("subscribe = %d %s", code, resp)
		}
	}
	code, resp := a.do(t, "POST", "/v1/broadcasts", `{"request_id":"chaos","type":"flash_sale","to":{"topic":"flash"},"data":{"discount":"40%"}}`)
	var acc struct {
		BroadcastID string `json:"broadcast_id"`
	}
	if code != 202 || json.Unmarshal(resp, &acc) != nil {
		t.Fatalf("POST /v1/broadcasts = %d %s", code, resp)
	}
	type progress struct {
		Status             string
		Targeted, Accepted int
	}
	read := func(n *otpNode) (progress, error) {
		var p progress
		code, resp, err := n.try("GET", "/v1/broadcasts/"+acc.BroadcastID, "")
		if err != nil || code != 200 {
			return p, fmt.Errorf("GET broadcast = %d %s %v", code, resp, err)
		}
		return p, json.Unmarshal(resp, &p)
	}
	var atKill progress
	enginetest.EventuallyNil(t, 60*time.Second, "the broadcast a fifth sent", func() error {
		p, err := read(a)
		if err != nil {
			return err
		}
		atKill = p
		return enginetest.State(p.Accepted >= users/5, "%d accepted", p.Accepted)
	})
	a.kill()
	if atKill.Status != "sending" || atKill.Accepted >= users {
		t.Fatalf("the broadcast was %s with %d accepted at the kill: the kill tested nothing", atKill.Status, atKill.Accepted)
	}
	b := startOTPNode(t, t.TempDir(), flags)
	if b == nil {
		t.FailNow()
	}
	var done progress
	enginetest.EventuallyNil(t, 180*time.Second, "the broadcast done on the second node", func() error {
		p, err := read(b)
		done = p
		if err != nil {
			return err
		}
		return enginetest.State(p.Status == "done", "%s, %d accepted", p.Status, p.Accepted)
	})

	db, err := sql.Open("pgx", pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows, distinct, members int
	err = db.QueryRowContext(t.Context(), `SELECT count(*), count(DISTINCT user_id),
		count(*) FILTER (WHERE request_id = 'bc:' || $1 || ':' || user_id AND user_id LIKE 'm%')
		FROM notifications WHERE request_id LIKE 'bc:' || $1 || ':%'`, acc.BroadcastID).Scan(&rows, &distinct, &members)
	if err != nil {
		t.Fatal(err)
	}
	if rows != users || distinct != users || members != users {
		t.Errorf("notifications of the broadcast: %d rows, %d users, %d with their own request id; want %d each (none lost, none twice)",
			rows, distinct, members, users)
	}
	if done.Targeted != users || done.Accepted != users {
		t.Errorf("broadcast counts: targeted %d, accepted %d; want %d each", done.Targeted, done.Accepted, users)
	}
	t.Logf("broadcast across a SIGKILL: %d members, %d accepted at the kill, %d notifications after, one each", users, atKill.Accepted, rows)
}
