package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/gateway"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/panics"
	"github.com/sluicehq/sluice/internal/queue"
)

// lockedBuffer is a log sink the node's goroutines write to while the
// test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// panicService is a gRPC service whose methods panic: the test registers
// it on the node's server, next to the real services.
var panicService = grpc.ServiceDesc{
	ServiceName: "sluice.test.Panics",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Unary", Handler: func(srv any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
		req := new(healthpb.HealthCheckRequest)
		if err := dec(req); err != nil {
			return nil, err
		}
		h := func(context.Context, any) (any, error) { panic("unary boom") }
		if in == nil {
			return h(ctx, req)
		}
		return in(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/sluice.test.Panics/Unary"}, h)
	}}},
	Streams: []grpc.StreamDesc{{StreamName: "Stream", ServerStreams: true, Handler: func(any, grpc.ServerStream) error {
		panic("stream boom")
	}}},
}

// panicTransport is a gateway upstream transport that panics, as a bug in
// the gateway's proxying would.
type panicTransport struct{}

func (panicTransport) RoundTrip(*http.Request) (*http.Response, error) { panic("gateway boom") }

// TestNodeSurvivesPanics makes every request surface of a node panic (an
// HTTP API route, the gateway, a unary and a streaming gRPC method, over
// real listeners) and checks that each call gets an internal error, that
// the node goes on serving, that each panic is logged once with its stack
// and that sluice_panics_total counted it on its surface.
func TestNodeSurvivesPanics(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Gateway.Listen, cfg.Gateway.Upstream = "127.0.0.1:0", "http://127.0.0.1:9" // never reached
	var logs lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, err := newNode(ctx, cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	// The hooks: a panicking route, gRPC service and gateway upstream.
	n.api.(*httpapi.Server).Handle("GET /v1/test-panic", "", func(http.ResponseWriter, *http.Request) error { panic("http boom") })
	n.grpc.RegisterService(&panicService, nil)
	rules, err := limits.NewRules(limits.RulesOptions{Store: n.db, Config: cfg.Ratelimit.Policies})
	if err != nil {
		t.Fatal(err)
	}
	if err := rules.Load(ctx); err != nil {
		t.Fatal(err)
	}
	svc, err := limits.NewService(limits.Options{Rules: rules, Counters: n.counters})
	if err != nil {
		t.Fatal(err)
	}
	if n.gateway, err = gateway.New(gateway.Options{Config: gatewayConfig(cfg.Gateway), Limits: svc, Transport: panicTransport{}}); err != nil {
		t.Fatal(err)
	}
	addrs := make(chan bound, 1)
	n.serving = func(b bound) { addrs <- b }
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	var b bound
	select {
	case b = <-addrs:
	case err := <-done:
		t.Fatalf("Run ended before serving: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the node did not serve within 2m")
	}
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v after shutdown", err)
			}
		case <-time.After(time.Minute):
			t.Error("Run did not return within 1m of shutdown")
		}
	}()
	api := "http://" + b.HTTP

	t.Run("http", func(t *testing.T) {
		resp, err := http.Get(api + "/v1/test-panic")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 500 || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("panicking route: %d %q, want 500 problem+json", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	})
	t.Run("gateway", func(t *testing.T) {
		resp, err := http.Get("http://" + b.Gateway + "/anything")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 500 || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("panicking gateway: %d %q, want 500 problem+json", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	})
	conn := dialGRPC(t, b.GRPC)
	t.Run("grpc unary", func(t *testing.T) {
		cctx, ccancel := context.WithTimeout(ctx, time.Minute)
		defer ccancel()
		err := conn.Invoke(cctx, "/sluice.test.Panics/Unary", &healthpb.HealthCheckRequest{}, &healthpb.HealthCheckResponse{})
		if st := grpcstatus.Convert(err); st.Code() != codes.Internal || strings.Contains(st.Message(), "boom") {
			t.Errorf("panicking unary call: %v, want INTERNAL without the panic's value", err)
		}
	})
	t.Run("grpc stream", func(t *testing.T) {
		cctx, ccancel := context.WithTimeout(ctx, time.Minute)
		defer ccancel()
		s, err := conn.NewStream(cctx, &grpc.StreamDesc{ServerStreams: true}, "/sluice.test.Panics/Stream")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SendMsg(&healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
		_ = s.CloseSend()
		err = s.RecvMsg(&healthpb.HealthCheckResponse{})
		if st := grpcstatus.Convert(err); st.Code() != codes.Internal || strings.Contains(st.Message(), "boom") {
			t.Errorf("panicking stream: %v, want INTERNAL without the panic's value", err)
		}
	})

	// Still serving, on every listener.
	cctx, ccancel := context.WithTimeout(ctx, time.Minute)
	defer ccancel()
	if r, err := healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{}); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("gRPC health after the panics: %v, %v; want SERVING", r, err)
	}
	if code, _ := get(t, api+"/healthz"); code != 200 {
		t.Errorf("/healthz after the panics = %d, want 200", code)
	}
	_, metrics := get(t, api+"/metrics")
	for _, s := range []string{panics.HTTP, panics.Gateway, panics.GRPC} {
		want := 1
		if s == panics.GRPC {
			want = 2
		}
		if line := `sluice_panics_total{surface="` + s + `"} `; !strings.Contains(string(metrics), line+strconv.Itoa(want)+"\n") {
			t.Errorf("metrics lack %s%d", line, want)
		}
	}
	if !strings.Contains(string(metrics), `sluice_panics_total{surface="worker"} 0`) {
		t.Error("sluice_panics_total lacks the worker surface at 0")
	}
	out := logs.String()
	for _, v := range []string{"http boom", "gateway boom", "unary boom", "stream boom"} {
		if c := strings.Count(out, "panic=\""+v+"\""); c != 1 {
			t.Errorf("panic %q logged %d times, want once", v, c)
		}
	}
	if c := strings.Count(out, "msg=\"panic recovered\""); c != 4 || strings.Count(out, "stack=") != 4 {
		t.Errorf("%d panic records (%d with a stack), want 4 with their stacks", c, strings.Count(out, "stack="))
	}
}

// TestPoisonedJobIsSkipped runs the notification queue with the node's job
// handler wrapped by recoverJobs: a job that panics is reported and
// skipped, and the same user's next job, queued behind it, still runs.
func TestPoisonedJobIsSkipped(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c, err := queue.Open(ctx, queue.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q, err := c.NotifyQueue(ctx, queue.NotifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		counted = map[string]int{}
	)
	rep := &panics.Reporter{Logger: slog.New(slog.DiscardHandler), Count: func(s string) { mu.Lock(); counted[s]++; mu.Unlock() }}
	handled := make(chan string, 10)
	handle := func(_ context.Context, j notify.Job) error {
		if j.Type == "poison" {
			panic("poisoned job: the panic a bug would cause")
		}
		handled <- j.NotificationID
		return nil
	}
	runDone := make(chan error, 1)
	go func() { runDone <- q.Run(ctx, recoverJobs(rep, handle)) }()
	now := time.Now().UnixMicro()
	for _, j := range []notify.Job{
		{NotificationID: "n_poison", Channel: notify.Email, UserID: "u1", Type: "poison", Category: notify.Orders, CreatedAt: now},
		{NotificationID: "n_good", Channel: notify.Email, UserID: "u1", Type: "good", Category: notify.Orders, CreatedAt: now},
	} {
		if err := q.Publish(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case id := <-handled:
		if id != "n_good" {
			t.Errorf("handled %s, want n_good", id)
		}
	case <-time.After(time.Minute):
		t.Fatal("the job behind the poisoned one was not handled within 1m")
	}
	mu.Lock()
	if counted[panics.Worker] != 1 {
		t.Errorf("counted %v, want worker: 1", counted)
	}
	mu.Unlock()
	cancel()
	select {
	case err := <-runDone:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v", err)
		}
	case <-time.After(time.Minute):
		t.Error("Run did not return within 1m")
	}
}
