package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/panics"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/workflow"
)

// wfBounds is a server with the workflow engine on a store, with the
// caps mod sets, its scheduler running until the test ends, and every
// panic (of a handler, or of a run's advance) counted.
type wfBounds struct {
	*bundle
	svc    *workflow.Service
	panics atomic.Int32
}

func setupWorkflowBounds(t testing.TB, db *store.DB, mod func(*workflow.Options)) *wfBounds {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	b := &wfBounds{bundle: &bundle{t: t, db: db}}
	rep := &panics.Reporter{Logger: log, Count: func(string) { b.panics.Add(1) }}
	ns := notify.NewService(notify.Options{Store: db, Queue: discardQueue{}, Logger: log})
	o := workflow.Options{Store: db, Sender: ns, Templates: ns, Profiles: profiles{ns, db}, Logger: log,
		Tick: 20 * time.Millisecond, Attributes: db, Panics: rep}
	if mod != nil {
		mod(&o)
	}
	b.svc = workflow.New(o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = b.svc.RunScheduler(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the workflow scheduler did not stop within 30s")
		}
	})
	b.srv = New(Options{Logger: log, Keys: db, Notify: ns, Workflows: b.svc, Attributes: b.svc, Panics: rep})
	return b
}

// sqliteStore opens a migrated SQLite store in a temporary directory.
func sqliteStore(t testing.TB) *store.DB {
	t.Helper()
	return setup(t).db
}

// postgresStore opens a migrated store in a schema of its own (skipped
// without SLUICE_TEST_POSTGRES_URL).
func postgresStore(t testing.TB) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), store.Options{URL: enginetest.PostgresSchema(t, enginetest.PostgresURL(t)),
		MaxOpenConns: 8, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db
}

// answer makes one request and returns its status and body.
func (b *wfBounds) answer(key, method, path, body string) (int, string) {
	resp := b.do(call{method: method, path: path, body: body, key: key})
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// want checks an answer's status and, for a problem, that it is
// problem+json whose text holds each of names (a setting, a field).
func (b *wfBounds) want(t *testing.T, key, method, path, body string, status int, names ...string) string {
	t.Helper()
	code, out := b.answer(key, method, path, body)
	if code != status {
		t.Fatalf("%s %s = %d %.300s, want %d", method, path, code, out, status)
	}
	if status >= 400 {
		var p Problem
		if err := json.Unmarshal([]byte(out), &p); err != nil || p.Status != status {
			t.Fatalf("%s %s = %d %.300s: not problem+json of that status", method, path, code, out)
		}
	}
	for _, n := range names {
		if !strings.Contains(out, n) {
			t.Errorf("%s %s = %d %.300s, want it to name %s", method, path, code, out, n)
		}
	}
	return out
}

// stillServes checks the node answers after what a test threw at it, and
// counted no panic.
func (b *wfBounds) stillServes(t *testing.T, key string) {
	t.Helper()
	b.want(t, key, "GET", "/v1/workflows", "", http.StatusOK)
	b.want(t, "", "GET", "/healthz", "", http.StatusOK)
	if n := b.panics.Load(); n != 0 {
		t.Errorf("%d panics recovered", n)
	}
}

// waitsFor is a workflow started by trigger whose runs wait for an event
// that never comes: live until canceled.
func waitsFor(trigger string) string {
	return `{"trigger":{"event":"` + trigger + `"},"steps":[{"wait_for":{"event":"never"}}]}`
}

func eventBody(name, user, data string) string {
	return `{"name":"` + name + `","user_id":"` + user + `","data":` + data + `}`
}

// TestWorkflowCapsFill fills each table a client fills through the API
// with its cap set small: the workflows, the live runs (per user and per
// node), the users with attributes. Past each the answer is 429
// problem+json naming the setting (or, per user, nothing started), the
// table does not grow, room made is taken again, and the node serves on.
func TestWorkflowCapsFill(t *testing.T) {
	t.Parallel()
	b := setupWorkflowBounds(t, sqliteStore(t), func(o *workflow.Options) {
		o.MaxWorkflows, o.MaxLiveRuns, o.MaxLiveRunsPerUser, o.MaxAttributeUsers = 3, 5, 2, 3
	})
	admin, sender := b.addKey(t, auth.ScopeAdmin), b.addKey(t, auth.ScopeNotifySend)

	// Workflows: 3, then 429; a new version of one is no new workflow.
	for _, k := range []string{"w1", "w2", "w3"} {
		b.want(t, admin, "PUT", "/v1/workflows/"+k, waitsFor("start."+k), http.StatusCreated)
	}
	b.want(t, admin, "PUT", "/v1/workflows/w4", waitsFor("start.w4"), http.StatusTooManyRequests, "notify.workflows.max_workflows")
	b.want(t, admin, "PUT", "/v1/workflows/w1", waitsFor("start.w1b"), http.StatusOK)
	b.want(t, admin, "PUT", "/v1/workflows/w1", waitsFor("start.w1"), http.StatusOK)
	b.want(t, admin, "DELETE", "/v1/workflows/w3", "", http.StatusOK)
	b.want(t, admin, "PUT", "/v1/workflows/w4", waitsFor("start.w4"), http.StatusCreated)
	b.want(t, admin, "PUT", "/v1/workflows/w5", waitsFor("start.w5"), http.StatusTooManyRequests, "notify.workflows.max_workflows")
	var list struct{ Items []json.RawMessage }
	b.call(t, admin, "GET", "/v1/workflows", "", http.StatusOK, &list)
	if len(list.Items) != 3 {
		t.Errorf("%d workflows stored, want 3", len(list.Items))
	}

	// Live runs per user: a third start for u1 starts nothing.
	started := func(name, user string) int {
		t.Helper()
		var a eventAnswer
		b.call(t, sender, "POST", "/v1/events", eventBody(name, user, `{}`), http.StatusAccepted, &a)
		return len(a.RunsStarted)
	}
	if started("start.w1", "u1")+started("start.w2", "u1") != 2 || started("start.w4", "u1") != 0 {
		t.Fatal("u1's runs past workflow-max-live-runs-per-user started")
	}
	// Live runs per node: 5, then 429; an event that starts none is taken.
	for _, u := range []string{"u2", "u3", "u4"} {
		if started("start.w1", u) != 1 {
			t.Fatalf("%s's run did not start", u)
		}
	}
	b.want(t, sender, "POST", "/v1/events", eventBody("start.w1", "u5", `{}`), http.StatusTooManyRequests, "notify.workflows.max_live_runs")
	if started("page.viewed", "u5") != 0 {
		t.Fatal("an event without workflows started a run")
	}
	out := b.want(t, sender, "POST", "/v1/events/batch", `{"events":[`+eventBody("start.w2", "u5", `{}`)+`,`+
		eventBody("page.viewed", "u5", `{}`)+`]}`, http.StatusOK)
	var batch struct {
		Results []struct {
			Status string
			Error  *Problem
		}
		Accepted, Refused int
	}
	if err := json.Unmarshal([]byte(out), &batch); err != nil || batch.Accepted != 1 || batch.Refused != 1 ||
		batch.Results[0].Error == nil || batch.Results[0].Error.Status != http.StatusTooManyRequests ||
		!strings.Contains(batch.Results[0].Error.Detail, "notify.workflows.max_live_runs") {
		t.Fatalf("batch at the cap = %s; want the start refused with 429 naming the setting, the other accepted", out)
	}
	var canceled struct{ Canceled []string }
	b.call(t, sender, "POST", "/v1/workflows/w1/cancel", `{"user_id":"u2"}`, http.StatusOK, &canceled)
	if len(canceled.Canceled) != 1 || started("start.w1", "u5") != 1 {
		t.Fatalf("a run canceled (%v) did not make room for one", canceled.Canceled)
	}
	b.want(t, sender, "POST", "/v1/events", eventBody("start.w1", "u6", `{}`), http.StatusTooManyRequests, "notify.workflows.max_live_runs")

	// Users with attributes: 3, then 429; replacing is always taken; {}
	// deletes the row and makes room.
	for _, u := range []string{"a1", "a2", "a3"} {
		b.want(t, sender, "PUT", "/v1/users/"+u+"/attributes", `{"plan":"free"}`, http.StatusOK)
	}
	b.want(t, sender, "PUT", "/v1/users/a4/attributes", `{"plan":"free"}`, http.StatusTooManyRequests, "notify.workflows.max_attribute_users")
	b.want(t, sender, "PUT", "/v1/users/a1/attributes", `{"plan":"pro"}`, http.StatusOK)
	b.want(t, sender, "PUT", "/v1/users/a2/attributes", `{}`, http.StatusOK)
	if got := b.want(t, admin, "GET", "/v1/users/a2/attributes", "", http.StatusOK); strings.TrimSpace(got) != `{}` {
		t.Errorf("attributes after {} = %s", got)
	}
	b.want(t, sender, "PUT", "/v1/users/a4/attributes", `{"plan":"free"}`, http.StatusOK)
	b.want(t, sender, "PUT", "/v1/users/a5/attributes", `{"plan":"free"}`, http.StatusTooManyRequests, "notify.workflows.max_attribute_users")
	if n, err := b.db.CountUserAttributes(t.Context()); err != nil || n != 3 {
		t.Errorf("%d users with attributes stored (%v), want 3", n, err)
	}
	b.stillServes(t, admin)
}

// TestWorkflowHostileInput throws malformed and oversized input at the
// event, workflow and attribute routes, on both engines: each gets a
// clear 4xx naming what is wrong, never a 500, and the node serves on.
func TestWorkflowHostileInput(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		hostileInput(t, setupWorkflowBounds(t, sqliteStore(t), nil))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		hostileInput(t, setupWorkflowBounds(t, postgresStore(t), nil))
	})
}

func hostileInput(t *testing.T, b *wfBounds) {
	admin := b.addKey(t, auth.ScopeAdmin)
	nest := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	big := `{"pad":"` + strings.Repeat("x", workflow.MaxEventDataBytes) + `"}`
	for _, tt := range []struct {
		name, method, path, body string
		status                   int
		field                    string
	}{
		{"data not UTF-8", "POST", "/v1/events", eventBody("e", "u1", "{\"k\":\"\xff\xfe\"}"), 422, `"data"`},
		{"data nested too deep", "POST", "/v1/events", eventBody("e", "u1", nest(workflow.MaxDataDepth+1)), 422, `"data"`},
		{"data nested past the decoder", "POST", "/v1/events", eventBody("e", "u1", nest(20_000)), 400, "depth"},
		{"data too large", "POST", "/v1/events", eventBody("e", "u1", big), 422, `"data"`},
		{"name with a control character", "POST", "/v1/events", eventBody("a\\u0001b", "u1", `{}`), 422, `"name"`},
		{"name with a newline", "POST", "/v1/events", eventBody("a\\nb", "u1", `{}`), 422, `"name"`},
		{"name too long", "POST", "/v1/events", eventBody(strings.Repeat("n", 129), "u1", `{}`), 422, `"name"`},
		{"user with a control character", "POST", "/v1/events", eventBody("e", "u\\u0000", `{}`), 422, `"user_id"`},
		{"request_id with a raw newline", "POST", "/v1/events", "{\"name\":\"e\",\"user_id\":\"u1\",\"request_id\":\"r\n1\"}", 400, "JSON"},
		{"request_id with an escaped newline", "POST", "/v1/events", `{"name":"e","user_id":"u1","request_id":"r\u000a1"}`, 422, `"request_id"`},
		{"data not an object", "POST", "/v1/events", eventBody("e", "u1", `[1]`), 422, `"data"`},
		{"a batch of 1,001", "POST", "/v1/events/batch", `{"events":[` + strings.Repeat(eventBody("e", "u1", `{}`)+",", 1000) +
			eventBody("e", "u1", `{}`) + `]}`, 422, `"events"`},
		{"a batch of 1,000 events of 32 KiB", "POST", "/v1/events/batch", `{"events":[` + strings.Repeat(eventBody("e", "u1", big[:32<<10-4]+`"}`)+",", 999) +
			eventBody("e", "u1", `{}`) + `]}`, 413, "payload-too-large"},
		{"attributes not UTF-8", "PUT", "/v1/users/u1/attributes", "{\"k\":\"\xff\"}", 422, "UTF-8"},
		{"attributes nested too deep", "PUT", "/v1/users/u1/attributes", nest(workflow.MaxDataDepth + 1), 422, "deep"},
		{"attributes too large", "PUT", "/v1/users/u1/attributes", `{"k":"` + strings.Repeat("x", MaxAttributeBytes) + `"}`, 422, "bytes"},
		{"attributes of a user with a control character", "PUT", "/v1/users/u%01/attributes", `{}`, 400, `"id"`},
		{"definition not UTF-8", "PUT", "/v1/workflows/w", "{\"trigger\":{\"event\":\"e\"},\"steps\":[{\"wait_for\":{\"event\":\"\xff\"}}]}", 422, `"definition"`},
		{"definition past 64 KiB", "PUT", "/v1/workflows/w", `{"trigger":{"event":"e"},"steps":[{"send":"otp"}],"key":"` +
			strings.Repeat("k", workflow.MaxDefinitionBytes) + `"}`, 422, `"definition"`},
		{"definition past the body limit", "PUT", "/v1/workflows/w", `{"key":"` + strings.Repeat("k", 1<<20) + `"}`, 413, "payload-too-large"},
		{"in with 101 values", "PUT", "/v1/workflows/w", `{"trigger":{"event":"e"},"steps":[{"branch":[{"if":{"k":{"in":[` +
			strings.Repeat("1,", 100) + `1]}},"goto":"x"}]},{"name":"x","exit":true}]}`, 422, "steps[0].branch[0]"},
		{"a garbage cursor", "GET", "/v1/workflows/w/runs?cursor=%00%ff", "", 400, `"cursor"`},
		{"a cursor of base64 garbage", "GET", "/v1/users/u1/workflow-runs?cursor=Z2FyYmFnZQ", "", 400, `"cursor"`},
		{"an unknown status", "GET", "/v1/workflows/w/runs?status=%00", "", 400, `"status"`},
		{"a huge limit", "GET", "/v1/workflows/w/runs?limit=99999999999999999999", "", 400, `"limit"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b.want(t, admin, tt.method, tt.path, tt.body, tt.status, tt.field)
		})
	}
	b.stillServes(t, admin)
}

// TestWorkflowHostileData: what a definition and events may hold that
// looks dangerous is taken and behaves as documented: keys with escaped
// control characters are kept as sent; a match placeholder naming a key
// the run's data lacks matches only an empty value; a branch with `in`
// on a huge array in the data takes no path.
func TestWorkflowHostileData(t *testing.T) {
	t.Parallel()
	b := setupWorkflowBounds(t, postgresStore(t), nil)
	admin := b.addKey(t, auth.ScopeAdmin)
	b.want(t, admin, "PUT", "/v1/workflows/m", `{"trigger":{"event":"start"},"steps":[
		{"name":"huge","branch":[{"if":{"list":{"in":[`+strings.Repeat(`"x",`, 99)+`"x"]}},"goto":"end"}]},
		{"wait_for":{"event":"go","match":{"cart_id":"{missing}","k\u0000":"{k\u0000}"}}},
		{"name":"end","exit":true}]}`, http.StatusCreated)
	list := `[` + strings.Repeat(`"x",`, 5000) + `"x"]`
	var a eventAnswer
	b.call(t, admin, "POST", "/v1/events", eventBody("start", "u1", `{"k\u0000":"v\u001b","list":`+list+`}`), http.StatusAccepted, &a)
	if len(a.RunsStarted) != 1 {
		t.Fatalf("start = %+v, want one run", a)
	}
	id := a.RunsStarted[0]
	run := b.waitRun(t, admin, id, "waiting")
	if !strings.Contains(string(run.Data), `"k\u0000":"v\u001b"`) {
		t.Errorf("run data %.200s, want the key and value kept as sent", run.Data)
	}
	for _, data := range []string{`{"cart_id":"c1","k\u0000":"v\u001b"}`, `{"k\u0000":"v\u001b"}`, `{"cart_id":""}`} {
		b.call(t, admin, "POST", "/v1/events", eventBody("go", "u1", data), http.StatusAccepted, &a)
		if len(a.RunsResumed) != 0 {
			t.Fatalf("go %s resumed the run", data)
		}
	}
	b.call(t, admin, "POST", "/v1/events", eventBody("go", "u1", `{"cart_id":"","k\u0000":"v\u001b"}`), http.StatusAccepted, &a)
	if len(a.RunsResumed) != 1 {
		t.Fatalf("the event holding both values = %+v, want the run resumed", a)
	}
	run = b.waitRun(t, admin, id, "completed")
	if got := run.Steps[0].Outcome; got != "no path held" {
		t.Errorf("the branch on the huge array: %q, want no path held", got)
	}
	b.stillServes(t, admin)
}

// TestRunsListClientHangsUp: a client that reads a little of a large
// page of runs and hangs up costs the node nothing: no panic, and the
// next call is answered.
func TestRunsListClientHangsUp(t *testing.T) {
	t.Parallel()
	b := setupWorkflowBounds(t, sqliteStore(t), nil)
	admin := b.addKey(t, auth.ScopeAdmin)
	b.want(t, admin, "PUT", "/v1/workflows/big", waitsFor("start"), http.StatusCreated)
	pad := `{"pad":"` + strings.Repeat("x", 30_000) + `"}`
	for i := range 100 {
		b.want(t, admin, "POST", "/v1/events", eventBody("start", fmt.Sprintf("u%d", i), pad), http.StatusAccepted)
	}
	ts := httptest.NewServer(b.srv)
	t.Cleanup(ts.Close)
	u, _ := url.Parse(ts.URL)
	for range 3 {
		conn, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		fmt.Fprintf(conn, "GET /v1/workflows/big/runs?limit=200 HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s\r\n\r\n", admin)
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil || !strings.Contains(line, "200") {
			t.Fatalf("status line %q, %v", line, err)
		}
		conn.Close() // about 3 MB unread
	}
	code, _, body := wire(t, "GET", ts.URL+"/v1/workflows/big/runs?limit=200", admin, "", nil)
	var page struct{ Items []json.RawMessage }
	if code != http.StatusOK || json.Unmarshal(body, &page) != nil || len(page.Items) != 100 {
		t.Fatalf("the page after the hang-ups = %d with %d runs, want 200 with 100", code, len(page.Items))
	}
	b.stillServes(t, admin)
}

// FuzzWorkflowEvents sends fuzzed events at workflows that branch, match
// and wait on their data, and reads the user's runs back: no answer is a
// 500, every 4xx is problem+json, and no advance panics.
func FuzzWorkflowEvents(f *testing.F) {
	b := setupWorkflowBounds(f, sqliteStore(f), func(o *workflow.Options) { o.MaxLiveRunsPerUser = 1000 })
	admin := b.addKeyTB(f, auth.ScopeAdmin)
	for key, def := range map[string]string{
		"branchy": `{"trigger":{"event":"start"},"steps":[
			{"name":"b","branch":[{"if":{"user.plan":{"eq":"pro"}},"goto":"w"},{"if":{"total":{"gte":100}},"goto":"w"},
				{"if":{"tags":{"in":["a",1,null,true]}},"goto":"x"},{"if":{"a.b.c":{"exists":true}},"goto":"x"}],"else":"s"},
			{"name":"s","split":[{"percent":50,"goto":"w"},{"percent":50,"goto":"exit"}]},
			{"name":"w","wait_for":{"event":"go","match":{"id":"{id}","n":"x{a.b}y"},"timeout":"1h"},"on_timeout":"x"},
			{"name":"x","exit":true}]}`,
		"loop": `{"trigger":{"event":"start"},"steps":[{"name":"top","wait_for":{"event":"again","match":{"id":"{id}"}}},
			{"branch":[{"if":{"again.more":{"eq":true}},"goto":"top"}]}]}`,
	} {
		resp := b.do(call{method: "PUT", path: "/v1/workflows/" + key, body: def, key: admin})
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			f.Fatalf("PUT %s = %d", key, resp.StatusCode)
		}
	}
	for _, s := range []string{`{}`, `{"id":1,"total":150}`, `{"id":"1","tags":"a","a":{"b":{"c":null}}}`, `{"more":true,"id":1}`,
		`{"a":{"b":"{id}"},"id":"{a.b}"}`, `{"id":[1,2],"total":"100"}`, "{\"\xff\":1}", `{"k\u0000":"\u0000"}`} {
		for _, name := range []string{"start", "go", "again"} {
			f.Add(name, "u1", []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, name, user string, data []byte) {
		body, _ := json.Marshal(map[string]any{"name": name, "user_id": user, "data": json.RawMessage(data)})
		if !json.Valid(data) {
			body = []byte(`{"name":` + fmt.Sprintf("%q", name) + `,"user_id":"u1","data":` + string(data) + `}`)
		}
		for _, c := range []call{
			{method: "POST", path: "/v1/events", body: string(body)},
			{method: "POST", path: "/v1/events/batch", body: `{"events":[` + string(body) + `]}`},
			{method: "GET", path: "/v1/users/" + url.PathEscape(user) + "/workflow-runs?limit=5"},
			{method: "PUT", path: "/v1/users/" + url.PathEscape(user) + "/attributes", body: string(data)},
		} {
			var body io.Reader
			if c.body != "" {
				body = strings.NewReader(c.body)
			}
			req := httptest.NewRequest(c.method, c.path, body)
			req.RemoteAddr, req.Host = "127.0.0.1:5555", "localhost"
			req.Header.Set("Authorization", "Bearer "+admin)
			req.Header.Set("Content-Type", "application/json")
			rec := record(t, b.srv, req)
			if rec.Code >= 500 {
				t.Fatalf("%s %s (body %q) = %d %s", c.method, c.path, c.body, rec.Code, rec.Body)
			}
			if rec.Code >= 400 && rec.Header().Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%s %s = %d with Content-Type %q", c.method, c.path, rec.Code, rec.Header().Get("Content-Type"))
			}
		}
		if n := b.panics.Load(); n != 0 {
			t.Fatalf("%d panics recovered", n)
		}
	})
}

// addKeyTB is addKey for a fuzz test's setup.
func (b *bundle) addKeyTB(tb testing.TB, scopes ...auth.Scope) string {
	tb.Helper()
	secret, key, err := auth.NewKey("test", scopes, time.Now(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	if err := b.db.CreateAPIKey(context.Background(), key); err != nil {
		tb.Fatal(err)
	}
	b.srv.auth.forget()
	return secret
}
