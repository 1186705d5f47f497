package redisconn

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/tlsconf/tlstest"
)

func TestClientOption(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(notPEM, []byte("nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca := tlstest.NewCA(t, "test CA").File
	tests := []struct {
		name, url, ca string
		wantAddrs     []string
		wantMasterSet string
		wantTLS       bool
		wantErr       string
	}{
		{name: "standalone", url: "redis://redis.internal:6379/2", wantAddrs: []string{"redis.internal:6379"}},
		{name: "default port", url: "redis://redis.internal", wantAddrs: []string{"redis.internal:6379"}},
		{name: "cluster seeds", url: "redis://10.0.0.1:7000?addr=10.0.0.2:7000&addr=10.0.0.3:7000",
			wantAddrs: []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"}},
		{name: "sentinel", url: "redis://s1:26379?addr=s2:26379&master_set=mymaster",
			wantAddrs: []string{"s1:26379", "s2:26379"}, wantMasterSet: "mymaster"},
		{name: "tls", url: "rediss://redis.internal:6380", wantAddrs: []string{"redis.internal:6380"}, wantTLS: true},
		{name: "tls with a CA", url: "rediss://redis.internal:6380", ca: ca, wantAddrs: []string{"redis.internal:6380"}, wantTLS: true},
		{name: "tls sentinel", url: "rediss://s1:26379?master_set=m", ca: ca, wantAddrs: []string{"s1:26379"},
			wantMasterSet: "m", wantTLS: true},
		{name: "valkey", url: "valkey://valkey.internal:6379", wantAddrs: []string{"valkey.internal:6379"}},
		{name: "valkeys", url: "valkeys://valkey.internal:6380", wantAddrs: []string{"valkey.internal:6380"}, wantTLS: true},
		{name: "CA without TLS", url: "redis://redis.internal:6379", ca: ca, wantErr: "needs a rediss://"},
		{name: "CA not PEM", url: "rediss://redis.internal:6380", ca: notPEM, wantErr: "no PEM certificate"},
		{name: "bad scheme", url: "http://redis.internal", wantErr: "invalid URL scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opt, err := ClientOption(tt.url, tt.ca)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ClientOption(%q, %q) error = %v, want %q", tt.url, tt.ca, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ClientOption(%q, %q) = %v", tt.url, tt.ca, err)
			}
			if !slices.Equal(opt.InitAddress, tt.wantAddrs) {
				t.Errorf("InitAddress = %v, want %v", opt.InitAddress, tt.wantAddrs)
			}
			if opt.Sentinel.MasterSet != tt.wantMasterSet {
				t.Errorf("Sentinel.MasterSet = %q, want %q", opt.Sentinel.MasterSet, tt.wantMasterSet)
			}
			if (opt.TLSConfig != nil) != tt.wantTLS {
				t.Errorf("TLS = %v, want %v", opt.TLSConfig != nil, tt.wantTLS)
			}
			if tt.ca != "" && opt.TLSConfig.RootCAs == nil {
				t.Error("RootCAs not set from the CA file")
			}
			if tt.wantMasterSet != "" {
				if opt.Sentinel.TopologyRefreshInterval != sentinelRefresh {
					t.Errorf("Sentinel.TopologyRefreshInterval = %v, want %v", opt.Sentinel.TopologyRefreshInterval, sentinelRefresh)
				}
				if tt.wantTLS && (opt.Sentinel.TLSConfig == nil || opt.Sentinel.TLSConfig.RootCAs == nil) {
					t.Error("rediss:// with sentinels: the sentinels are not asked over TLS with the CA")
				}
			}
			if !opt.DisableCache {
				t.Error("client-side caching left on")
			}
		})
	}
}

func TestOpenRefusesBadURLAtOnce(t *testing.T) {
	t.Parallel()
	start := time.Now()
	if _, err := Open(Options{URL: "redis://x/not-a-db"}); err == nil {
		t.Fatal("Open(bad db) = nil error")
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Open(bad URL) took %v, want no dial", took)
	}
}
