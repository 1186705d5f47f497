package topology

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// The workload's shape. Paces are sleeps between one client's requests;
// the whole workload is a few hundred requests a second at most, which a
// 2-core machine running -race beside it sustains.
const (
	users       = 6                      // notification users, each posting in sequence
	notifyPace  = 300 * time.Millisecond // between one user's notifications
	checkers    = 2                      // HTTP check clients
	checkPace   = 25 * time.Millisecond
	grpcPace    = 40 * time.Millisecond
	linkPace    = 100 * time.Millisecond // one link client: creates and redirects
	httpKeys    = 4                      // keys of the HTTP policy
	envoyValues = 3                      // values of the Envoy descriptor
	reqTimeout  = 10 * time.Second       // one client request (longer than a SIGSTOP)
	browserUA   = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36"
)

// notifyTypes gives every category: seq%3 picks one.
var notifyTypes = []struct{ typ, category string }{
	{"otp", "critical"}, {"order.shipped", "orders"}, {"flash_sale", "marketing"},
}

// workload drives the topology through HAProxy only and records every
// request and answer in h.
type workload struct {
	h    *History
	base string // HAProxy's HTTP frontend
	seed int64
	web  *http.Client
	rls  rlspb.RateLimitServiceClient

	mu    sync.Mutex
	codes []string // links created (201)
}

func newWorkload(t *testing.T, tp *topology, h *History) *workload {
	t.Helper()
	conn, err := grpc.NewClient(tp.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &workload{
		h: h, base: tp.lb.URL(), seed: h.Seed,
		web: &http.Client{
			Timeout:       reqTimeout,
			Transport:     &http.Transport{MaxIdleConnsPerHost: 32, IdleConnTimeout: 10 * time.Second},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		rls: rlspb.NewRateLimitServiceClient(conn),
	}
}

// setup stores the templates (which write the user, sequence number and
// category where the SMTP peer reads them) and the users' settings
// (webhook and email on, to the receivers; sms and push off). It retries
// each request for up to a minute.
func (w *workload) setup(t *testing.T, hook string) {
	t.Helper()
	for _, nt := range notifyTypes {
		w.must(t, "PUT", "/v1/templates/"+nt.typ,
			`{"channels":{"default":{"en":{"subject":"topo {seq}","body":"[topo {user} {seq} {cat}]"}}}}`)
	}
	for u := range users {
		w.must(t, "PUT", fmt.Sprintf("/v1/users/u%d/settings", u), fmt.Sprintf(
			`{"channels":{"email":true,"sms":false,"push":false,"webhook":true},"contacts":{"email":"u%d@example.test","webhook_url":"%s/u%d"}}`,
			u, hook, u))
	}
}

func (w *workload) must(t *testing.T, method, path, body string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		code, resp, err := w.do(context.Background(), method, path, body)
		if err == nil && code < 300 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s: %d %s %v", method, path, code, resp, err)
		}
		time.Sleep(200 * time.Millisecond) // between retries
	}
}

// run drives every client until ctx is done and returns when all have
// stopped.
func (w *workload) run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range checkers {
		rng := rand.New(rand.NewPCG(uint64(w.seed), uint64(100+i)))
		wg.Go(func() { w.loop(ctx, checkPace, func() { w.httpCheck(ctx, rng) }) })
	}
	rng := rand.New(rand.NewPCG(uint64(w.seed), 200))
	wg.Go(func() { w.loop(ctx, grpcPace, func() { w.grpcCheck(ctx, rng) }) })
	for u := range users {
		wg.Go(func() { w.notifyUser(ctx, fmt.Sprintf("u%d", u)) })
	}
	lrng := rand.New(rand.NewPCG(uint64(w.seed), 300))
	wg.Go(func() { w.loop(ctx, linkPace, func() { w.link(ctx, lrng) }) })
	wg.Wait()
}

// loop calls f every pace until ctx is done.
func (w *workload) loop(ctx context.Context, pace time.Duration, f func()) {
	for ctx.Err() == nil {
		f()
		select {
		case <-ctx.Done():
		case <-time.After(pace): // the workload's pace
		}
	}
}

// do sends one request to HAProxy. The context bounds it together with
// the client's timeout.
func (w *workload) do(ctx context.Context, method, path, body string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, w.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", browserUA)
	resp, err := w.web.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// record fills in an op's answer and adds it to the history.
func (w *workload) record(op Op, code int, err error) Op {
	op.End = time.Now()
	op.Status = code
	if err != nil {
		op.Err = err.Error()
	}
	w.h.Add(op)
	return op
}

// httpCheck checks one key, or two at once (one time in four).
func (w *workload) httpCheck(ctx context.Context, rng *rand.Rand) {
	a := rng.IntN(httpKeys)
	keys := []int{a}
	if rng.IntN(4) == 0 {
		keys = append(keys, (a+1+rng.IntN(httpKeys-1))%httpKeys)
	}
	var body string
	var names []string
	for _, k := range keys {
		names = append(names, fmt.Sprintf("http/%s/k%d", httpPolicy, k))
	}
	if len(keys) == 1 {
		body = fmt.Sprintf(`{"policy":%q,"key":"k%d"}`, httpPolicy, keys[0])
	} else {
		body = fmt.Sprintf(`{"checks":[{"policy":%q,"key":"k%d"},{"policy":%q,"key":"k%d"}]}`, httpPolicy, keys[0], httpPolicy, keys[1])
	}
	op := Op{Kind: Check, Start: time.Now(), Via: "http", Keys: names, Limit: httpLimit}
	code, resp, err := w.do(ctx, "POST", "/v1/ratelimit/check", body)
	var d struct {
		Allowed      bool  `json:"allowed"`
		ResetAfterMS int64 `json:"reset_after_ms"`
	}
	if err == nil && code == http.StatusOK {
		if err = json.Unmarshal(resp, &d); err == nil {
			op.Allowed = d.Allowed
			op.Window = windowOf(time.Now(), time.Duration(d.ResetAfterMS)*time.Millisecond, httpPeriod)
		}
	}
	w.record(op, code, err)
}

// windowOf is the start of the fixed window an answer at end was decided
// in, from the time until its reset: windows are multiples of period
// from the Unix epoch, so the reset time rounds to a window's end.
func windowOf(end time.Time, untilReset, period time.Duration) time.Time {
	return end.Add(untilReset).Round(period).Add(-period).UTC()
}

// grpcCheck asks the Envoy rate limit service about one descriptor.
func (w *workload) grpcCheck(ctx context.Context, rng *rand.Rand) {
	v := fmt.Sprintf("e%d", rng.IntN(envoyValues))
	op := Op{Kind: Check, Start: time.Now(), Via: "grpc", Keys: []string{"grpc/topo/" + envoyKey + "=" + v}, Limit: envoyLimit}
	cctx, cancel := context.WithTimeout(ctx, reqTimeout)
	defer cancel()
	resp, err := w.rls.ShouldRateLimit(cctx, &rlspb.RateLimitRequest{Domain: "topo",
		Descriptors: []*commonpb.RateLimitDescriptor{{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: envoyKey, Value: v}}}}})
	code := http.StatusOK
	if err != nil {
		code = http.StatusServiceUnavailable
		err = fmt.Errorf("%s: %w", status.Code(err), err)
	} else {
		op.Allowed = resp.OverallCode == rlspb.RateLimitResponse_OK
		if st := resp.GetStatuses(); len(st) == 1 {
			op.Window = windowOf(time.Now(), st[0].GetDurationUntilReset().AsDuration(), envoyUnit)
		}
	}
	w.record(op, code, err)
}

// notifyUser posts user's notifications one after another, each with the
// next sequence number, until ctx is done. A notification whose post
// fails is retried with the same request id (so at most one is accepted)
// for up to 20 s before the next one is posted; the next is posted only
// after an answer, so acceptance order is sequence order.
func (w *workload) notifyUser(ctx context.Context, user string) {
	for seq := 1; ctx.Err() == nil; seq++ {
		nt := notifyTypes[seq%len(notifyTypes)]
		body := fmt.Sprintf(`{"request_id":"topo-%d-%s-%d","user_id":%q,"type":%q,"data":{"seq":%d,"user":%q,"cat":%q}}`,
			w.seed, user, seq, user, nt.typ, seq, user, nt.category)
		deadline := time.Now().Add(20 * time.Second)
		for attempt := 1; ; attempt++ {
			op := Op{Kind: Notify, Start: time.Now(), Via: "http", User: user, Seq: seq, Category: nt.category}
			code, resp, err := w.do(ctx, "POST", "/v1/notifications", body)
			var acc struct {
				ID string `json:"notification_id"`
			}
			if err == nil && (code == http.StatusAccepted || code == http.StatusOK) {
				_ = json.Unmarshal(resp, &acc)
				op.ID = acc.ID
			}
			op = w.record(op, code, err)
			if op.ID != "" || (op.OK() && code >= 400) || ctx.Err() != nil || time.Now().After(deadline) {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(attempt) * 200 * time.Millisecond): // retry backoff
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(notifyPace): // the workload's pace
		}
	}
}

// link creates a link (one time in ten, or while there is none) or
// follows a random one of those created.
func (w *workload) link(ctx context.Context, rng *rand.Rand) {
	w.mu.Lock()
	n := len(w.codes)
	var code string
	if n > 0 {
		code = w.codes[rng.IntN(n)]
	}
	w.mu.Unlock()
	if n == 0 || rng.IntN(10) == 0 {
		op := Op{Kind: Create, Start: time.Now(), Via: "http"}
		status, resp, err := w.do(ctx, "POST", "/v1/links", fmt.Sprintf(`{"url":"https://example.com/topo/%d"}`, rng.Int64()))
		var l struct {
			Code string `json:"code"`
		}
		if err == nil && status == http.StatusCreated {
			_ = json.Unmarshal(resp, &l)
			op.Code = l.Code
		}
		w.record(op, status, err)
		if op.Code != "" {
			w.mu.Lock()
			w.codes = append(w.codes, op.Code)
			w.mu.Unlock()
		}
		return
	}
	op := Op{Kind: Redirect, Start: time.Now(), Via: "http", Code: code}
	status, _, err := w.do(ctx, "GET", "/"+code, "")
	if err != nil && ctx.Err() != nil {
		// Cut by the workload's own end, not answered by the system: a
		// redirect changes nothing, so there is nothing to check.
		return
	}
	w.record(op, status, err)
}

// readStatuses reads every accepted notification through the API until
// each of its deliveries is terminal, or the deadline passes, and records
// a Status op per delivery with the last status read.
func (w *workload) readStatuses(ctx context.Context, deadline time.Duration) {
	type ntf struct {
		id, user, category string
		seq                int
	}
	seen := map[string]bool{}
	var todo []ntf
	for _, o := range w.h.Of(Notify) {
		if o.ID != "" && !seen[o.ID] {
			seen[o.ID] = true
			todo = append(todo, ntf{o.ID, o.User, o.Category, o.Seq})
		}
	}
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	next := make(chan ntf)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for n := range next {
				w.readStatus(ctx, n.id, n.user, n.category, n.seq)
			}
		})
	}
	for _, n := range todo {
		next <- n
	}
	close(next)
	wg.Wait()
}

func (w *workload) readStatus(ctx context.Context, id, user, category string, seq int) {
	type delivery struct {
		Channel, Status string
		Attempts        int
	}
	var last []delivery
	var lastOp Op
	for {
		op := Op{Kind: Status, Start: time.Now(), Via: "http", ID: id, User: user, Seq: seq, Category: category}
		code, resp, err := w.do(ctx, "GET", "/v1/notifications/"+id, "")
		op.End, op.Status = time.Now(), code
		if err != nil {
			op.Err = err.Error()
		}
		var n struct{ Deliveries []delivery }
		if err == nil && code == http.StatusOK && json.Unmarshal(resp, &n) == nil {
			last, lastOp = n.Deliveries, op
			done := true
			for _, d := range n.Deliveries {
				done = done && Terminal(d.Status)
			}
			if done {
				break
			}
		} else if lastOp.Start.IsZero() {
			lastOp = op
		}
		if ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond): // polling interval
		}
	}
	if len(last) == 0 {
		lastOp.Final = "unknown"
		w.h.Add(lastOp)
		return
	}
	for _, d := range last {
		op := lastOp
		op.Channel, op.Final, op.Attempts = d.Channel, d.Status, d.Attempts
		w.h.Add(op)
	}
}

// readClicks reads every created link's click count once it has caught
// up with the redirects that answered 302 (clicks are flushed every
// second), or at the deadline, and records a Clicks op for each.
func (w *workload) readClicks(ctx context.Context, deadline time.Duration) {
	want := map[string]int64{}
	for _, o := range w.h.Of(Redirect) {
		if o.Status == http.StatusFound {
			want[o.Code]++
		}
	}
	w.mu.Lock()
	codes := append([]string(nil), w.codes...)
	w.mu.Unlock()
	// Read every link in passes until a pass finds every count caught up
	// or the deadline has passed, and record the last pass.
	end := time.Now().Add(deadline)
	for {
		var pass []Op
		behind := 0
		for _, c := range codes {
			op := Op{Kind: Clicks, Start: time.Now(), Via: "http", Code: c}
			code, resp, err := w.do(ctx, "GET", "/v1/links/"+c, "")
			var l struct {
				Clicks int64 `json:"clicks"`
			}
			if err == nil && code == http.StatusOK {
				_ = json.Unmarshal(resp, &l)
				op.Count = l.Clicks
			}
			op.End, op.Status = time.Now(), code
			if err != nil {
				op.Err = err.Error()
			}
			if op.Count < want[c] {
				behind++
			}
			pass = append(pass, op)
		}
		if behind == 0 || time.Now().After(end) || ctx.Err() != nil {
			for _, op := range pass {
				w.h.Add(op)
			}
			return
		}
		time.Sleep(500 * time.Millisecond) // polling interval
	}
}
