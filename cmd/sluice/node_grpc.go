package main

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/panics"
)

// newGRPCServer builds the node's gRPC server: the Envoy rate limit
// service, the Envoy rate limit quota service (RLQS), the standard health service answering for "" and for every
// registered service by its full name, and, unless --grpc-reflection=false,
// server reflection (grpcurl and Postman list and call the services without
// proto files). A method that panics answers INTERNAL, its panic
// reported to rep (recoverUnary, recoverStream); the server goes on. opts
// are the transport credentials (grpcServerOptions).
func newGRPCServer(rep *panics.Reporter, services []grpcService, withReflection bool, opts ...grpc.ServerOption) (*grpc.Server, *grpcHealth) {
	opts = append(opts, grpc.ChainUnaryInterceptor(recoverUnary(rep)), grpc.ChainStreamInterceptor(recoverStream(rep)))
	gs := grpc.NewServer(opts...)
	h := &grpcHealth{Server: health.NewServer(), done: make(chan struct{})}
	healthpb.RegisterHealthServer(gs, h)
	for _, s := range services {
		s.Register(gs)
	}
	if withReflection {
		reflection.Register(gs)
	}
	for name := range gs.GetServiceInfo() {
		h.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	return gs, h
}

// grpcService is a service newGRPCServer registers: the Envoy rate limit
// service (envoyrls.Server), RLQS (rlqs.Server).
type grpcService interface{ Register(grpc.ServiceRegistrar) }

// errPanicked is what a call whose method panicked gets: the detail stays
// in the node's log.
var errPanicked = grpcstatus.Error(codes.Internal, "internal error")

// recoverUnary ends a unary call whose method panics with INTERNAL, the
// panic reported to rep.
func recoverUnary(rep *panics.Reporter) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		err = rep.Do(ctx, panics.GRPC, func() error {
			resp, err = handler(ctx, req)
			return err
		}, slog.String("method", info.FullMethod))
		if errors.Is(err, panics.ErrRecovered) {
			return nil, errPanicked
		}
		return resp, err
	}
}

// recoverStream ends a stream whose method panics with INTERNAL, the
// panic reported to rep.
func recoverStream(rep *panics.Reporter) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		err := rep.Do(ss.Context(), panics.GRPC, func() error { return handler(srv, ss) }, slog.String("method", info.FullMethod))
		if errors.Is(err, panics.ErrRecovered) {
			return errPanicked
		}
		return err
	}
}

// grpcServices lists the services a gRPC server registered, sorted.
func grpcServices(gs *grpc.Server) []string {
	var names []string
	for name := range gs.GetServiceInfo() {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// grpcHealth is grpc.health.v1 with the node's shutdown in it. Drain turns
// every service NOT_SERVING (Check answers it, and every Watch stream is
// sent it and then ended, so a watcher never holds the server's graceful
// stop); close ends the Watch streams still open (those of unknown
// services) before the server stops.
type grpcHealth struct {
	*health.Server
	draining  atomic.Bool
	done      chan struct{}
	closeOnce sync.Once
}

// drain reports NOT_SERVING for every service from now on.
func (h *grpcHealth) drain() {
	h.draining.Store(true)
	h.Shutdown()
}

// close ends every Watch stream still open.
func (h *grpcHealth) close() { h.closeOnce.Do(func() { close(h.done) }) }

// Watch streams the service's status like health.Server.Watch, and ends
// with UNAVAILABLE once NOT_SERVING was sent while the node drains, or when
// the server stops.
func (h *grpcHealth) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	go func() {
		select {
		case <-h.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	ws := &watchStream{Health_WatchServer: stream, ctx: ctx, sent: func(st healthpb.HealthCheckResponse_ServingStatus) {
		if st != healthpb.HealthCheckResponse_SERVING && h.draining.Load() {
			cancel()
		}
	}}
	err := h.Server.Watch(req, ws)
	if stream.Context().Err() == nil && ctx.Err() != nil {
		return grpcstatus.Error(codes.Unavailable, "the node is shutting down")
	}
	return err
}

// watchStream is a Watch stream whose context ends with the node's drain.
type watchStream struct {
	healthpb.Health_WatchServer
	ctx  context.Context
	sent func(healthpb.HealthCheckResponse_ServingStatus)
}

func (s *watchStream) Context() context.Context { return s.ctx }

func (s *watchStream) Send(m *healthpb.HealthCheckResponse) error {
	if err := s.Health_WatchServer.Send(m); err != nil {
		return err
	}
	s.sent(m.GetStatus())
	return nil
}

// stopGRPC ends the health watches, then drains gRPC calls, or cuts them
// when ctx ends first.
func stopGRPC(ctx context.Context, gs *grpc.Server, h *grpcHealth) {
	h.close()
	done := make(chan struct{})
	go func() { gs.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		gs.Stop()
		<-done
	}
}
