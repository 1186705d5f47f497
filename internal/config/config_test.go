package config

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func load(t *testing.T, args []string, env map[string]string) (Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg, _, err := Load(fs, args, func(k string) string { return env[k] })
	return cfg, err
}

// yamlFile writes text to a configuration file and returns its path.
func yamlFile(t *testing.T, text string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := load(t, nil, nil)
	if err != nil {
		t.Fatalf("Load() error = %v", err)
	}
	if cfg.HTTPAddr != "127.0.0.1:8080" || cfg.GRPCAddr != "127.0.0.1:8081" || cfg.DataDir != "./sluice-data" {
		t.Errorf("defaults = %+v", cfg)
	}
	if cfg.MaxBodyBytes != 1<<20 {
		t.Errorf("MaxBodyBytes = %d, want 1 MiB", cfg.MaxBodyBytes)
	}
}

func TestPrecedence(t *testing.T) {
	t.Parallel()
	file := yamlFile(t, "http_addr: 127.0.0.1:9000\ngrpc_addr: 127.0.0.1:9001\nshutdown_timeout: 5s\nlog_level: debug\n")
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		wantHTTP string
		wantGRPC string
	}{
		{name: "file", args: []string{"--config", file}, wantHTTP: "127.0.0.1:9000", wantGRPC: "127.0.0.1:9001"},
		{name: "env over file", args: []string{"--config", file}, env: map[string]string{"SLUICE_HTTP_ADDR": "127.0.0.1:7000"}, wantHTTP: "127.0.0.1:7000", wantGRPC: "127.0.0.1:9001"},
		{name: "flag over env", args: []string{"--config", file, "--http-addr", "127.0.0.1:6000"}, env: map[string]string{"SLUICE_HTTP_ADDR": "127.0.0.1:7000"}, wantHTTP: "127.0.0.1:6000", wantGRPC: "127.0.0.1:9001"},
		{name: "config from env", env: map[string]string{"SLUICE_CONFIG": file}, wantHTTP: "127.0.0.1:9000", wantGRPC: "127.0.0.1:9001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := load(t, tt.args, tt.env)
			if err != nil {
				t.Fatalf("Load() error = %v", err)
			}
			if cfg.HTTPAddr != tt.wantHTTP || cfg.GRPCAddr != tt.wantGRPC {
				t.Errorf("addrs = %s, %s; want %s, %s", cfg.HTTPAddr, cfg.GRPCAddr, tt.wantHTTP, tt.wantGRPC)
			}
			if cfg.ShutdownTimeout != 5*time.Second || cfg.LogLevel != "debug" {
				t.Errorf("ShutdownTimeout, LogLevel = %v, %s; want 5s, debug from the file", cfg.ShutdownTimeout, cfg.LogLevel)
			}
		})
	}
}

func TestEveryProblemReportedAtOnce(t *testing.T) {
	t.Parallel()
	_, err := load(t, []string{"--http-addr", "nonsense", "--log-format", "xml", "--redis-url", "http://x"},
		map[string]string{"SLUICE_DATABASE_URL": "mysql://x"})
	if err == nil {
		t.Fatal("Load() error = nil, want problems")
	}
	for _, want := range []string{"--http-addr", "--log-format", "--redis-url", "--database-url"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func TestRedisCAFileChecked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, url, file, want string
	}{
		{"not PEM", "rediss://redis:6380", notPEM, "holds no PEM certificate"},
		{"missing", "rediss://redis:6380", filepath.Join(dir, "nope.pem"), "no such file"},
		{"without TLS", "redis://redis:6379", notPEM, "needs a rediss://"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := load(t, []string{"--redis-url", tt.url, "--redis-ca-file", tt.file}, nil)
			if err == nil || !strings.Contains(err.Error(), "--redis-ca-file") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load(--redis-ca-file %s) error = %v, want --redis-ca-file: ...%s", tt.file, err, tt.want)
			}
		})
	}
}

func TestBadValuesNamed(t *testing.T) {
	t.Parallel()
	_, err := load(t, []string{"--shutdown-timeout", "soon"}, map[string]string{"SLUICE_ALLOW_PRIVATE_TARGETS": "maybe"})
	if err == nil || !strings.Contains(err.Error(), "--shutdown-timeout") || !strings.Contains(err.Error(), "SLUICE_ALLOW_PRIVATE_TARGETS") {
		t.Fatalf("Load() error = %v, want both bad values named", err)
	}
}

func TestUnknownYAMLKeyRefused(t *testing.T) {
	t.Parallel()
	file := yamlFile(t, "http_adr: 127.0.0.1:1\n")
	if _, err := load(t, []string{"--config", file}, nil); err == nil || !strings.Contains(err.Error(), "http_adr") {
		t.Fatalf("Load() error = %v, want the unknown key named", err)
	}
}

func TestEmptyFileIsEmptyConfig(t *testing.T) {
	t.Parallel()
	file := yamlFile(t, "")
	if _, err := load(t, []string{"--config", file}, nil); err != nil {
		t.Fatalf("Load() error = %v", err)
	}
}

func TestReferenceListsEveryFlag(t *testing.T) {
	t.Parallel()
	ref := Reference()
	for _, f := range Fields() {
		if !strings.Contains(ref, "`--"+f.Flag+"`") || !strings.Contains(ref, f.Env) {
			t.Errorf("reference lacks %s", f.Flag)
		}
	}
}

var update = flag.Bool("update", false, "rewrite docs/configuration.md's generated table")

// TestReferenceDoc keeps docs/configuration.md in step with Config: the
// table between the markers is generated. Run `go test ./internal/config
// -update` after adding a setting.
func TestReferenceDoc(t *testing.T) {
	checkGenerated(t, "<!-- BEGIN GENERATED: go test ./internal/config -update -->\n", Reference())
}

func TestNotifySettings(t *testing.T) {
	t.Parallel()
	cfg, err := load(t, []string{"--notify-retry-orders-attempts", "7", "--webhook-secret", "whsec_c2VjcmV0c2VjcmV0c2VjcmV0"},
		map[string]string{"SLUICE_NOTIFY_RETRY_CRITICAL_BASE": "100ms", "SLUICE_WEBHOOK_TIMEOUT": "3s"})
	if err != nil {
		t.Fatalf("Load() error = %v", err)
	}
	rules := cfg.Notify.RetryRules()
	if rules["orders"].Attempts != 7 || rules["critical"].Base != 100*time.Millisecond || rules["marketing"].Attempts != 2 {
		t.Errorf("retry rules = %+v", rules)
	}
	if cfg.Notify.Webhook.Secret == "" || cfg.Notify.Webhook.Timeout != 3*time.Second || cfg.Notify.RecoveryAfter != time.Minute {
		t.Errorf("notify = %+v", cfg.Notify)
	}
	tests := []struct {
		name string
		args []string
		flag string
	}{
		{"secret without prefix", []string{"--webhook-secret", "hunter2"}, "--webhook-secret"},
		{"marketing retrying more than once", []string{"--notify-retry-marketing-attempts", "3"}, "--notify-retry-marketing-attempts"},
		{"cap below base", []string{"--notify-retry-orders-base", "1m", "--notify-retry-orders-cap", "1s"}, "--notify-retry-orders-cap"},
		{"ack wait not positive", []string{"--notify-ack-wait", "0s"}, "--notify-ack-wait"},
		{"no workers", []string{"--notify-workers-critical", "0"}, "--notify-workers-critical"},
		{"negative recovery", []string{"--notify-recovery-after", "-1s"}, "--notify-recovery-after"},
	}
	for _, tt := range tests {
		if _, err := load(t, tt.args, nil); err == nil || !strings.Contains(err.Error(), tt.flag) {
			t.Errorf("%s: Load() error = %v, want one naming %s", tt.name, err, tt.flag)
		}
	}
}

func TestTrustedProxies(t *testing.T) {
	t.Parallel()
	file := yamlFile(t, "trusted_proxies: [10.0.0.0/8, \"::ffff:192.0.2.1\"]\nproxy_protocol: true\ngateway:\n  trusted_proxies: [172.16.0.0/12]\n")
	tests := []struct {
		name      string
		args      []string
		env       map[string]string
		want      string
		wantProto bool
	}{
		{name: "default: none", want: "[]"},
		{name: "flag", args: []string{"--trusted-proxies", "10.0.0.1, 192.168.0.0/16"}, want: "[10.0.0.1/32 192.168.0.0/16]"},
		{name: "env", env: map[string]string{"SLUICE_TRUSTED_PROXIES": "2001:db8::/32", "SLUICE_PROXY_PROTOCOL": "true"}, want: "[2001:db8::/32]", wantProto: true},
		{name: "file, the deprecated gateway key added", args: []string{"--config", file}, want: "[10.0.0.0/8 192.0.2.1/32 172.16.0.0/12]", wantProto: true},
		{name: "deprecated flag alone", args: []string{"--gateway-trusted-proxies", "10.1.2.3"}, want: "[10.1.2.3/32]"},
	}
	for _, tt := range tests {
		cfg, err := load(t, tt.args, tt.env)
		if err != nil {
			t.Fatalf("%s: Load() error = %v", tt.name, err)
		}
		ps, err := cfg.Proxies()
		if err != nil || fmt.Sprint(ps) != tt.want || cfg.ProxyProtocol != tt.wantProto {
			t.Errorf("%s: Proxies() = %v, %v; ProxyProtocol %v; want %s, %v", tt.name, ps, err, cfg.ProxyProtocol, tt.want, tt.wantProto)
		}
	}
	_, err := load(t, []string{"--trusted-proxies", "10.0.0.0/8,lb.internal", "--gateway-trusted-proxies", "nope"}, nil)
	for _, want := range []string{"--trusted-proxies", `"lb.internal"`, "--gateway-trusted-proxies"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad proxies: Load() error = %v, want it to name %s", err, want)
		}
	}
}

func TestNATSCluster(t *testing.T) {
	t.Parallel()
	seeds := "nats://10.0.0.1:4222, nats://10.0.0.2:4222,nats://10.0.0.3:4222"
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		replicas int
		wantErr  string // a substring; empty: valid
	}{
		{name: "default", replicas: 1},
		{name: "seeds and replicas by flag", args: []string{"--nats-url", seeds, "--nats-replicas", "3"}, replicas: 3},
		{name: "replicas by env", env: map[string]string{"SLUICE_NATS_URL": seeds, "SLUICE_NATS_REPLICAS": "5"}, replicas: 5},
		{name: "replicas with the embedded server", args: []string{"--nats-replicas", "3"}, wantErr: "--nats-replicas: must be 1 with the embedded"},
		{name: "zero replicas", args: []string{"--nats-url", seeds, "--nats-replicas", "0"}, wantErr: "--nats-replicas: must be from 1 to 5"},
		{name: "six replicas", args: []string{"--nats-url", seeds, "--nats-replicas", "6"}, wantErr: "--nats-replicas: must be from 1 to 5"},
		{name: "a bad seed among good ones", args: []string{"--nats-url", "nats://a:4222,http://b:4222"}, wantErr: "--nats-url: scheme \"http\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := load(t, tt.args, tt.env)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load() error = %v", err)
			}
			if cfg.NATSReplicas != tt.replicas {
				t.Errorf("NATSReplicas = %d, want %d", cfg.NATSReplicas, tt.replicas)
			}
		})
	}
	file := yamlFile(t, "nats_url: "+seeds+"\nnats_replicas: 3\n")
	if cfg, err := load(t, []string{"--config", file}, nil); err != nil || cfg.NATSReplicas != 3 {
		t.Errorf("from YAML nats_replicas: 3: NATSReplicas = %d, %v; want 3", cfg.NATSReplicas, err)
	}
}
