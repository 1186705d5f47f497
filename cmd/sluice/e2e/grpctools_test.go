package e2e

import (
	"bufio"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// The gRPC tools the ecosystem uses, at versions that build on Go 1.26.
const (
	grpcurlModule     = "github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.3"
	healthProbeModule = "github.com/grpc-ecosystem/grpc-health-probe@v0.4.62"
	rlsService        = "envoy.service.ratelimit.v3.RateLimitService"
	rlqsService       = "envoy.service.rate_limit_quota.v3.RateLimitQuotaService"
)

// goTool is enginetest.GoTool.
func goTool(t *testing.T, name, module string) string { return enginetest.GoTool(t, name, module) }

// runTool runs a program to its end and returns its output and exit code.
func runTool(t *testing.T, path string, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command(path, args...).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	default:
		t.Fatalf("%s %v: %v", path, args, err)
		return "", -1
	}
}

// TestGRPCToolsAgainstANode runs the real grpcurl (through server
// reflection, with no proto files) and grpc-health-probe against a
// `sluice serve` process, then stops it with SIGTERM: during --drain-delay
// every health service answers NOT_SERVING, a Watch stream is told so and
// ended, /readyz answers 503, and the node exits 0.
func TestGRPCToolsAgainstANode(t *testing.T) {
	t.Parallel()
	grpcurl := goTool(t, "grpcurl", grpcurlModule)
	probe := goTool(t, "grpc-health-probe", healthProbeModule)
	c := startChild(t, t.TempDir(), "--drain-delay", "4s")
	addr := c.grpcAddr

	out, code := runTool(t, grpcurl, "-plaintext", addr, "list")
	for _, want := range []string{rlsService, rlqsService, "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if code != 0 || !strings.Contains(out, want+"\n") {
			t.Errorf("grpcurl list = %d %q; want %s listed", code, out, want)
		}
	}
	out, code = runTool(t, grpcurl, "-plaintext", addr, "describe", rlsService+".ShouldRateLimit")
	if code != 0 || !strings.Contains(out, ".envoy.service.ratelimit.v3.RateLimitRequest") {
		t.Errorf("grpcurl describe = %d %q; want the method's request type", code, out)
	}
	out, code = runTool(t, grpcurl, "-plaintext", addr, "describe", rlqsService+".StreamRateLimitQuotas")
	if code != 0 || !strings.Contains(out, "stream .envoy.service.rate_limit_quota.v3.RateLimitQuotaUsageReports") {
		t.Errorf("grpcurl describe = %d %q; want the quota stream's report type", code, out)
	}
	out, code = runTool(t, grpcurl, "-plaintext", "-d", `{"domain":"none","bucket_quota_usages":[{"bucket_id":{"bucket":{"k":"v"}},"time_elapsed":"1s","num_requests_allowed":"3"}]}`,
		addr, rlqsService+"/StreamRateLimitQuotas")
	if code != 0 || !strings.Contains(out, `"blanketRule": "ALLOW_ALL"`) {
		t.Errorf("grpcurl StreamRateLimitQuotas for an unmatched bucket = %d %q; want ALLOW_ALL (rlqs.unmatched: allow)", code, out)
	}
	out, code = runTool(t, grpcurl, "-plaintext", "-d", `{"domain":"none","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}`,
		addr, rlsService+"/ShouldRateLimit")
	if code != 0 || !strings.Contains(out, `"overallCode": "OK"`) {
		t.Errorf("grpcurl ShouldRateLimit = %d %q; want overallCode OK", code, out)
	}
	out, code = runTool(t, grpcurl, "-plaintext", "-d", `{}`, addr, rlsService+"/ShouldRateLimit")
	if code == 0 || !strings.Contains(out, "InvalidArgument") {
		t.Errorf("grpcurl ShouldRateLimit with no domain = %d %q; want InvalidArgument", code, out)
	}

	for _, svc := range []string{"", rlsService, rlqsService, "grpc.health.v1.Health"} {
		if out, code := runTool(t, probe, "-addr", addr, "-service", svc); code != 0 || !strings.Contains(out, "SERVING") {
			t.Errorf("grpc-health-probe -service %q = %d %q; want SERVING, exit 0", svc, code, out)
		}
	}
	if out, code := runTool(t, probe, "-addr", addr, "-service", "no.such.Service"); code == 0 {
		t.Errorf("grpc-health-probe for an unknown service = 0 %q; want a failure", out)
	}

	// A Watch stream, as Envoy's and Kubernetes' gRPC checks can hold.
	watch := exec.Command(grpcurl, "-plaintext", "-d", `{"service":"`+rlsService+`"}`, addr, "grpc.health.v1.Health/Watch")
	stdout, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	watch.Stderr = watch.Stdout
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = watch.Process.Kill() })
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	waitLine(t, lines, `"status": "SERVING"`)

	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitLine(t, lines, `"status": "NOT_SERVING"`)
	for range lines { // the stream ends: grpcurl exits while the node still drains
	}
	if err := watch.Wait(); err == nil {
		t.Error("grpcurl Watch exited 0; want the stream ended with UNAVAILABLE")
	}
	for _, svc := range []string{"", rlsService} {
		if out, code := runTool(t, probe, "-addr", addr, "-service", svc); code != 4 || !strings.Contains(out, "NOT_SERVING") {
			t.Errorf("grpc-health-probe -service %q while draining = %d %q; want NOT_SERVING, exit 4", svc, code, out)
		}
	}
	if code, body := c.request(t, "GET", "/readyz", "", ""); code != 503 || !strings.Contains(string(body), "shutting down") {
		t.Errorf("/readyz while draining = %d %s; want 503 shutting down", code, body)
	}
	if code, _ := c.request(t, "GET", "/healthz", "", ""); code != 200 {
		t.Errorf("/healthz while draining = %d; want 200 (alive)", code)
	}
	select {
	case err := <-c.exited:
		if err != nil {
			t.Errorf("sluice serve after SIGTERM: %v\n%s", err, c.logs)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("sluice serve still running 60s after SIGTERM\n%s", c.logs)
	}
}

// TestGRPCReflectionOff: with --grpc-reflection=false grpcurl cannot list
// the services, and they still answer.
func TestGRPCReflectionOff(t *testing.T) {
	t.Parallel()
	grpcurl := goTool(t, "grpcurl", grpcurlModule)
	probe := goTool(t, "grpc-health-probe", healthProbeModule)
	c := startChild(t, t.TempDir(), "--grpc-reflection=false")
	if out, code := runTool(t, grpcurl, "-plaintext", c.grpcAddr, "list"); code == 0 || !strings.Contains(out, "does not support the reflection API") {
		t.Errorf("grpcurl list without reflection = %d %q; want the reflection API refused", code, out)
	}
	if out, code := runTool(t, probe, "-addr", c.grpcAddr, "-service", rlsService); code != 0 {
		t.Errorf("grpc-health-probe without reflection = %d %q; want SERVING", code, out)
	}
}

// waitLine reads lines until one contains want, for up to 30 s.
func waitLine(t *testing.T, lines <-chan string, want string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("stream ended before a line with %s", want)
			}
			if strings.Contains(l, want) {
				return
			}
		case <-deadline:
			t.Fatalf("no line with %s within 30s", want)
		}
	}
}
