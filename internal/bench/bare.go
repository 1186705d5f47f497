package bench

import (
	"context"
	"io"
	"net"
	"net/http"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
)

// bareDecision is what the bare HTTP handler answers to a POST.
const bareDecision = `{"allowed":true,"limit":1000000000,"remaining":999999999,"retry_after_ms":0,"reset_after_ms":0,"decided_by":"rule"}`

// bareHTTP is the floor of the HTTP path: a net/http handler that reads
// the request and answers at once (a decision to POST, a 302 to GET), with
// no routing, auth, JSON decoding or limiter.
func bareHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if r.Method == http.MethodGet {
		w.Header().Set("Location", "https://example.com/")
		w.WriteHeader(http.StatusFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, bareDecision)
}

// bareRLS is the floor of the gRPC path: it answers OK for every
// descriptor without deciding anything.
type bareRLS struct {
	rlspb.UnimplementedRateLimitServiceServer
}

func (bareRLS) ShouldRateLimit(_ context.Context, r *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	resp := &rlspb.RateLimitResponse{OverallCode: rlspb.RateLimitResponse_OK,
		Statuses: make([]*rlspb.RateLimitResponse_DescriptorStatus, len(r.Descriptors))}
	for i := range resp.Statuses {
		resp.Statuses[i] = &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK}
	}
	return resp, nil
}

// Bare is the floor a Sluice server is compared with: bareHTTP and bareRLS
// serving on loopback spare ports. Stop stops them.
type Bare struct {
	// HTTPURL is the HTTP server's URL, ending in "/".
	HTTPURL string
	// GRPCAddr is the gRPC server's host:port.
	GRPCAddr string
	// Stop closes both servers.
	Stop func()
}

// StartBare serves bareHTTP and bareRLS on loopback spare ports.
func StartBare() (*Bare, error) {
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		hl.Close()
		return nil, err
	}
	hs := &http.Server{Handler: http.HandlerFunc(bareHTTP)}
	gs := grpc.NewServer()
	rlspb.RegisterRateLimitServiceServer(gs, bareRLS{})
	go func() { _ = hs.Serve(hl) }()
	go func() { _ = gs.Serve(gl) }()
	return &Bare{
		HTTPURL:  "http://" + hl.Addr().String() + "/",
		GRPCAddr: gl.Addr().String(),
		Stop: func() {
			_ = hs.Close()
			gs.Stop()
		},
	}, nil
}
